"""Write what a backend workflow decided, in one atomic store write."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, tzinfo
from typing import ClassVar

from pydantic import Field

from memoryscope.context import MemoryContext, StoreOutcome
from memoryscope.env import Env
from memoryscope.history import ChangeSource, is_pinned
from memoryscope.memory import MemoryNode, caller_metadata, utc_now
from memoryscope.message_retries import (
    DEFAULT_BACKOFF_S,
    DEFAULT_MAX_FAILURES,
    backlog,
    cleared,
    note_failure,
    pending_filter,
    waiting_note,
)
from memoryscope.stores.base import MemoryStore
from memoryscope.worker import Worker, WorkerParams, register_worker

__all__ = ["StoreMemoryWorker"]

_PARTS = {
    "en": {
        "observations": ("stored {n} observation", "stored {n} observations"),
        "insights": ("updated {n} insight", "updated {n} insights"),
        "expired": ("expired {n}", "expired {n}"),
        "messages": ("consolidated {n} message", "consolidated {n} messages"),
        "pending": ("left {n} message pending (unreadable answer)", "left {n} messages pending (unreadable answers)"),
        "reflected": ("reflected on {n} observation", "reflected on {n} observations"),
        "nothing": "nothing to store",
        "separator": ", ",
        "dropped": "; left out {n} deleted meanwhile",
        "waiting": "; {note}",
    },
    "zh": {
        "observations": ("保存了 {n} 条观察", "保存了 {n} 条观察"),
        "insights": ("更新了 {n} 条洞察", "更新了 {n} 条洞察"),
        "expired": ("过期 {n} 条", "过期 {n} 条"),
        "messages": ("整理了 {n} 条消息", "整理了 {n} 条消息"),
        "pending": ("{n} 条消息因回答无法读取而待重试", "{n} 条消息因回答无法读取而待重试"),
        "reflected": ("反思了 {n} 条观察", "反思了 {n} 条观察"),
        "nothing": "没有需要保存的内容",
        "separator": "，",
        "dropped": "；{n} 条在此期间已被删除，未写回",
        "waiting": "；{note}",
    },
}


@register_worker("store_memory")
class StoreMemoryWorker(Worker):
    """Upsert, in ONE atomic write: the `new_observations`, the `expired_memories` (status
    expired, `superseded_by` set), the `pending_messages` marked consolidated
    (`reflected=True`), the `updated_insights`, and the `unreflected_observations` marked
    reflected. Every node written gets `updated_at` = now. Either all of it lands or none does,
    so a failed or killed run leaves the messages pending for the next one, and a rerun adds
    nothing twice (the nodes' ids are deterministic).

    A pinned memory (`memoryscope pin ID`) is never expired or rewritten: an expiry or insight
    update of one is left out (counted in `store_outcome.pinned_kept`).

    A user's delete is never undone: every node the run loaded is written back only if it
    still exists at write time, and a new memory only if what it was drawn from still does
    (the store checks inside the same write, `MemoryStore.upsert(requires=...)`). What is left
    out so is counted in `store_outcome.dropped` and said in `result`.

    The messages named in `unreadable_message_ids` or `unreadable_timed_message_ids` (the facts
    drawn from them stayed unreadable) stay pending instead, with the failure noted on them.

    `result` is a readable summary ("stored 3 observations, expired 1, consolidated 5
    messages"), and, after a run over messages, what of the user's still waits ("; 2 message(s)
    wait: 2 backing off until ... after a failed run"); `store_outcome` has the counts and the
    ids written. Whatever fields an earlier step did not write are simply empty, so the same worker ends consolidate_memory and
    reflect_and_reconsolidate.
    """

    reads: ClassVar[tuple[str, ...]] = ()
    optional_reads: ClassVar[tuple[str, ...]] = (
        "pending_messages",
        "new_observations",
        "expired_memories",
        "updated_insights",
        "unreflected_observations",
        "today_memories",
        "insights",
        "observations",
        "timed_observations",
        "unreadable_message_ids",
        "unreadable_timed_message_ids",
    )
    writes: ClassVar[tuple[str, ...]] = ("result", "store_outcome")

    class Params(WorkerParams):
        max_consolidation_failures: int = Field(
            DEFAULT_MAX_FAILURES,
            gt=0,
            le=1000,
            description="Runs a message may fail on (the facts drawn from it unreadable after one repair request) "
            "before it is parked as failed (as `info_filter`'s key of the same name).",
        )
        retry_backoff_s: float = Field(
            DEFAULT_BACKOFF_S,
            ge=0,
            le=86_400,
            description="Wait after a message's first failure; doubled after each further one.",
        )

    params: Params

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")
        self._language: str = env.settings.language
        self._zone: tzinfo = env.settings.tzinfo

    def run(self, ctx: MemoryContext) -> None:
        now = utc_now()
        nodes: dict[str, MemoryNode] = {}
        # messages whose facts stayed unreadable stay pending, with the failure noted (retried later)
        unreadable = {*ctx.unreadable_message_ids, *ctx.unreadable_timed_message_ids}
        messages = [self._failed(node, now) if node.memory_id in unreadable else cleared(node) for node in ctx.pending_messages]
        left_pending = sum(node.memory_id in unreadable for node in messages)
        consolidated = {node.memory_id for node in (*messages, *ctx.unreflected_observations) if node.memory_id not in unreadable}

        def put(group: Iterable[MemoryNode]) -> None:
            for node in group:
                nodes[node.memory_id] = node

        # Later groups win for the same id: an expiry outranks everything, and a node that was
        # pending or unreflected is marked reflected whatever else happened to it.
        # a pinned memory is never expired or rewritten by a run (marking it reflected is fine)
        pinned = {node.memory_id for node in (*ctx.today_memories, *ctx.insights, *ctx.expired_memories) if is_pinned(node)}
        insights = [node for node in ctx.updated_insights if node.memory_id not in pinned]
        expired = [node for node in ctx.expired_memories if node.memory_id not in pinned]
        put(ctx.unreflected_observations)
        put(messages)
        put(_with_source_metadata(ctx.new_observations, ctx.pending_messages))
        put(insights)
        put(expired)
        written = [
            node.replace(updated_at=now, reflected=node.reflected or node.memory_id in consolidated) for node in nodes.values()
        ]
        dropped = (
            self._store.upsert(written, requires=_requirements(ctx, written), change=ChangeSource.of(ctx)) if written else []
        )
        counts = {
            "observations": len(ctx.new_observations),
            "insights": len(insights),
            "expired": len(expired),
            "messages": len(messages) - left_pending,
            "pending": left_pending,
            "reflected": len(ctx.unreflected_observations),
        }
        kept = tuple(node.memory_id for node in written if node.memory_id not in set(dropped))
        kept_pinned = len(ctx.updated_insights) - len(insights) + len(ctx.expired_memories) - len(expired)
        ctx.store_outcome = StoreOutcome(
            **counts, written=len(kept), memory_ids=kept, dropped=len(dropped), pinned_kept=kept_pinned
        )
        note = ""
        if ctx.pending_messages:  # a run over messages: say what still waits (left pending here or before)
            memory_filter = pending_filter(ctx.user_name, ctx.target_name, ctx.workspace)
            note = waiting_note(backlog(self._store, memory_filter), self._language, self._zone)
        if note:  # it counts the messages left pending here too, with until when
            shown = {key: count for key, count in counts.items() if key != "pending"}
            waiting = str(_PARTS.get(self._language, _PARTS["en"])["waiting"]).format(note=note)
            ctx.result = self._summary(shown, len(dropped)) + waiting
        else:
            ctx.result = self._summary(counts, len(dropped))

    def _failed(self, node: MemoryNode, now: datetime) -> MemoryNode:
        error = f"worker {self.name}: the facts drawn from this message stayed unreadable after one repair request"
        params = self.params
        return note_failure(node, error, now, max_failures=params.max_consolidation_failures, backoff_s=params.retry_backoff_s)

    def _summary(self, counts: dict[str, int], dropped: int) -> str:
        words = _PARTS.get(self._language, _PARTS["en"])
        parts = []
        for key, count in counts.items():
            if count:
                singular, plural = words[key]
                parts.append((singular if count == 1 else plural).format(n=count))
        text = str(words["separator"]).join(parts) if parts else str(words["nothing"])
        return text + str(words["dropped"]).format(n=dropped) if dropped else text


def _requirements(ctx: MemoryContext, written: list[MemoryNode]) -> dict[str, tuple[str, ...]]:
    """For each node to write, the memories that must still exist for it to be written: itself,
    when the run loaded it (it existed then), and the loaded memories it was drawn from (its
    source messages, or observations sharing them)."""
    groups = (ctx.pending_messages, ctx.unreflected_observations, ctx.today_memories, ctx.insights)
    loaded = {node.memory_id: node for group in groups for node in group}
    made_here = {node.memory_id for group in (ctx.observations, ctx.timed_observations, ctx.new_observations) for node in group}
    # an expired memory existed before the run (found by a search, say), unless this run made it
    loaded.update((node.memory_id, node) for node in ctx.expired_memories if node.memory_id not in made_here)
    requirements: dict[str, tuple[str, ...]] = {}
    for node in written:
        sources = set(node.source_message_ids)
        needed = [
            memory_id
            for memory_id, other in loaded.items()
            if memory_id in (node.memory_id, *sources) or not sources.isdisjoint(other.source_message_ids)
        ]
        if needed:
            requirements[node.memory_id] = tuple(needed)
    return requirements


def _with_source_metadata(observations: Iterable[MemoryNode], messages: Iterable[MemoryNode]) -> list[MemoryNode]:
    """Each observation with the caller's metadata of the messages it was drawn from (`MemoryScope.add(...,
    metadata=...)`), so a metadata filter finds what was learnt from them; its own entries win.
    A pin is the message's own, not inherited."""
    by_id = {node.memory_id: node for node in messages}
    out = []
    for node in observations:
        inherited: dict[str, object] = {}
        for source_id in node.source_message_ids:
            source = by_id.get(source_id)
            if source is not None:
                inherited.update(caller_metadata(source.meta))
        inherited.pop("pinned", None)
        out.append(node.replace(meta={**inherited, **node.meta}) if inherited else node)
    return out
