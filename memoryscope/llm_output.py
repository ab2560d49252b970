"""Reading what an LLM answered, tolerantly, and asking again once when it cannot be read.

LLMs wrap JSON in code fences, add chatter before and after, or drift from a line format. The
parsers here find the structure inside such text; `ask` retries once with a repair instruction
and then gives up on that item (returning None), so a workflow never stores garbage and never
crashes on a malformed answer. A failing endpoint is different: its `ModelError` propagates,
so the run fails cleanly and its input stays pending for the next run.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from memoryscope.models.base import ChatMessage, GenerationModel

__all__ = ["extract_json", "numbered_lines", "ask", "REPAIR_INSTRUCTIONS"]

logger = logging.getLogger("memoryscope.llm_output")

T = TypeVar("T")

_FENCE = re.compile(r"```(?:json|JSON|yaml)?\s*\n?(.*?)```", re.DOTALL)
_NUMBERED = re.compile(r"^\s*(?:[-*]\s*)?[\[(（【]?\s*(\d+)\s*[\])）】.:：、]\s*(.*?)\s*$")

REPAIR_INSTRUCTIONS = {
    "en": "Your answer could not be read. Reply again with only the requested format, nothing else:\n{format}",
    "zh": "无法解析你的回答。请只按要求的格式重新回答，不要有其他内容：\n{format}",
}


def extract_json(text: str) -> Any | None:
    """The first JSON object or array in `text` (inside code fences or chatter), or None."""
    candidates = [match.group(1) for match in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        for opening in ("{", "["):
            start = candidate.find(opening)
            while start != -1:
                end = _matching_close(candidate, start)
                if end is None:
                    break
                try:
                    return json.loads(candidate[start : end + 1])
                except json.JSONDecodeError:
                    start = candidate.find(opening, start + 1)
    return None


def _matching_close(text: str, start: int) -> int | None:
    """Index of the bracket closing the one at `start`, skipping strings; None if unbalanced."""
    pairs = {"{": "}", "[": "]"}
    stack: list[str] = []
    in_string = False
    escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in pairs:
            stack.append(pairs[char])
        elif char in "}]":
            if not stack or stack.pop() != char:
                return None
            if not stack:
                return index
    return None


def numbered_lines(text: str) -> dict[int, str]:
    """`1. foo` / `[2] bar` / `3：baz` lines → {1: "foo", 2: "bar", 3: "baz"} (first wins)."""
    found: dict[int, str] = {}
    for line in text.splitlines():
        match = _NUMBERED.match(line)
        if match and int(match.group(1)) not in found:
            found[int(match.group(1))] = match.group(2)
    return found


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
