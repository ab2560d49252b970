"""MemoryOS's move from short term to mid term: overflow pages join topic segments, one LLM call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.llm_output import as_number, extract_json, item_field
from memoryscope.memory import MemoryNode, MemoryStatus
from memoryscope.stores.base import MemoryStore
from memoryscope.stores.metadata import MetadataCondition
from memoryscope.worker import LLMWorker, LLMWorkerParams, register_worker
from memoryscope.workers._memoryos import (
    MID,
    PAGE,
    SEGMENT,
    HeatParams,
    clock,
    page_line,
    scan_all,
    scope_filter,
    segment_heat,
    segment_id_for,
)

__all__ = ["MemoryosMidTermWorker", "parse_segment_summaries"]

Summaries = dict[int, tuple[str, tuple[str, ...]]]
_LABELS = {"en": ("Segment", "Previous summary: ", "New pages:"), "zh": ("片段", "之前的摘要：", "新的对话页：")}


@register_worker("memoryos_mid_term")
class MemoryosMidTermWorker(LLMWorker):
    """When the short term holds more than `short_term_capacity` pages, move the oldest overflow
    to mid term: each page joins the most similar segment (cosine of the page's vector and the
    segment's, at least `segment_similarity_threshold`), else opens a new segment (which later
    overflow pages of the same move may join). Then ONE LLM call writes the summary and keywords
    of every segment touched. Each touched segment gains interaction length (one per page) and a
    fresh last access. When more than `mid_term_capacity` segments are valid, the coldest (lowest
    heat) are evicted with their pages (marked expired).

    Writes nothing itself: `mid_term_writes` is what `memoryos_store` writes, atomically. An
    unreadable answer (after one repair request) moves nothing: the pages stay short term, and
    `memoryos_notes` says so."""

    reads: ClassVar[tuple[str, ...]] = ("short_term_pages", "mid_term_segments")
    optional_reads: ClassVar[tuple[str, ...]] = ("query_time", "memoryos_notes")
    writes: ClassVar[tuple[str, ...]] = ("mid_term_writes", "memoryos_notes", "details")
    prompt_name = "memoryos_mid_term"
    expected_format: ClassVar[dict[str, str]] = {
        "en": 'one JSON object {"segments": [{"segment": 1, "summary": "...", "keywords": ["..."]}]}, one entry per segment',
        "zh": '一个 JSON 对象 {"segments": [{"segment": 1, "summary": "...", "keywords": ["..."]}]}，每个片段一项',
    }
    answer_name = "segment summaries"

    class Params(LLMWorkerParams):
        short_term_capacity: int = Field(7, gt=0, le=10_000, description="Pages the short term holds (MemoryOS's name).")
        mid_term_capacity: int = Field(1000, gt=0, le=1_000_000, description="Segments the mid term holds; the coldest go first.")
        segment_similarity_threshold: float = Field(
            0.6, ge=-1, le=1, description="A page joins a segment this similar (cosine) or more, else opens a new one."
        )
        heat: HeatParams = Field(default_factory=HeatParams, description="Heat weights (which segments are coldest).")

    params: Params

    def bind(self, env: Env) -> None:
        super().bind(env)
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")

    def run(self, ctx: MemoryContext) -> None:
        pages = ctx.short_term_pages
        overflow = len(pages) - self.params.short_term_capacity
        if overflow <= 0:
            ctx.details[self.name] = {"moved": 0}
            return
        moving = pages[:overflow]
        groups, openers = self._assign(moving, ctx.mid_term_segments)
        existing = {segment.memory_id: segment for segment in ctx.mid_term_segments}
        order = list(groups)
        prompt = self.prompt_messages(segments=self._segments_text(order, groups, existing), count=len(order))
        summaries = self.ask(prompt, lambda reply: parse_segment_summaries(reply, len(order)))
        if summaries is None:
            ctx.memoryos_notes = (
                *ctx.memoryos_notes,
                f"mid term: unreadable segment summaries, {len(moving)} page(s) left in short term",
            )
            ctx.details[self.name] = {"moved": 0, "skipped": len(moving), "llm_calls": 1}
            return
        now = clock(ctx, self._zone)
        writes: dict[str, MemoryNode] = {}
        for number, segment_id in enumerate(order, start=1):
            summary, keywords = summaries[number]
            joined = groups[segment_id]
            for page in joined:
                writes[page.memory_id] = page.replace(
                    meta={**page.meta, "memoryos_tier": MID, "memoryos_segment_id": segment_id}, updated_at=now
                )
            old = existing.get(segment_id)
            writes[segment_id] = self._segment(ctx, segment_id, old, openers.get(segment_id), joined, summary, keywords, now)
        evicted = self._evict(ctx, existing, writes, now)
        ctx.mid_term_writes = tuple(writes.values())
        ctx.details[self.name] = {
            "moved": len(moving),
            "segments": len(order),
            "new_segments": len(openers),
            "evicted_segments": evicted,
            "llm_calls": 1,
        }

    def _assign(
        self, moving: Sequence[MemoryNode], segments: Sequence[MemoryNode]
    ) -> tuple[dict[str, list[MemoryNode]], dict[str, MemoryNode]]:
        """Which segment each moving page joins (by id, in first-joined order), and the pages that
        opened new segments (by the new segment's id)."""
        vectors = self._store.get_vectors([node.memory_id for node in (*segments, *moving)])
        candidate_ids = [segment.memory_id for segment in segments if segment.memory_id in vectors]
        candidates = [vectors[memory_id] for memory_id in candidate_ids]
        groups: dict[str, list[MemoryNode]] = {}
        openers: dict[str, MemoryNode] = {}
        threshold = self.params.segment_similarity_threshold
        for page in moving:
            vector = vectors.get(page.memory_id)
            best = None
            if vector is not None and candidates:
                scores = np.stack(candidates) @ vector
                position = int(np.argmax(scores))
                if float(scores[position]) >= threshold:
                    best = candidate_ids[position]
            if best is None:
                best = segment_id_for(page.memory_id)
                openers[best] = page
                if vector is not None:
                    candidate_ids.append(best)
                    candidates.append(vector)
            groups.setdefault(best, []).append(page)
        return groups, openers

    def _segments_text(self, order: list[str], groups: dict[str, list[MemoryNode]], existing: dict[str, MemoryNode]) -> str:
        blocks = []
        for number, segment_id in enumerate(order, start=1):
            old = existing.get(segment_id)
            segment, previous, pages = _LABELS.get(self._language, _LABELS["en"])
            lines = [f"{segment} {number}", f"{previous}{old.content if old else ''}", pages]
            lines += [page_line(page, self._language, self._zone) for page in groups[segment_id]]
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)

    def _segment(
        self,
        ctx: MemoryContext,
        segment_id: str,
        old: MemoryNode | None,
        opener: MemoryNode | None,
        joined: list[MemoryNode],
        summary: str,
        keywords: tuple[str, ...],
        now: Any,
    ) -> MemoryNode:
        if old is None:
            first = opener or joined[0]
            old = MemoryNode(
                user_name=ctx.user_name,
                target_name=ctx.target_name,
                workspace=ctx.workspace,
                memory_id=segment_id,
                memory_type=SEGMENT,
                content=summary,
                message_time=first.message_time,
                created_at=now,
                meta={"memoryos_interaction_length": 0, "memoryos_page_count": 0},
            )
        length = int(old.meta.get("memoryos_interaction_length", 0) or 0) + len(joined)
        count = int(old.meta.get("memoryos_page_count", 0) or 0) + len(joined)
        meta = {
            **old.meta,
            "memoryos_keywords": list(keywords),
            "memoryos_interaction_length": length,
            "memoryos_page_count": count,
        }
        updated = old.replace(content=summary, key=", ".join(keywords), meta=meta, last_accessed_at=now, updated_at=now)
        return updated.replace(meta={**meta, "memoryos_heat": round(segment_heat(updated, now, self.params.heat), 4)})

    def _evict(self, ctx: MemoryContext, existing: dict[str, MemoryNode], writes: dict[str, MemoryNode], now: Any) -> int:
        """Expire the coldest segments past `mid_term_capacity`, with their pages; returns how many."""
        segments = {**existing, **{key: node for key, node in writes.items() if node.memory_type is SEGMENT}}
        excess = len(segments) - self.params.mid_term_capacity
        if excess <= 0:
            return 0
        coldest = sorted(segments.values(), key=lambda node: (segment_heat(node, now, self.params.heat), node.memory_id))[:excess]
        ids = tuple(node.memory_id for node in coldest)
        stored_pages = scan_all(
            self._store, scope_filter(ctx, PAGE, metadata=(MetadataCondition("memoryos_segment_id", "in", ids),))
        )
        moved_pages = [
            node for node in writes.values() if node.memory_type is PAGE and node.meta.get("memoryos_segment_id") in ids
        ]
        for node in (*coldest, *stored_pages, *moved_pages):
            writes[node.memory_id] = writes.get(node.memory_id, node).replace(status=MemoryStatus.EXPIRED, updated_at=now)
        return len(coldest)


def parse_segment_summaries(reply: str, count: int) -> Summaries | None:
    """`{number: (summary, keywords)}` for segments 1..count, or None unless every one has a summary."""
    data = extract_json(reply)
    items = data.get("segments") if isinstance(data, dict) else data
    if isinstance(data, dict) and items is None and count == 1 and item_field(data, ["summary"]) is not None:
        items = [{"segment": 1, **data}]
    if not isinstance(items, list):
        return None
    found: Summaries = {}
    for position, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            return None
        number = as_number(item_field(item, ["segment", "id", "number"]))
        number = position if number is None else number
        summary = item_field(item, ["summary"])
        if not isinstance(summary, str) or not summary.strip() or not 1 <= number <= count:
            return None
        found[number] = (summary.strip(), _keywords(item_field(item, ["keywords", "keyword"])))
    return found if len(found) == count else None


def _keywords(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.replace("，", ",").split(",")
    if not isinstance(value, list):
        return ()
    return tuple(str(word).strip() for word in value if str(word).strip())[:10]
