"""Load a user's MemoryOS tiers for an update: short-term pages, mid-term segments, long-term records."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.stores.base import MemoryStore
from memoryscope.stores.metadata import MetadataCondition
from memoryscope.worker import Worker, WorkerParams, register_worker
from memoryscope.workers._memoryos import KNOWLEDGE, PAGE, PROFILE, SEGMENT, SHORT, scan_all, scope_filter

__all__ = ["MemoryosLoadWorker"]


@register_worker("memoryos_load")
class MemoryosLoadWorker(Worker):
    """Assign `short_term_pages` (the valid short-term pages, oldest said first),
    `mid_term_segments` (every valid segment) and `long_term_memories` (the profile and the
    knowledge entries) of the run's user, assistant and workspace. Reads only."""

    reads: ClassVar[tuple[str, ...]] = ()
    writes: ClassVar[tuple[str, ...]] = ("short_term_pages", "mid_term_segments", "long_term_memories", "details")

    class Params(WorkerParams):
        max_records: int = Field(100_000, gt=0, description="At most this many records of each tier are loaded.")

    params: Params

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")

    def run(self, ctx: MemoryContext) -> None:
        limit = self.params.max_records
        short = scan_all(
            self._store, scope_filter(ctx, PAGE, metadata=(MetadataCondition("memoryos_tier", "eq", SHORT),)), limit=limit
        )
        short.sort(key=lambda page: (page.message_time or page.created_at, page.memory_id))
        ctx.short_term_pages = tuple(short)
        ctx.mid_term_segments = tuple(scan_all(self._store, scope_filter(ctx, SEGMENT), limit=limit))
        ctx.long_term_memories = tuple(scan_all(self._store, scope_filter(ctx, PROFILE, KNOWLEDGE), limit=limit))
        ctx.details[self.name] = {
            "short_term": len(ctx.short_term_pages),
            "segments": len(ctx.mid_term_segments),
            "long_term": len(ctx.long_term_memories),
        }
