"""MemoryOS retrieval, short term: the user's recent pages, in order."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.stores.base import MemoryStore
from memoryscope.stores.metadata import MetadataCondition
from memoryscope.worker import Worker, WorkerParams, register_worker
from memoryscope.workers._memoryos import PAGE, SHORT, scan_all, scope_filter

__all__ = ["MemoryosRecallShortWorker"]


@register_worker("memoryos_recall_short")
class MemoryosRecallShortWorker(Worker):
    """`short_term_recall`: the short-term pages of the user (and assistant, workspace), oldest said
    first, the newest `max_pages` of them. Reads only."""

    reads: ClassVar[tuple[str, ...]] = ()
    writes: ClassVar[tuple[str, ...]] = ("short_term_recall",)

    class Params(WorkerParams):
        max_pages: int = Field(100, gt=0, le=10_000, description="At most this many short-term pages (the newest).")

    params: Params

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")

    def run(self, ctx: MemoryContext) -> None:
        pages = scan_all(self._store, scope_filter(ctx, PAGE, metadata=(MetadataCondition("memoryos_tier", "eq", SHORT),)))
        pages.sort(key=lambda page: (page.message_time or page.created_at, page.memory_id))
        ctx.short_term_recall = tuple(pages[-self.params.max_pages :])
