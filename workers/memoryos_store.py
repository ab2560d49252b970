"""Write what a MemoryOS update decided, in one atomic store write."""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

from memoryscope.context import MemoryContext, StoreOutcome
from memoryscope.env import Env
from memoryscope.history import ChangeSource
from memoryscope.memory import MemoryNode, MemoryStatus
from memoryscope.stores.base import MemoryStore
from memoryscope.worker import Worker, register_worker
from memoryscope.workers._memoryos import KNOWLEDGE, MID, PAGE, PROFILE, SEGMENT, latest

__all__ = ["MemoryosStoreWorker"]


@register_worker("memoryos_store")
class MemoryosStoreWorker(Worker):
    """Upsert `mid_term_writes` then `long_term_writes` (later wins for one id) in ONE write:
    all of a run lands or none of it, so a run killed before its end leaves the tiers as they were
    (the pages still short term, the segment still hot) and the next run does the work again
    (ids are derived, so nothing is added twice). A record the run loaded that was deleted
    meanwhile is not written back (a user's delete is never undone). `result` says what moved,
    with the `memoryos_notes` of skipped steps."""

    reads: ClassVar[tuple[str, ...]] = ()
    optional_reads: ClassVar[tuple[str, ...]] = (
        "mid_term_writes",
        "long_term_writes",
        "memoryos_notes",
        "short_term_pages",
        "mid_term_segments",
        "long_term_memories",
    )
    writes: ClassVar[tuple[str, ...]] = ("result", "store_outcome")

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")

    def run(self, ctx: MemoryContext) -> None:
        written = list(latest((*ctx.mid_term_writes, *ctx.long_term_writes)).values())
        loaded = {node.memory_id for node in (*ctx.short_term_pages, *ctx.mid_term_segments, *ctx.long_term_memories)}
        requires = {node.memory_id: (node.memory_id,) for node in written if node.memory_id in loaded}
        dropped = self._store.upsert(written, requires=requires, change=ChangeSource.of(ctx)) if written else []
        kept = [node for node in written if node.memory_id not in set(dropped)]
        ctx.store_outcome = StoreOutcome(
            written=len(kept), memory_ids=tuple(node.memory_id for node in kept), dropped=len(dropped)
        )
        ctx.result = "; ".join((_summary(kept), *ctx.memoryos_notes))


def _summary(nodes: list[MemoryNode]) -> str:
    counts: Counter[str] = Counter()
    for node in nodes:
        if node.status is MemoryStatus.EXPIRED:
            counts[f"evicted {node.memory_type.value.removeprefix('memoryos_')}"] += 1
        elif node.memory_type is PAGE and node.meta.get("memoryos_tier") == MID:
            counts["moved page"] += 1
        elif node.memory_type is SEGMENT:
            counts["segment written"] += 1
        elif node.memory_type is PROFILE:
            counts["profile updated"] += 1
        elif node.memory_type is KNOWLEDGE:
            counts[f"{node.key} knowledge"] += 1
    return ", ".join(f"{name}: {count}" for name, count in counts.items()) or "nothing to store"
