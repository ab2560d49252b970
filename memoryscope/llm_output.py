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
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from memoryscope.models.base import ChatMessage, GenerationModel

__all__ = ["extract_json", "iter_json", "numbered_lines", "ask", "REPAIR_INSTRUCTIONS"]

logger = logging.getLogger("memoryscope.llm_output")

T = TypeVar("T")

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_OPENING = re.compile(r"[\[{]")
_DECODER = json.JSONDecoder()
_NUMBERED = re.compile(r"^\s*(?:[-*]\s*)?[\[(（【]?\s*(\d+)\s*[\])）】.:：、]\s*(.*?)\s*$")

REPAIR_INSTRUCTIONS = {
    "en": "Your answer could not be read. Reply again with only the requested format, nothing else:\n{format}",
    "zh": "无法解析你的回答。请只按要求的格式重新回答，不要有其他内容：\n{format}",
}


def iter_json(text: str) -> Iterator[Any]:
    """Every JSON value that starts at a `{` or `[` of `text`, code-fenced parts first, in order."""
    candidates = [match.group(1) for match in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        for opening in _OPENING.finditer(candidate):
            try:
                value, _ = _DECODER.raw_decode(candidate, opening.start())
            except ValueError:
                continue
            yield value


def extract_json(text: str) -> Any | None:
    """The first JSON object or array in `text` (inside code fences or chatter), or None."""
    return next(iter_json(text), None)


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
