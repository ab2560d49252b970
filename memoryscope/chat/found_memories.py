"""What a chat turn found: the reply's `meta_data`, and the reply given without an LLM.

Memories are shown as time-stamped lines, `[2024-10-26 21:26:20 Sat] I play the cello`; a reply
the assistant gave in an earlier turn starts with the assistant's name, `[...] AI: Try the
Kawabata novel`, so the model (and a reader) can tell its own words from the user's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from zoneinfo import ZoneInfo

from memoryscope.chat.base import ChatResponse
from memoryscope.chat.prompt import NO_MEMORIES
from memoryscope.config.specs import GlobalSettings
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.models.base import ChatMessage
from memoryscope.workflow import RunResult

__all__ = ["found_meta", "memory_lines", "memories_instead", "NO_LLM_NOTICE", "NO_LLM_HEADER"]

NO_LLM_NOTICE = {
    "en": "No LLM is configured, so instead of a reply here is what I remember that fits your message:",
    "zh": "未配置大模型，以下是与你的消息相关的记忆（代替回复）：",
}
NO_LLM_HEADER = {"en": "What I remember that fits your message:", "zh": "与你的消息相关的记忆："}


def found_meta(found: RunResult, settings: GlobalSettings, retrieve_operation: str) -> dict[str, Any]:
    """The reply's `meta_data`: the memories found (text, lines, ids) and the time each step took."""
    memories = list(found.context.memories)
    lines = memory_lines(memories, settings.language, settings.tzinfo)
    timings = dict(found.timings)
    timings[retrieve_operation] = found.total_seconds
    # `memories` is the text MemoryScope 0.1.x returned; the lines and ids for code that wants them
    return {
        "memories": "\n".join(lines),
        "memory_lines": lines,
        "memory_ids": [m.memory_id for m in memories],
        "timings": timings,
    }


def memory_lines(memories: Sequence[MemoryNode], language: str, tz: ZoneInfo) -> list[str]:
    """Each memory as a time-stamped line; an assistant's reply after its speaker's name."""
    return [_as_said(memory).format(language, tz) for memory in memories]


def memories_instead(meta: dict[str, Any], language: str, first: bool) -> ChatResponse:
    """The reply without an LLM: the memories found, after the notice (`first` reply of a chat)
    or a short header."""
    header = (NO_LLM_NOTICE if first else NO_LLM_HEADER)[language]
    reply = header + "\n" + (meta["memories"] or NO_MEMORIES[language])
    meta["notice"] = NO_LLM_NOTICE[language]
    return ChatResponse(ChatMessage("assistant", reply), meta)


def _as_said(memory: MemoryNode) -> MemoryNode:
    if memory.memory_type is not MemoryType.CONVERSATION or memory.meta.get("role") != "assistant":
        return memory
    speaker = memory.meta.get("speaker")
    name = speaker if isinstance(speaker, str) and speaker.strip() else "assistant"
    return memory.replace(content=f"{name}: {memory.content}")
