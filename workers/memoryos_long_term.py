"""MemoryOS's promotion: a hot mid-term segment updates the user profile and the knowledge, one LLM call each."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.llm_output import extract_json, item_field
from memoryscope.memory import MemoryNode, MemoryStatus
from memoryscope.stores.base import MemoryStore
from memoryscope.stores.metadata import MetadataCondition
from memoryscope.worker import LLMWorker, LLMWorkerParams, register_worker
from memoryscope.workers._memoryos import (
    KNOWLEDGE,
    PAGE,
    PROFILE,
    SEGMENT,
    HeatParams,
    clock,
    knowledge_id,
    last_used,
    latest,
    page_line,
    profile_id,
    scan_all,
    scope_filter,
    segment_heat,
)

__all__ = ["MemoryosLongTermWorker", "Analysis", "parse_analysis"]

ABOUT = ("user", "assistant")


class Analysis(tuple[str, tuple[str, ...], tuple[str, ...]]):
    """(profile, user knowledge, assistant knowledge)."""


@register_worker("memoryos_long_term")
class MemoryosLongTermWorker(LLMWorker):
    """For each valid segment whose heat is at least `mid_term_heat_threshold` (hottest first, at
    most `promotions_per_run`), ONE LLM call rewrites the user profile and lists new user and
    assistant knowledge from the segment's summary and pages; then the segment's visits and
    interaction length are reset to 0 (so its heat drops below the threshold). Knowledge entries
    of each kind are capped at `long_term_knowledge_capacity`: the least recently used are
    evicted (expired). Segments as `memoryos_mid_term` left them in this run count.

    Writes nothing itself: `long_term_writes` is what `memoryos_store` writes, atomically. An
    unreadable answer (after one repair request) promotes nothing from that segment and leaves it
    hot; `memoryos_notes` says so. With `only_new_pages`, a segment is promoted only when pages
    joined it since its last promotion (MemoryOS's "unanalyzed pages"): `memoryos_force_update`
    runs it so, at threshold 0 and one promotion, for `Memoryos.force_mid_term_analysis`."""

    reads: ClassVar[tuple[str, ...]] = ("mid_term_segments", "long_term_memories")
    optional_reads: ClassVar[tuple[str, ...]] = ("mid_term_writes", "memoryos_notes", "query_time")
    writes: ClassVar[tuple[str, ...]] = ("long_term_writes", "memoryos_notes", "details")
    prompt_name = "memoryos_long_term"
    expected_format: ClassVar[dict[str, str]] = {
        "en": 'one JSON object {"profile": "...", "user_knowledge": ["..."], "assistant_knowledge": ["..."]}',
        "zh": '一个 JSON 对象 {"profile": "...", "user_knowledge": ["..."], "assistant_knowledge": ["..."]}',
    }
    answer_name = "profile analysis"

    class Params(LLMWorkerParams):
        mid_term_heat_threshold: float = Field(
            5.0, ge=0, le=1e9, description="Heat at which a segment is promoted (MemoryOS's name)."
        )
        long_term_knowledge_capacity: int = Field(
            100, gt=0, le=1_000_000, description="Knowledge entries kept of each kind (user, assistant); least recently used go."
        )
        promotions_per_run: int = Field(3, gt=0, le=100, description="At most this many hot segments are analysed per run.")
        pages_per_analysis: int = Field(20, gt=0, le=1000, description="The newest pages of a segment the analysis reads.")
        only_new_pages: bool = Field(
            False, description="Promote only segments that pages joined since their last promotion (MemoryOS's unanalysed pages)."
        )
        heat: HeatParams = Field(default_factory=HeatParams, description="Heat weights.")

    params: Params

    def bind(self, env: Env) -> None:
        super().bind(env)
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")

    def run(self, ctx: MemoryContext) -> None:
        now = clock(ctx, self._zone)
        params = self.params
        current = latest((*ctx.mid_term_segments, *(n for n in ctx.mid_term_writes if n.memory_type is SEGMENT)))
        valid = [node for node in current.values() if node.status is MemoryStatus.VALID]
        if params.only_new_pages:
            valid = [node for node in valid if int(node.meta.get("memoryos_interaction_length", 0) or 0) > 0]
        hot = [node for node in valid if segment_heat(node, now, params.heat) >= params.mid_term_heat_threshold]
        hot.sort(key=lambda node: -segment_heat(node, now, params.heat))
        hot = hot[: params.promotions_per_run]
        records = latest(ctx.long_term_memories)
        writes: dict[str, MemoryNode] = {}
        promoted, skipped = 0, []
        for segment in hot:
            profile = records.get(profile_id(ctx.user_name, ctx.target_name, ctx.workspace))
            pages = self._pages(ctx, segment)
            prompt = self.prompt_messages(
                profile=profile.content if profile is not None and profile.content else "-",
                summary=segment.content,
                keywords=", ".join(segment.meta.get("memoryos_keywords") or ()),
                pages="\n".join(page_line(page, self._language, self._zone) for page in pages) or "-",
            )
            analysis = self.ask(prompt, parse_analysis)
            if analysis is None:
                skipped.append(segment.memory_id)
                continue
            promoted += 1
            for node in self._apply(ctx, analysis, segment, profile, records, now):
                records[node.memory_id] = node
                writes[node.memory_id] = node
            meta = {**segment.meta, "memoryos_interaction_length": 0, "memoryos_heat": 0.0}
            writes[segment.memory_id] = segment.replace(access_count=0, meta=meta, updated_at=now)
        for node in self._evict(records, now):
            writes[node.memory_id] = node
        if skipped:
            ctx.memoryos_notes = (
                *ctx.memoryos_notes,
                f"long term: unreadable analysis, {len(skipped)} hot segment(s) not promoted",
            )
        ctx.long_term_writes = tuple(writes.values())
        ctx.details[self.name] = {"hot": len(hot), "promoted": promoted, "skipped": skipped, "llm_calls": len(hot)}

    def _pages(self, ctx: MemoryContext, segment: MemoryNode) -> list[MemoryNode]:
        """The segment's valid pages (stored, and moved in this run), newest `pages_per_analysis`, oldest first."""
        condition = (MetadataCondition("memoryos_segment_id", "eq", segment.memory_id),)
        stored = latest(scan_all(self._store, scope_filter(ctx, PAGE, metadata=condition)))
        for node in ctx.mid_term_writes:
            if node.memory_type is PAGE and node.meta.get("memoryos_segment_id") == segment.memory_id:
                stored[node.memory_id] = node
        pages = [node for node in stored.values() if node.status is MemoryStatus.VALID]
        pages.sort(key=lambda page: (page.message_time or page.created_at, page.memory_id))
        return pages[-self.params.pages_per_analysis :]

    def _apply(
        self,
        ctx: MemoryContext,
        analysis: Analysis,
        segment: MemoryNode,
        profile: MemoryNode | None,
        records: dict[str, MemoryNode],
        now: datetime,
    ) -> list[MemoryNode]:
        text, user_facts, assistant_facts = analysis
        out: list[MemoryNode] = []
        if text and (profile is None or text != profile.content):
            base = profile or self._node(ctx, profile_id(ctx.user_name, ctx.target_name, ctx.workspace), PROFILE, "", text, now)
            out.append(base.replace(content=text, updated_at=now, status=MemoryStatus.VALID))
        for about, facts in zip(ABOUT, (user_facts, assistant_facts), strict=True):
            for fact in facts:
                memory_id = knowledge_id(ctx.user_name, ctx.target_name, ctx.workspace, about, fact)
                known = records.get(memory_id)
                if known is not None:
                    out.append(known.replace(last_accessed_at=now, updated_at=now, status=MemoryStatus.VALID))
                else:
                    node = self._node(ctx, memory_id, KNOWLEDGE, about, fact, now)
                    out.append(node.replace(event_time=segment.message_time, meta={"memoryos_segment_id": segment.memory_id}))
        return out

    def _node(self, ctx: MemoryContext, memory_id: str, kind: Any, key: str, content: str, now: datetime) -> MemoryNode:
        return MemoryNode(
            user_name=ctx.user_name,
            target_name=ctx.target_name,
            workspace=ctx.workspace,
            memory_id=memory_id,
            memory_type=kind,
            key=key,
            content=content,
            created_at=now,
            updated_at=now,
            last_accessed_at=now,
        )

    def _evict(self, records: dict[str, MemoryNode], now: datetime) -> list[MemoryNode]:
        """The least recently used knowledge entries past capacity, of each kind, expired."""
        out = []
        for about in ABOUT:
            entries = [
                node
                for node in records.values()
                if node.memory_type is KNOWLEDGE and node.key == about and node.status is MemoryStatus.VALID
            ]
            excess = len(entries) - self.params.long_term_knowledge_capacity
            if excess > 0:
                entries.sort(key=lambda node: (last_used(node), node.memory_id))
                out += [node.replace(status=MemoryStatus.EXPIRED, updated_at=now) for node in entries[:excess]]
        return out


def parse_analysis(reply: str) -> Analysis | None:
    """The profile and the two knowledge lists of an answer, or None when it has no profile text."""
    data = extract_json(reply)
    if not isinstance(data, dict):
        return None
    profile = item_field(data, ["profile", "user_profile"])
    if not isinstance(profile, str):
        return None
    lists = []
    for names in (["user_knowledge", "user_facts"], ["assistant_knowledge", "assistant_facts"]):
        value = item_field(data, names)
        if value is None:
            value = []
        if not isinstance(value, list):
            return None
        lists.append(_facts(value))
    return Analysis((profile.strip(), lists[0], lists[1]))


def _facts(values: Sequence[Any]) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for value in values:
        text = value if isinstance(value, str) else None
        if text and text.strip() and text.strip().casefold() not in ("none", "无"):
            seen.setdefault(" ".join(text.casefold().split()), text.strip())
    return tuple(seen.values())
