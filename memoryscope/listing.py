"""Memories shown to a person: time-stamped lines grouped by kind, each with its id (what
`print_memory`, `/list_memory` and `memoryscope demo` show)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import tzinfo

from memoryscope.memory import MemoryNode, MemoryStatus
from memoryscope.memory_types import memory_type_spec

__all__ = ["memory_listing"]

_EXPIRED = {"en": "expired memory", "zh": "过期记忆"}
_NO_MEMORIES = {"en": "No memories.", "zh": "暂无记忆。"}


def memory_listing(memories: Sequence[MemoryNode], language: str, zone: tzinfo | None) -> str:
    """`memories` as `print_memory` shows them: one section per type, in the order the types were
    registered for (`memoryscope.memory_types`: what was concluded first, raw conversation
    after), each headed by the type's label; expired memories last. Times in `zone`."""
    if not memories:
        return _NO_MEMORIES[language]
    sections: dict[str, list[MemoryNode]] = {}
    expired = []
    for node in memories:
        if node.status is MemoryStatus.EXPIRED:
            expired.append(node)
        else:
            sections.setdefault(node.memory_type.value, []).append(node)
    order = sorted(sections, key=lambda name: memory_type_spec(name).order)
    groups = [(memory_type_spec(name).label(language), sections[name]) for name in order]
    if expired:
        groups.append((_EXPIRED[language], expired))
    lines: list[str] = []
    for header, nodes in groups:
        lines.append(f"----- {header} ({len(nodes)}) -----")
        lines.extend(f"{node.format(language, zone)} (id: {node.memory_id})" for node in nodes)
    return "\n".join(lines)
