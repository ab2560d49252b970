"""Memories shown to a person: time-stamped lines grouped by kind, each with its id (what
`print_memory`, `/list_memory` and `memoryscope demo` show)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import tzinfo

from memoryscope.memory import MemoryNode, MemoryStatus
from memoryscope.memory_types import memory_type_spec

__all__ = ["EXPIRED_SECTION", "memory_listing"]

_EXPIRED = {"en": "expired memory", "zh": "过期记忆"}
_NO_MEMORIES = {"en": "No memories.", "zh": "暂无记忆。"}
_SOME_SHOWN = {"en": "{total}; the newest {shown} shown", "zh": "共 {total} 条，显示最新 {shown} 条"}
EXPIRED_SECTION = "expired"  # the key of the expired memories in `totals`


def memory_listing(
    memories: Sequence[MemoryNode], language: str, zone: tzinfo | None, totals: Mapping[str, int] | None = None
) -> str:
    """`memories` as `print_memory` shows them: one section per type, in the order the types were
    registered for (`memoryscope.memory_types`: what was concluded first, raw conversation
    after), each headed by the type's label and count; expired memories last. Times in `zone`.

    `totals`: how many memories of each type (by `MemoryType` value; `EXPIRED_SECTION` for the
    expired ones) the user has in all; a section showing fewer says so: `(400; the newest 100
    shown)`."""
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
    groups = [(memory_type_spec(name).label(language), name, sections[name]) for name in order]
    if expired:
        groups.append((_EXPIRED[language], EXPIRED_SECTION, expired))
    lines: list[str] = []
    for header, key, nodes in groups:
        total = (totals or {}).get(key, 0)
        count = _SOME_SHOWN[language].format(total=total, shown=len(nodes)) if total > len(nodes) else str(len(nodes))
        lines.append(f"----- {header} ({count}) -----")
        lines.extend(f"{node.format(language, zone)} (id: {node.memory_id})" for node in nodes)
    return "\n".join(lines)
