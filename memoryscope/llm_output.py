"""Reading what an LLM answered, tolerantly, and asking again once when it cannot be read.

LLMs wrap JSON in code fences, write Python literals or markdown tables instead, add chatter
before and after, bold their numbers, or drift from a line format. The readers here find the
structure inside such text, so every worker's parser shares one tolerant layer:

- `iter_json` / `extract_json`: JSON values, also written loosely (single quotes, trailing
  commas, `None`; read with `ast.literal_eval`, never `eval`), then markdown tables as lists of
  row objects; `item_field` and `as_number` read such objects whatever the key's case or spelling.
- `reply_lines` / `numbered_lines` / `labelled`: lines without bullets, emphasis and table
  pipes, with the number they start with (`1.`, `[2]`, `**3**:`, `Sentence 4`) and `key: value`.
- `relation` / `relation_and_number`: the keep/repeat/contradict labels the prompts teach, in
  English and Chinese, any case and inflection.

Each reader is strict about what it accepts (an unrelated reply reads as nothing), so `ask`
can retry once with a repair instruction and then give up on that item (returning None): a
workflow never stores garbage and never crashes on a malformed answer. A failing endpoint is
different: its `ModelError` propagates, so the run fails cleanly and its input stays pending.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from memoryscope._llm_structures import TABLE_SEPARATOR, iter_json, strip_markup
from memoryscope.models.base import ChatMessage, GenerationModel

__all__ = [
    "iter_json",
    "extract_json",
    "strip_markup",
    "item_field",
    "as_number",
    "ReplyLine",
    "reply_lines",
    "numbered_lines",
    "labelled",
    "Relation",
    "relation",
    "relation_and_number",
    "ask",
    "REPAIR_INSTRUCTIONS",
]

logger = logging.getLogger("memoryscope.llm_output")

T = TypeVar("T")
Relation = Literal["keep", "repeat", "contradict"]

REPAIR_INSTRUCTIONS = {
    "en": "Your answer could not be read. Reply again with only the requested format, nothing else:\n{format}",
    "zh": "无法解析你的回答。请只按要求的格式重新回答，不要有其他内容：\n{format}",
}

# Words that may name an item before its number: `Sentence 3`, `Result: <3>`, `句子3`, `第3条`.
_ITEM_WORDS = (
    r"sentence|message|msg|fact|item|memory|old|observation|attribute|result|judge?ment|decision|verdict"
    r"|number|num|no\.?|id|句子|消息|事实|记忆|观察|属性|结果|判断|序号|编号|第"
)
_NUMBERED = re.compile(
    rf"(?:(?P<word>{_ITEM_WORDS})\s*[:：#]?\s*)?(?P<open>[<\[(（【#])?\s*(?P<number>\d{{1,6}})(?!\d)\s*(?P<close>[>\])）】])?"
    r"(?:\s*[句条号项])?(?P<mark>\s*(?:[:：、,，=|)）]|\.(?!\d)|-(?=\s)))?\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
_BULLET = re.compile(r"^(?:[-*+•·]|>|#{1,6})\s+")
_LABELLED = re.compile(r"^(?P<label>[^:：=]{1,60}?)\s*(?:[:：=]|\s[-–—]\s)\s*(?P<value>.*\S)\s*$")
_NUMBER_TEXT = re.compile(r"[<\[(（【#\s]*(?:N|No\.?)?\s*(\d{1,9})\s*[>\])）】.\s]*", re.IGNORECASE)
_KEY_JUNK = re.compile(r"[\s_\-.:：()（）]+")

_RELATION_FORMS: dict[Relation, tuple[str, ...]] = {
    "contradict": (
        "contradict", "contradicts", "contradicted", "contradicting", "contradiction", "contradictions", "contradictory",
        "conflict", "conflicts", "conflicted", "conflicting", "inconsistent", "矛盾", "相矛盾", "冲突", "被否定", "否定",
    ),
    "repeat": (
        "repeat", "repeats", "repeated", "repeating", "repetition", "duplicate", "duplicates", "duplicated", "duplication",
        "contain", "contains", "contained", "containing", "include", "includes", "included", "same as", "重复", "包含",
        "被包含", "已包含",
    ),
    "keep": (
        "keep", "kept", "none", "no relation", "no relationship", "unrelated", "not related", "new", "stays", "stay",
        "保留", "无", "无关", "新",
    ),
}  # fmt: skip
_RELATION = re.compile(
    r"^[\s\"'`<\[(（【]*("
    + "|".join(
        re.escape(form).replace(r"\ ", r"[\s_-]+")
        for form in sorted((form for forms in _RELATION_FORMS.values() for form in forms), key=len, reverse=True)
    )
    + r")(?![A-Za-z])[\s\"'`>\])）】]*",
    re.IGNORECASE,
)
_RELATION_OF = {" ".join(form.split()): name for name, forms in _RELATION_FORMS.items() for form in forms}
# What may stand between a relation and the number of the fact it relates to: `of fact 2`, `with <2>`, `与第2条`.
_OTHER_NUMBER = re.compile(
    r"^[\s|,;:：=>\])）】(（-]*(?:(?:of|with|to|by|in|as|than|和|与|跟|同)\s*)?(?:(?:the\s+)?(?:fact|memory|sentence|事实|记忆|第)\s*)?"
    r"[<\[(（【#]?\s*N?(\d{1,6})(?!\d)",
    re.IGNORECASE,
)


def extract_json(text: str) -> Any | None:
    """The first JSON-like object or array in `text` (see `iter_json`), or None."""
    return next(iter_json(text), None)


def item_field(item: Mapping[str, Any], names: Sequence[str]) -> Any:
    """`item`'s value under the first of `names` it has (case, spaces, `_`, `-` and dots do not
    matter: a table's "Sentence No." is `sentenceno`), else under a key that has one of `names`
    as a word ("Old memory" for "old"); None when it has none."""
    keys = {_key(key): key for key in item}
    for name in names:
        if _key(name) in keys:
            return item[keys[_key(name)]]
    for name in names:
        for key in item:
            if name.casefold() in re.split(r"[^\w#]+", key.casefold()):
                return item[key]
    return None


def as_number(value: Any) -> int | None:
    """An item number the model wrote: `3`, `3.0`, `"3"`, `"<3>"`, `"N3"`, `"#3"`, `"No. 3"`; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    match = _NUMBER_TEXT.fullmatch(strip_markup(value)) if isinstance(value, str) else None
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class ReplyLine:
    """One line of a reply, as `reply_lines` reads it."""

    text: str  # without bullet, emphasis, table pipes, and the number it starts with
    number: int | None  # the number it starts with: `1.`, `[2]`, `3：`, `**4**:`, `Sentence 5`, `| 6 |`
    listed: bool  # a list item: a bullet, or a number set off as one (bracket, `.`, `:`, `)`, a word before it)


