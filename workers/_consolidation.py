"""Helpers shared by the consolidation workers: prompt budgets, ids, text normalisation, parsing.

Not a worker (the leading underscore keeps the registry from importing it as one).
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from memoryscope.context import MemoryContext
from memoryscope.llm_output import iter_json
from memoryscope.memory import MemoryNode, format_time
from memoryscope.timeparse import find_time_expressions, has_unresolved_time_word

__all__ = [
    "estimate_tokens",
    "chunks_within_budget",
    "normalise",
    "observation_id",
    "subject_name",
    "local_time",
    "shown_line",
    "truncate_middle",
    "mentions_time",
    "json_items",
    "NONE_WORDS",
]

# Fixed, so an observation gets the same id in every process and every run (a redo adds nothing).
_OBSERVATION_NAMESPACE = uuid.UUID("6d656d6f-7279-5363-6f70-652d6f627376")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]")

# What an LLM writes instead of a fact when it has none: never stored.
NONE_WORDS = frozenset(
    {"", "none", "null", "nil", "n/a", "na", "no", "nothing", "empty", "unknown", "repeated", "repeat",
     "无", "没有", "空", "重复", "未知", "不适用"}
)  # fmt: skip


def estimate_tokens(text: str) -> int:
    """A cheap upper-leaning token estimate: one per CJK character, one per 4 other characters.

    Good enough to keep a prompt under a budget without loading a tokenizer.
    """
    cjk = len(_CJK.findall(text))
    return cjk + (len(text) - cjk + 3) // 4


def chunks_within_budget(lines: Sequence[str], fixed_tokens: int, budget: int) -> list[list[int]]:
    """Indices of `lines` split into as few consecutive chunks as fit `budget` tokens each
    (with `fixed_tokens` of instructions per chunk). A line too big alone gets a chunk alone."""
    chunks: list[list[int]] = []
    current: list[int] = []
    used = fixed_tokens
    for index, line in enumerate(lines):
        cost = estimate_tokens(line) + 1
        if current and used + cost > budget:
            chunks.append(current)
            current, used = [], fixed_tokens
        current.append(index)
        used += cost
    if current:
        chunks.append(current)
    return chunks


def normalise(text: str) -> str:
    """`text` for exact-duplicate checks: NFKC, case-folded, only letters, digits and CJK kept."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(char for char in folded if char.isalnum())


def observation_id(ctx: MemoryContext, source_ids: Sequence[str], content: str) -> str:
    """The memory id of an observation: the same user, sources and (normalised) content always
    give the same id, so consolidating the same batch twice writes the same nodes."""
    identity = "\x1f".join((ctx.user_name, ctx.target_name, ctx.workspace, ",".join(sorted(source_ids)), normalise(content)))
    return uuid.uuid5(_OBSERVATION_NAMESPACE, identity).hex


def subject_name(ctx: MemoryContext) -> str:
    """Whom the memories are about, as the prompts call them."""
    return ctx.target_name or ctx.user_name


def local_time(node: MemoryNode, zone: ZoneInfo) -> datetime:
    """When the node's message was said (else when it was made), in the configured zone."""
    return (node.message_time or node.created_at).astimezone(zone)


def shown_line(number: int, node: MemoryNode, language: str, zone: ZoneInfo, *, speaker: str = "", max_chars: int = 0) -> str:
    """`3 [2024-10-26 21:26:20 Sat] ann: I play the guitar` (no speaker: no `name:` part)."""
    text = truncate_middle(node.content, max_chars) if max_chars else node.content
    text = " ".join(text.split())  # one line per item, whatever the message's line breaks
    said = format_time(local_time(node, zone), language)
    colon = "：" if language == "zh" else ": "
    who = f"{speaker}{colon}" if speaker else ""
    return f"{number} [{said}] {who}{text}"


def truncate_middle(text: str, max_chars: int) -> str:
    """`text` cut to `max_chars` by keeping its head and tail (where people put what matters)."""
    if len(text) <= max_chars:
        return text
    half = max(1, (max_chars - 1) // 2)
    return f"{text[:half]}…{text[-half:]}"


def mentions_time(text: str, reference: datetime) -> bool:
    """Whether `text` says when something happened: a time expression the rules place, or a
    vague time word ("recently", 前阵子) only an LLM can place."""
    return bool(find_time_expressions(text, reference)) or has_unresolved_time_word(text)


def json_items(text: str) -> list[Any] | None:
    """The JSON array of items in an LLM reply (in code fences or chatter), or None.

    Prefers an array of objects; an object holding such an array (`{"observations": [...]}`)
    counts too, and a lone object is one item. `[]` means "no items" and is a valid answer.
    """
    empty_seen = False
    single: dict[str, Any] | None = None
    for value in iter_json(text):
        if isinstance(value, dict):
            inner = next((item for item in value.values() if isinstance(item, list)), None)
            if inner is None:
                single = single if single is not None else value
                continue
            value = inner
        if isinstance(value, list):
            if value and all(isinstance(item, dict) for item in value):
                return value
            empty_seen = empty_seen or not value
    if empty_seen:
        return []
    return [single] if single is not None else None
