"""The door's reading verbs: search, get, get_all, history and changes, profile, status, export,
and the admin's counts. Each reads for a caller through the store's filter."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, replace
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from memoryscope._scheduler_state import RunRecord, Scope, count_pending, message_backlog
from memoryscope.context import SearchFilter, TextVector
from memoryscope.door.base import DoorBase, MemoryNotFoundError, conditions
from memoryscope.door.caller import ADMIN, READ, Caller
from memoryscope.door.inputs import listed_types, memory_types, time_range
from memoryscope.door.records import MemoryRecord, Profile, Status
from memoryscope.door.relevance import Relevance
from memoryscope.door.streaming import stream_of
from memoryscope.errors import InvalidInputError, NotFoundError
from memoryscope.history import MemoryChange
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.stores.base import MemoryFilter, TimeRange
from memoryscope.stores.legacy_agent import migrate_owner
from memoryscope.stores.state import CORE_BLOCK, StateKey, StateOwner
from memoryscope.transfer.jsonl import export_memories

__all__ = ["ReadingVerbs", "checked_threshold"]

_PAGE = 500
_SHOWN_RUNS = 10  # the newest runs `status` names
_PROBE_USER = "\x00memoryscope-readyz"  # a name no user has: counting it reads the store, finds nothing
_ALL_CHANGES = 1_000_000
_STATUS_CHANGES = 500  # the newest changes `status` reads for the runs it names (not the whole history)


class ReadingVerbs(DoorBase):
    """The verbs that read (see `memoryscope.door.verbs`)."""

    def search(
        self,
        caller: Caller,
        query: str,
        *,
        top_k: int = 10,
        filters: Mapping[str, Any] | None = None,
        types: Sequence[MemoryType | str] | None = None,
        time_range_given: TimeRange | tuple[datetime | None, datetime | None] | None = None,
        query_time: datetime | None = None,
        threshold: float | None = None,
    ) -> list[MemoryRecord]:
        """The `top_k` memories of the caller's user that best answer `query`, best first, each
        scored by how well it answers, in [0, 1] (`memoryscope.door.relevance`); with `threshold`
        (0 to 1), only those scoring at least that. A caller with `target` or `workspace` None
        searches the user's memories of every target or workspace: in one search (the retrieval
        reads `SearchFilter.any_target`/`any_workspace`), or under MemoryOS's policy, whose recall
        reads one target and workspace, one per owner, merged by score."""
        caller.require(READ, "search")
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("search needs a query; get_all lists memories without one")
        self.limits.check_text(query, "query")
        top_k = self.limits.check_top_k(top_k)
        threshold = checked_threshold(threshold)
        narrowed = SearchFilter(
            memory_types=memory_types(types),
            time_range=time_range(time_range_given, self.settings.tzinfo),
            metadata=conditions(filters),
        )
        query = query.strip()
        relevance = Relevance(self._require_store(), self.settings.language)
        vector = relevance.query_vector(query)
        owners = self._owners(caller) if caller.widened and self.memoryos else [caller]
        scored: list[MemoryNode] = []
        for owner in owners:
            result = self._run(
                owner, self._retrieve_operation, "search", query=query, query_time=self._now(query_time),
                search_filter=replace(narrowed, any_target=owner.target is None, any_workspace=owner.workspace is None),
                top_k=top_k, embedded=(TextVector(query, vector, is_query=True),),
            )  # fmt: skip
            found = result.context.memories[:top_k]
            scored += [node.with_score(score) for node, score in zip(found, relevance.scores(query, vector, found), strict=True)]
        if len(owners) > 1:  # each owner's list is best first: merged, the scores still never rise
            scored = sorted(scored, key=lambda node: node.score or 0.0, reverse=True)[:top_k]
        if threshold is not None:  # scores never rise down the list: those that pass come first
            scored = [node for node in scored if node.score is not None and node.score >= threshold]
        return self._records(scored)

    def get(self, caller: Caller, memory_id: str) -> MemoryRecord | None:
        """The caller's memory with this id, or None (another user's memory is None too)."""
        caller.require(READ, "get")
        found = self._reachable(caller, [memory_id])
        return self._record(found[0]) if found else None

    def get_all(
        self,
        caller: Caller,
        *,
        filters: Mapping[str, Any] | None = None,
        types: Sequence[MemoryType | str] | None = None,
        include_expired: bool = False,
        limit: int | None = None,
        time_range_given: TimeRange | tuple[datetime | None, datetime | None] | None = None,
        offset: int = 0,
        newest_first: bool = True,
    ) -> list[MemoryRecord]:
        """The caller's memories, newest first (or oldest first), from `offset` on (see
        `MemoryApi.get_all`); `time_range_given` on when each was said."""
        caller.require(READ, "get_all")
        for name, value in (("limit", limit), ("offset", offset)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise InvalidInputError(f"get_all: {name} must be 0 or more, got {value!r}")
        scope = caller.memory_filter(
            memory_types=listed_types() if types is None else memory_types(types),
            status=None if include_expired else MemoryStatus.VALID,
            metadata=conditions(filters),
            time_range=time_range(time_range_given, self.settings.tzinfo),
        )
        store, records = self._require_store(), list[MemoryRecord]()
        while limit is None or len(records) < limit:
            page_size = _PAGE if limit is None else min(_PAGE, limit - len(records))
            page = store.scan(scope, limit=page_size, offset=offset + len(records), newest_first=newest_first)
            records += self._records(page)
            if len(page) < page_size:
                break
        return records

    def history(self, caller: Caller, memory_id: str) -> list[MemoryChange]:
        """Every change to one of the caller's memories, oldest first (a deleted one's too)."""
        caller.require(READ, "history")
        changes = self._require_store().history(memory_id=memory_id, limit=_ALL_CHANGES)
        if not changes or not all(self._reaches(caller, change.user_name, change.workspace) for change in changes):
            raise MemoryNotFoundError(memory_id)
        return changes

    def changes(self, caller: Caller, *, run_id: str | None = None, limit: int = 1000) -> list[MemoryChange]:
        """The changes one run made (every one the caller's to see), or else every change to the
        caller's user's memories; oldest first."""
        caller.require(READ, "history")
        store = self._require_store()
        if run_id:
            changes = store.history(run_id=run_id, limit=limit)
            if not changes or not all(self._reaches(caller, change.user_name, change.workspace) for change in changes):
                raise NotFoundError(f"no run {run_id!r} changed memories this caller reaches", code="unknown_run")
            return changes
        changes = store.history(user_name=caller.user_id, limit=limit)
        return [change for change in changes if caller.workspace is None or change.workspace == caller.workspace]

    def probe_store(self) -> None:
        """Read the store once (readiness): raises what it raises."""
        self._require_store().count(MemoryFilter(user_name=_PROBE_USER))

    def memory_counts(self, caller: Caller) -> tuple[dict[tuple[str, str], int], int]:
        """Memories by (type, status) over every user, and how many users have any (admin). Per
        user: one count of expired memories, then one per type, split by status only when some expired."""
        caller.require(ADMIN, "memory_counts")
        store = self._require_store()
        counts = {(memory_type.value, status.value): 0 for memory_type in listed_types() for status in MemoryStatus}
        users = store.user_counts()
        for user_name in users:
            expired = store.count(MemoryFilter(user_name=user_name, status=MemoryStatus.EXPIRED))
            statuses = tuple(MemoryStatus) if expired else (MemoryStatus.VALID,)
            for memory_type in listed_types():
                for status in statuses:
                    memory_filter = MemoryFilter(user_name=user_name, memory_types=(memory_type,), status=status)
                    counts[(memory_type.value, status.value)] += store.count(memory_filter)
        return counts, len(users)

    def user_exists(self, caller: Caller) -> bool:
        """Whether the caller's user has any memory (of any status) in its workspace and target, or
        any state record (an agent's blocks, say, before anything was remembered)."""
        store = self._require_store()
        if store.count(caller.memory_filter(status=None)) > 0:
            return True
        return any(
            caller.covers(record.key.owner.target_name, record.key.owner.workspace)
            for batch in store.iter_state(user_name=caller.user_id, batch_size=_PAGE)
            for record in batch
        )

    def profile(self, caller: Caller) -> Profile:
        """What is known about the user, by the memory policy: MemoryOS's profile and knowledge, an
        agent's `human` block, or else the insights reflection drew."""
        caller.require(READ, "profile")
        if self.memoryos:
            profiles = self.get_all(caller, types=["memoryos_profile"])  # the types MemoryOS's workers register
            knowledge = self.get_all(caller, types=["memoryos_knowledge"])
            text = profiles[0].memory if profiles else ""
            return Profile(caller.user_id, "memoryos", text, tuple(profiles[:1] + knowledge))
        if self._agent_policy:
            return Profile(caller.user_id, "agent", self._human_block(caller), ())
        insights = self.get_all(caller, types=[MemoryType.INSIGHT])
        return Profile(caller.user_id, "insights", "\n".join(record.text for record in insights), tuple(insights))

    def _human_block(self, caller: Caller) -> str:
        """The text of the agent's `human` block (a state record, not a memory); "" before the agent made it."""
        store = self._require_store()
        owner = StateOwner(caller.user_id, caller.write_target, caller.write_workspace)
        migrate_owner(store, owner)
        found = store.read_state([StateKey(owner, CORE_BLOCK, "human")])
        text = found[0].value.get("text") if found else ""
        return text if isinstance(text, str) else ""

    def status(self, caller: Caller) -> Status:
        """What waits for the user's background operations and which runs changed their memories,
        read from the store (so any process sees it), with this process's own runs."""
        caller.require(READ, "status")
        store = self._require_store()
        who = Scope(caller.user_id, caller.write_target, caller.write_workspace)
        newest: dict[str, MemoryChange] = {}
        for change in store.history(user_name=caller.user_id, limit=_STATUS_CHANGES, newest_first=True):
            if change.run_id and change.workspace == who.workspace and change.target_name == who.target_name:
                newest.setdefault(change.run_id, change)
        now = self.service.scheduler.status()
        mine = [(operation, record) for (label, operation), record in now.last_runs.items() if label == who.label]
        failed = [(operation, record) for (label, operation), record in now.last_errors.items() if label == who.label]
        return Status(
            user_id=caller.user_id,
            workspace=who.workspace,
            target=who.target_name,
            label=who.label,
            pending_messages=_jsonable(asdict(message_backlog(store, who))),
            unreflected_observations=count_pending(store, "observations", who),
            stored_runs=tuple(list(newest.values())[:_SHOWN_RUNS]),
            running=tuple(
                {"operation": run.operation, "trigger": run.trigger, "started_at": run.started_at.isoformat()}
                for run in now.running
                if run.scope.label == who.label
            ),
            waiting=who.label in now.waiting,
            last_runs={operation: _run_dict(record) for operation, record in mine},
            last_errors={operation: _run_dict(record) for operation, record in failed},
        )

    def export(self, caller: Caller, out: str | Path | IO[str], **options: Any) -> int:
        """The caller's memories (every status) and their history as JSON lines (`import` reads
        them back); a local caller who named no user exports every user."""
        caller.require(READ, "export")
        everyone = caller.reach is not None and caller.reach.users is None and caller.reach.workspaces is None
        user = None if everyone and not caller.named else caller.user_id
        workspace = None if user is None else caller.workspace
        return export_memories(self._require_store(), out, user_name=user, workspace=workspace, **options)  # type: ignore[arg-type]  # IO[str] is a TextIO here

    def export_lines(self, caller: Caller) -> Iterator[str]:
        """`export` as chunks of lines to stream: written on a thread into a short queue, so memory
        stays bounded whatever the size (the caller's check happens before the first chunk)."""
        caller.require(READ, "export")
        self._require_store()
        return stream_of(lambda out: self.export(caller, out))



def checked_threshold(threshold: float | None) -> float | None:
    """A search's least score: None (no cut) or a number from 0 to 1."""
    if threshold is None:
        return None
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not math.isfinite(threshold):
        raise InvalidInputError(f"threshold must be a number from 0 to 1, got {threshold!r}", code="invalid_threshold")
    if not 0 <= threshold <= 1:
        raise InvalidInputError(
            f"threshold {threshold} is out of range: scores run from 0 to 1, so give a threshold from 0 to 1",
            code="invalid_threshold",
        )
    return float(threshold)


def _run_dict(record: RunRecord) -> dict[str, Any]:
    return _jsonable({key: value for key, value in asdict(record).items() if key != "user_name"})


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value.isoformat() if isinstance(value, datetime) else value for key, value in values.items()}
