"""Show memories to a person: time-stamped lines grouped by kind, each with its id."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar
from zoneinfo import ZoneInfo

from memoryscope.context import MemoryContext, SearchFilter
from memoryscope.env import Env
from memoryscope.listing import EXPIRED_SECTION, memory_listing
from memoryscope.memory import MemoryStatus
from memoryscope.stores.base import MemoryFilter, MemoryStore
from memoryscope.worker import Worker, WorkerParams, register_worker

__all__ = ["PrintMemoryWorker"]


@register_worker("print_memory")
class PrintMemoryWorker(Worker):
    """Render `memories` as `result`, for `/list_memory` and the like.

    One section per kind (insight, added, observation, conversation, expired; empty kinds are
    left out), in the order given within a section:

        ----- observation memory (1) -----
        [2024-10-26 21:26:20 Sat] user plays the guitar (id: 6f1c...)

    Times are shown in `global.timezone`, weekday and headers in `global.language`; the id is
    what `/delete_memory` takes. A listing (no `query`) that shows only the newest of a kind
    says how many there are in all: `----- observation memory (400; the newest 100 shown) -----`.
    """

    reads: ClassVar[tuple[str, ...]] = ("memories",)
    optional_reads: ClassVar[tuple[str, ...]] = ("query", "search_filter")
    writes: ClassVar[tuple[str, ...]] = ("result",)

    class Params(WorkerParams):
        pass

    def bind(self, env: Env) -> None:
        self._language: str = env.settings.language
        self._zone: ZoneInfo = env.settings.tzinfo
        self._store: MemoryStore | None = env.store

    def run(self, ctx: MemoryContext) -> None:
        totals = self._totals(ctx) if not ctx.query else None  # a listing, not a search's hits
        ctx.result = memory_listing(ctx.memories, self._language, self._zone, totals)

    def _totals(self, ctx: MemoryContext) -> dict[str, int] | None:
        """How many memories of each listed kind the user has in all (a listing shows the newest
        few of each), counted with the listing's own narrowing."""
        if self._store is None or not ctx.memories:
            return None
        narrowing = ctx.search_filter or SearchFilter()
        scope = MemoryFilter(
            ctx.user_name, ctx.target_name, ctx.workspace, time_range=narrowing.time_range, metadata=narrowing.metadata
        )
        totals = {
            kind.value: self._store.count(replace(scope, memory_types=(kind,), status=MemoryStatus.VALID))
            for kind in {node.memory_type for node in ctx.memories if node.status is not MemoryStatus.EXPIRED}
        }
        if any(node.status is MemoryStatus.EXPIRED for node in ctx.memories):
            totals[EXPIRED_SECTION] = self._store.count(replace(scope, status=MemoryStatus.EXPIRED))
        return totals
