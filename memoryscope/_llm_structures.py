"""The structures inside an LLM reply: JSON, what models write instead of it, and markdown tables.

Models asked for JSON also answer with Python literals (`{'1': 3}`, `None`), trailing commas,
`true` beside single quotes, or a markdown table. Such text is read here without running any of
it: JSON first, then the literal through `ast.literal_eval` (never `eval`), and only plain
values come out (objects, arrays, strings, numbers, booleans, null), as `json.loads` gives them.
`memoryscope.llm_output` is the public face of this module.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from typing import Any

__all__ = ["iter_json", "table_rows", "strip_markup", "TABLE_SEPARATOR"]

_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)```", re.DOTALL)
_OPENING = re.compile(r"[\[{]")
_DECODER = json.JSONDecoder()
_CLOSING = {"{": "}", "[": "]"}
_PYTHON_WORDS = {"true": "True", "false": "False", "null": "None"}
_WORD = re.compile(r"[A-Za-z_]\w*")
_TRAILING_COMMA = re.compile(r",\s*[}\]]")
# A reply is short; these bound what a pathological one (thousands of unclosed brackets) costs:
# brackets tried per text, the longest loose literal, characters scanned for loose literals per text.
_MAX_OPENINGS = 2_000
_MAX_LITERAL_CHARS = 20_000
_LOOSE_SCAN_CHARS = 200_000
TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_EMPHASIS = re.compile(r"(\*\*|__|\*|`)(?=\S)(.+?)(?<=\S)\1")


def iter_json(text: str) -> Iterator[Any]:
    """Every JSON-like value that starts at a `{` or `[` of `text`, code-fenced parts first, in
    order; then each markdown table, as a list of row objects (header cell → cell text)."""
    candidates = [match.group(1) for match in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        scan_budget = _LOOSE_SCAN_CHARS
        for count, opening in enumerate(_OPENING.finditer(candidate)):
            start = opening.start()
            if count == _MAX_OPENINGS:
                break
            try:
                value, _ = _DECODER.raw_decode(candidate, start)
            except (ValueError, RecursionError):
                stop = min(len(candidate), start + _MAX_LITERAL_CHARS, start + scan_budget)
                end = _matching_end(candidate, start, stop)
                scan_budget -= (end or stop) - start
                value = None if end is None else _loose_value(candidate[start:end])
                if value is None:
                    continue
            yield value
    yield from (rows for rows in table_rows(text) if rows)


def table_rows(text: str) -> list[list[dict[str, str]]]:
    """The markdown tables of `text` (a header row, a `|---|` row, then rows), each as a list of
    rows keyed by the header's cells; cells lose their markup (`**1**` → `1`)."""
    lines = text.splitlines()
    tables: list[list[dict[str, str]]] = []
    for index in range(1, len(lines)):
        if not TABLE_SEPARATOR.match(lines[index]) or "|" not in lines[index - 1]:
            continue
        header = _cells(lines[index - 1])
        rows = []
        for line in lines[index + 1 :]:
            if "|" not in line or TABLE_SEPARATOR.match(line):
                break
            rows.append(dict(zip(header, _cells(line), strict=False)))  # a short row leaves its last cells out
        tables.append(rows)
    return tables


def strip_markup(text: str) -> str:
    """`text` without markdown emphasis and inline code marks: `**1**` → `1`, `` `x` `` → `x`."""
    previous = None
    while previous != text:  # nested emphasis (`***x***`) unwraps one layer per pass
        previous, text = text, _EMPHASIS.sub(r"\2", text)
    return text


def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [strip_markup(cell.replace("\\|", "|").strip()) for cell in re.split(r"(?<!\\)\|", inner)]


def _loose_value(snippet: str) -> Any | None:
    """The object or array `snippet` holds, written loosely (single quotes, trailing commas,
    Python's True/None), or None."""
    for read, words in ((json.loads, {}), (ast.literal_eval, _PYTHON_WORDS)):
        try:
            value = read(_normalised(snippet, words))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        plain = _plain(value)
        if isinstance(plain, dict | list):
            return plain
    return None


def _scan(text: str, start: int, stop: int) -> Iterator[tuple[int, str, bool]]:
    """(index, character, whether it belongs to a quoted string) for `text[start:stop]`."""
    quote = ""
    escaped = False
    for index in range(start, stop):
        char = text[index]
        if quote:
            yield index, char, True
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        else:
            quote = char if char in "\"'" else ""
            yield index, char, bool(quote)


def _matching_end(text: str, start: int, stop: int) -> int | None:
    """Where the bracket opened at `start` closes (the index after it); None when it does not
    close before `stop`, or a bracket of the other kind closes first."""
    stack: list[str] = []
    for index, char, quoted in _scan(text, start, stop):
        if quoted:
            if char == "\n":
                return None  # a string is one line: an apostrophe in prose starts none
        elif char in _CLOSING:
            stack.append(_CLOSING[char])
        elif char in "}]":
            if not stack or stack.pop() != char:
                return None
            if not stack:
                return index + 1
    return None


def _normalised(snippet: str, words: dict[str, str]) -> str:
    """`snippet` without the commas before a closing bracket, its bare `words` replaced (JSON's
    true/false/null by Python's), strings left as they are."""
    out: list[str] = []
    skip_to = 0
    for index, char, quoted in _scan(snippet, 0, len(snippet)):
        if index < skip_to:
            continue
        if not quoted and (word := _WORD.match(snippet, index)) and not snippet[index - 1 : index].isalnum():
            out.append(words.get(word.group(0), word.group(0)))
            skip_to = word.end()
        elif quoted or not (char == "," and _TRAILING_COMMA.match(snippet, index)):
            out.append(char)
    return "".join(out)


def _plain(value: Any) -> Any:
    """`value` as JSON would give it (tuples as lists, keys as text), or None when it holds
    anything else (sets, bytes, complex numbers, non-text keys)."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple):
        items = [_plain(item) for item in value]
        return None if any(item is None and original is not None for item, original in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        plain: dict[str, Any] = {}
        for key, item in value.items():
            converted = _plain(item)
            if not isinstance(key, str | int) or isinstance(key, bool) or (converted is None and item is not None):
                return None
            plain[str(key)] = converted
        return plain
    return None