def reply_lines(text: str) -> list[ReplyLine]:
    """The non-empty lines of `text`, code fences and table separators left out."""
    lines: list[ReplyLine] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("```") or TABLE_SEPARATOR.match(line):
            continue
        line = strip_markup(line)
        if line.startswith("|"):
            line = line.strip("| \t")
        bullet = _BULLET.match(line)
        if bullet:
            line = line[bullet.end() :]
        match = _NUMBERED.match(line)
        if match is None:
            lines.append(ReplyLine(line, None, bool(bullet)))
            continue
        marked = any(match.group(part) for part in ("word", "open", "close", "mark"))
        lines.append(ReplyLine(match.group("rest").strip(), int(match.group("number")), bool(bullet) or marked))
    return lines


def numbered_lines(text: str) -> dict[int, str]:
    """`1. foo` / `[2] bar` / `3：baz` / `**4**: qux` lines → {1: "foo", 2: "bar", ...} (first wins)."""
    found: dict[int, str] = {}
    for line in reply_lines(text):
        if line.number is not None and line.listed:
            found.setdefault(line.number, line.text)
    return found


def labelled(text: str) -> tuple[str, str] | None:
    """`hobby: guitar`, `job - nurse`, `home city = Beijing` → (label, value); else None."""
    match = _LABELLED.match(text)
    return (match.group("label").strip(), match.group("value").strip()) if match else None


def relation(value: Any) -> Relation | None:
    """The relation a label names ("Contradicts", "repeated", "no relation", "矛盾", "被包含"), or None."""
    found = _leading_relation(value)
    return None if found is None else found[0]


def relation_and_number(text: str) -> tuple[Relation, int | None] | None:
    """A relation label and the number of what it relates to: `contradicts 1`, `repeat of fact 2`,
    `contradicted by <N1>`, `矛盾 1`, `keep` (no number); None when `text` starts with no label."""
    found = _leading_relation(text)
    if found is None:
        return None
    other = _OTHER_NUMBER.match(found[1])
    return found[0], int(other.group(1)) if other else None


def _leading_relation(value: Any) -> tuple[Relation, str] | None:
    """The relation `value` starts with, and the text after it."""
    text = strip_markup(value) if isinstance(value, str) else ""
    found = _RELATION.match(text)
    if found is None:
        return None
    return _RELATION_OF[" ".join(re.split(r"[\s_-]+", found.group(1).casefold()))], text[found.end() :]


def _key(name: str) -> str:
    return _KEY_JUNK.sub("", name.casefold())


def ask(
    model: GenerationModel,
    messages: Sequence[ChatMessage],
    parse: Callable[[str], T | None],
    *,
    expected_format: str,
    language: str = "en",
    what: str = "answer",
) -> T | None:
    """`parse(model's reply)`; on None, one retry with a repair instruction; then None (logged)."""
    reply = model.chat(messages)
    parsed = parse(reply)
    if parsed is not None:
        return parsed
    repair = REPAIR_INSTRUCTIONS.get(language, REPAIR_INSTRUCTIONS["en"]).format(format=expected_format)
    retry = [*messages, ChatMessage("assistant", reply), ChatMessage("user", repair)]
    second = model.chat(retry)
    parsed = parse(second)
    if parsed is None:
        logger.warning("skipped an unreadable %s from %s after one repair attempt: %.200r", what, model.model_name, second)
    return parsed
