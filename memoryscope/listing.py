"""Memories shown to a person: time-stamped lines grouped by kind, each with its id (what
`print_memory`, `/list_memory` and `memoryscope demo` show)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import tzinfo

from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType

__all__ = ["memory_listing"]

_EXPIRED = "expired"
# Groups in the order they are shown: an agent's core memory, then what was concluded, raw
# conversation, an agent's saved state and expired memories last.
_GROUPS = (
    MemoryType.CORE_MEMORY.value,
    MemoryType.MEMORYOS_PROFILE.value,
    MemoryType.MEMORYOS_KNOWLEDGE.value,
    MemoryType.INSIGHT.value,
    MemoryType.OBS_CUSTOMIZED.value,
    MemoryType.OBSERVATION.value,
    MemoryType.CONVERSATION.value,
    MemoryType.MEMORYOS_SEGMENT.value,
    MemoryType.MEMORYOS_PAGE.value,
    MemoryType.AGENT_STATE.value,
    _EXPIRED,
)
_HEADERS = {
    "en": {
        MemoryType.CORE_MEMORY.value: "core memory",
        MemoryType.INSIGHT.value: "insight memory",
        MemoryType.OBS_CUSTOMIZED.value: "added memory",
        MemoryType.OBSERVATION.value: "observation memory",
        MemoryType.CONVERSATION.value: "conversation memory",
        MemoryType.AGENT_STATE.value: "agent state",
        MemoryType.MEMORYOS_PROFILE.value: "user profile",
        MemoryType.MEMORYOS_KNOWLEDGE.value: "long-term knowledge",
        MemoryType.MEMORYOS_SEGMENT.value: "mid-term segment",
        MemoryType.MEMORYOS_PAGE.value: "dialogue page",
        _EXPIRED: "expired memory",
    },
    "zh": {
        MemoryType.CORE_MEMORY.value: "核心记忆",
        MemoryType.INSIGHT.value: "洞察记忆",
        MemoryType.OBS_CUSTOMIZED.value: "自定义记忆",
        MemoryType.OBSERVATION.value: "观察记忆",
        MemoryType.CONVERSATION.value: "对话记忆",
        MemoryType.AGENT_STATE.value: "智能体状态",
        MemoryType.MEMORYOS_PROFILE.value: "用户画像",
        MemoryType.MEMORYOS_KNOWLEDGE.value: "长期知识",
        MemoryType.MEMORYOS_SEGMENT.value: "中期片段",
        MemoryType.MEMORYOS_PAGE.value: "对话页",
        _EXPIRED: "过期记忆",
    },
}
_NO_MEMORIES = {"en": "No memories.", "zh": "暂无记忆。"}


def memory_listing(memories: Sequence[MemoryNode], language: str, zone: tzinfo | None) -> str:
    """`memories` as `print_memory` shows them: one section per kind, times in `zone`."""
    if not memories:
        return _NO_MEMORIES[language]
    sections: dict[str, list[MemoryNode]] = {group: [] for group in _GROUPS}
    for node in memories:
        group = _EXPIRED if node.status is MemoryStatus.EXPIRED else node.memory_type.value
        sections[group].append(node)
    headers = _HEADERS[language]
    lines: list[str] = []
    for group, nodes in sections.items():
        if not nodes:
            continue
        lines.append(f"----- {headers[group]} ({len(nodes)}) -----")
        lines.extend(f"{node.format(language, zone)} (id: {node.memory_id})" for node in nodes)
    return "\n".join(lines)
