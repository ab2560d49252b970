"""MemoryOS retrieval: one time-stamped context pack from the three tiers; the visits counted."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.history import ChangeSource
from memoryscope.memory import MemoryNode
from memoryscope.stores.base import MemoryStore
from memoryscope.worker import Worker, WorkerParams, register_worker
from memoryscope.workers._memoryos import KNOWLEDGE, PAGE, PROFILE, SEGMENT, HeatParams, clock, segment_heat

__all__ = ["MemoryosPackWorker"]

_HEADINGS = {
    "en": {
        "profile": "User profile:",
        "user": "Knowledge about the user:",
        "assistant": "Knowledge about the assistant:",
        "mid": "Related earlier conversation:",
        "short": "Recent conversation:",
        "none": "No memories.",
    },
    "zh": {
        "profile": "用户画像：",
        "user": "关于用户的知识：",
        "assistant": "关于助手的知识：",
        "mid": "相关的早先对话：",
        "short": "最近的对话：",
        "none": "暂无记忆。",
    },
}


@register_worker("memoryos_pack")
class MemoryosPackWorker(Worker):
    """Put the recalled tiers together: `memories` is the profile, the user and assistant
    knowledge, the mid-term segments with their pages, then the short-term pages; `result` is the
    same as one text pack, every line time-stamped. Retrieval touches the segments it returned:
    each gains a visit and a fresh last access (its heat grows), and each knowledge entry returned
    is marked used (least recently used entries are evicted first) — one store write.
    `memoryos_update_due` is set when a returned segment is now at least `mid_term_heat_threshold`
    hot (run `memoryos_update` to promote it). A caller's `search_filter` narrows `memories` to
    its memory types (its time range and metadata conditions do not apply to the pack)."""

    reads: ClassVar[tuple[str, ...]] = ("short_term_recall", "mid_term_recall", "long_term_recall")
    optional_reads: ClassVar[tuple[str, ...]] = ("query_time", "search_filter")
    writes: ClassVar[tuple[str, ...]] = ("memories", "result", "memoryos_update_due", "details")

    class Params(WorkerParams):
        mid_term_heat_threshold: float = Field(5.0, ge=0, le=1e9, description="Heat at which a segment is due for promotion.")
        heat: HeatParams = Field(default_factory=HeatParams, description="Heat weights.")

    params: Params

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")
        self._language: str = env.settings.language
        self._zone = env.settings.tzinfo

    def run(self, ctx: MemoryContext) -> None:
        now = clock(ctx, self._zone)
        segments = [node for node in ctx.mid_term_recall if node.memory_type is SEGMENT]
        knowledge = [node for node in ctx.long_term_recall if node.memory_type is KNOWLEDGE]
        touched = [
            node.replace(access_count=node.access_count + 1, last_accessed_at=now, updated_at=now, score=None)
            for node in segments
        ]
        touched = [
            node.replace(meta={**node.meta, "memoryos_heat": round(segment_heat(node, now, self.params.heat), 4)})
            for node in touched
        ]
        used = [
            node.replace(access_count=node.access_count + 1, last_accessed_at=now, updated_at=now, score=None)
            for node in knowledge
        ]
        written = [*touched, *used]
        if written:
            requires = {node.memory_id: (node.memory_id,) for node in written}
            self._store.upsert(written, requires=requires, change=ChangeSource.of(ctx))
        hot = [
            node.memory_id for node in touched if segment_heat(node, now, self.params.heat) >= self.params.mid_term_heat_threshold
        ]
        ctx.memoryos_update_due = bool(hot)
        memories = (*ctx.long_term_recall, *ctx.mid_term_recall, *ctx.short_term_recall)
        wanted = ctx.search_filter.memory_types if ctx.search_filter is not None else None
        ctx.memories = tuple(node for node in memories if node.memory_type in wanted) if wanted else memories
        ctx.result = self._pack(ctx)
        ctx.details[self.name] = {
            "short_term": len(ctx.short_term_recall),
            "segments": len(segments),
            "mid_term_pages": len(ctx.mid_term_recall) - len(segments),
            "long_term": len(ctx.long_term_recall),
            "hot_segments": hot,
        }

    def _pack(self, ctx: MemoryContext) -> str:
        words = _HEADINGS.get(self._language, _HEADINGS["en"])
        sections: list[tuple[str, list[MemoryNode]]] = [
            (words["profile"], [node for node in ctx.long_term_recall if node.memory_type is PROFILE]),
            (words["user"], [node for node in ctx.long_term_recall if node.memory_type is KNOWLEDGE and node.key == "user"]),
            (
                words["assistant"],
                [node for node in ctx.long_term_recall if node.memory_type is KNOWLEDGE and node.key == "assistant"],
            ),
            (words["mid"], list(ctx.mid_term_recall)),
            (words["short"], list(ctx.short_term_recall)),
        ]
        lines: list[str] = []
        for heading, nodes in sections:
            if nodes:
                lines.append(heading)
                lines += [self._line(node) for node in nodes]
        return "\n".join(lines) or words["none"]

    def _line(self, node: MemoryNode) -> str:
        text = node.format(self._language, self._zone).replace("\n", " | ")
        if node.memory_type is SEGMENT and node.meta.get("memoryos_keywords"):
            text += f" ({', '.join(node.meta['memoryos_keywords'])})"
        return ("  " if node.memory_type is PAGE and node.meta.get("memoryos_tier") == "mid" else "") + text
