"""The door: every verb of `memoryscope.door.verbs`, for a `Caller`, on one service and its store.

Faces (the Python API, the CLI, REST, the OpenAI endpoint, MCP, the agent's tools, the peers'
facades) make a `Caller` and call a method here; they never reach the store, the workflows or
the context themselves. What this module decides, it decides once for all of them: the limits
on sizes, who owns a memory id (the store's filter), times without a zone (the config's),
what the profile is under each memory policy, what export writes, what status reports.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import IO, Any, TextIO

from memoryscope._scheduler_state import RunRecord, Scope, count_pending, message_backlog
from memoryscope.config.server_settings import ServerSettings
from memoryscope.config.specs import GlobalSettings
from memoryscope.context import SearchFilter
from memoryscope.door.caller import ADMIN, READ, WRITE, Caller
from memoryscope.door.inputs import (
    MessagesIn,
    aware,
    checked_metadata,
    memory_types,
    messages_of,
    time_range,
)
from memoryscope.door.records import MemoryRecord, Profile, RunSummary, Status, UndoOutcome, WriteOutcome, record_of
from memoryscope.door.streaming import stream_of
from memoryscope.errors import (
    InvalidInputError,
    MemoryScopeError,
    NotFoundError,
    PermissionDeniedError,
    StoreError,
    TooLargeError,
    TooManyError,
    WorkerError,
)
from memoryscope.history import MemoryChange
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.service import MemoryService
from memoryscope.stores.base import MemoryFilter, MemoryStore, TimeRange
from memoryscope.stores.metadata import MetadataCondition, metadata_conditions
from memoryscope.transfer.jsonl import export_memories, import_memories
from memoryscope.workflow import RunResult

__all__ = ["Door", "Limits", "MemoryNotFoundError"]

_PAGE = 500
_SHOWN_RUNS = 10  # the newest runs `status` names
_PROBE_USER = "\x00memoryscope-readyz"  # a name no user has: counting it reads the store, finds nothing
_ALL_CHANGES = 1_000_000
# What `get_all` lists when no types are asked for: every memory but an agent's saved state (its
# message queue and counters: a working copy, not something known about the user).
_LISTED_BY_DEFAULT = tuple(member for member in MemoryType if member is not MemoryType.AGENT_STATE)
# A service with this operation keeps memory MemoryOS's way (`configs/memoryos.yaml`).
MEMORYOS_OPERATION = "memoryos_add"
_INPUT_ERRORS = (InvalidInputError, NotFoundError, PermissionDeniedError)


class MemoryNotFoundError(NotFoundError, StoreError):
    """No memory of the caller's has the id asked for (a `StoreError` too, as it was)."""

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        super().__init__(
            f"no memory has the id {memory_id!r} (list them with get_all or `memoryscope run list_memory`)", code="unknown_memory"
        )


class InvalidFilterError(InvalidInputError, StoreError):
    """A metadata filter that does not read (the caller's mistake; a `StoreError` too, as it was)."""


@dataclass(frozen=True)
class Limits:
    """The sizes every face accepts alike (the config's `server:` section sets them)."""

    max_text_chars: int = 4000  # a query, a message, a memory's text
    max_items: int = 200  # messages, texts or ids in one call
    max_top_k: int = 100

    @classmethod
    def of(cls, settings: ServerSettings) -> Limits:
        return cls(settings.max_query_chars, settings.max_messages_per_request, settings.max_top_k)

    def check_text(self, text: str, what: str) -> None:
        if len(text) > self.max_text_chars:
            raise TooLargeError(
                f"the {what} has {len(text)} characters; at most {self.max_text_chars} (server.max_query_chars)",
                code="query_too_long",
            )

    def check_count(self, count: int, what: str) -> None:
        if count > self.max_items:
            message = f"{count} {what} in one call; at most {self.max_items} (server.max_messages_per_request)"
            raise TooManyError(message, code="too_many_messages")

    def check_top_k(self, top_k: Any) -> int:
        if isinstance(top_k, bool) or not isinstance(top_k, int):
            raise InvalidInputError(f"top_k must be a whole number, got {top_k!r}")
        if top_k < 1:
            raise InvalidInputError(f"top_k must be 1 or more, got {top_k}")
        if top_k > self.max_top_k:
            raise TooLargeError(f"top_k {top_k} is over {self.max_top_k} (server.max_top_k)", code="top_k_too_large")
        return top_k


class Door:
    """Every verb, for a caller. Built once per `MemoryScope` (`scope.door`); `with_limits` gives
    the same door with other limits (a server given its own settings)."""

    def __init__(
        self,
        service: MemoryService,
        store: MemoryStore | None,
        settings: GlobalSettings,
        *,
        limits: Limits,
        source: str,
        retrieve_operation: str = "retrieve_memory",
        store_operation: str = "read_message",
        agent_policy: bool = False,
    ) -> None:
        self.service = service
        self._store = store
        self.settings = settings
        self.limits = limits
        self._source = source
        self._retrieve_operation = retrieve_operation
        self._store_operation = store_operation
        self._agent_policy = agent_policy

    def with_limits(self, limits: Limits) -> Door:
        door = object.__new__(Door)
        door.__dict__.update(self.__dict__, limits=limits)
        return door

    # -- who ---------------------------------------------------------------------------------

    def caller(
        self, user_id: str | None = None, *, workspace: str | None = "", target: str = "", local: bool = True, **more: Any
    ) -> Caller:
        """The caller of a face: `user_id`, or the service's `human_name` when the face names no
        user. `local`: this process (Python, the command line), which owns the store."""
        if user_id is not None and not isinstance(user_id, str):
            raise InvalidInputError(f"user_id must be a text, got {type(user_id).__name__}")
        named = user_id is not None
        user = user_id if user_id is not None else self.service.params.human_name
        if local and not more:
            return Caller.local(user, named=named, workspace=workspace, target=target)
        return Caller(user, workspace, target, named=named, **more)

    @property
    def memoryos(self) -> bool:
        """Whether the service keeps memory MemoryOS's way."""
        return MEMORYOS_OPERATION in self.service.operations

    # -- writing -----------------------------------------------------------------------------

    def add(
        self,
        caller: Caller,
        messages: MessagesIn,
        *,
        metadata: Mapping[str, Any] | None = None,
        infer: bool = True,
        time: datetime | None = None,
    ) -> list[MemoryRecord]:
        """Remember `messages` (see `MemoryApi.add`): as the conversation (`infer`, the
        `store_operation`), or each as one memory as given (the `add_memory` operation)."""
        caller.require(WRITE, "add")
        extra = checked_metadata(metadata)
        said = messages_of(messages, self._now(time), extra)
        self.limits.check_count(len(said), "messages")
        for message in said:
            self.limits.check_text(message.content, "message")
        if infer:
            result = self._run(caller, self._store_operation, "add(infer=True)", messages=tuple(said))
            ids = list(result.context.stored_message_ids or ())
        else:
            result = self._run(caller, "add_memory", "add(infer=False)", new_memories=tuple(said))
            ids = list(result.context.added_memory_ids)
        return self._records(self._require_store().get(ids))

    def update(
        self, caller: Caller, memory_id: str, text: str | None = None, *, metadata: Mapping[str, Any] | None = None
    ) -> MemoryRecord:
        """Change a memory's text (embedded again) and/or metadata (a key given None is removed)."""
        caller.require(WRITE, "update")
        if text is None and metadata is None:
            raise InvalidInputError("update needs text= or metadata= (or both)")
        if text is not None:
            if not isinstance(text, str) or not text.strip():
                raise InvalidInputError("update: text= is empty; delete the memory instead")
            self.limits.check_text(text, "text")
        changes = None if metadata is None else checked_metadata(metadata, allow_none=True)
        owner, node = self._owned(caller, memory_id)
        self._run(
            owner, "update_memory", "update", memory_ids=(node.memory_id,),
            new_memories=() if text is None else (text,), new_metadata=changes,
        )  # fmt: skip
        return self._record_by_id(node.memory_id)

    def delete(self, caller: Caller, memory_ids: str | Sequence[str]) -> WriteOutcome:
        """Delete memories by id; ids that name no memory of the caller's are reported, untouched."""
        caller.require(WRITE, "delete")
        asked = [memory_ids] if isinstance(memory_ids, str) else list(memory_ids)
        self.limits.check_count(len(asked), "memory ids")
        if not asked:
            raise InvalidInputError("delete needs the ids of the memories to delete (get_all lists them)")
        found = {node.memory_id: node for node in self._reachable(caller, asked)}
        unknown = tuple(memory_id for memory_id in asked if memory_id not in found)
        deleted: list[str] = []
        run_id, result_text = "", ""
        # one run per owner (a local caller may delete several users' memories at once)
        for owner, ids in self._by_owner(caller, list(found.values())).items():
            result = self._run(owner, "delete_memory", "delete", memory_ids=tuple(ids))
            deleted += result.context.deleted_memory_ids
            run_id, result_text = result.run_id, result.context.result
        return WriteOutcome(
            run_id, "delete_memory", result_text, deleted_ids=tuple(deleted), unknown_ids=unknown, deleted_count=len(deleted)
        )

    def delete_all(self, caller: Caller) -> WriteOutcome:
        """Delete every memory of the caller's user (in its target and workspace): the user must be named."""
        caller.require(WRITE, "delete_all")
        if not caller.named:
            raise InvalidInputError("delete_all deletes every memory of one user: name the user (user_id=, --user)")
        result = self._run(caller, "delete_all", "delete_all")
        context = result.context
        return WriteOutcome(result.run_id, "delete_all", context.result, deleted_count=context.deleted_count)

    def pin(self, caller: Caller, memory_id: str, pinned: bool = True) -> MemoryRecord:
        """Keep a memory from being expired or rewritten by consolidation and reflection (or, with
        `pinned=False`, let them again)."""
        verb = "pin" if pinned else "unpin"
        caller.require(WRITE, verb)
        owner, node = self._owned(caller, memory_id)
        self._run(owner, "pin_memory" if pinned else "unpin_memory", verb, memory_ids=(node.memory_id,))
        return self._record_by_id(node.memory_id)

    def undo(self, caller: Caller, run_id: str) -> UndoOutcome:
        """Take back what one run changed, as far as no later change built on it; twice changes nothing more."""
        caller.require(WRITE, "undo")
        if not isinstance(run_id, str) or not run_id.strip():
            raise InvalidInputError("undo needs the id of a run (`memoryscope history --user NAME` lists them)")
        run_id = run_id.strip()
        owner = caller
        if caller.reach is not None:
            changes = self._require_store().history(run_id=run_id, limit=1)
            if not changes or not caller.reach.permits(changes[0].user_name, changes[0].workspace):
                raise NotFoundError(f"no run {run_id!r} changed memories this caller reaches", code="unknown_run")
            first = changes[0]
            owner = replace(caller.for_user(first.user_name, first.workspace), target=first.target_name)
        context = self._run(owner, "undo_run", "undo", undo_run_id=run_id).context
        plan = context.undo_plan
        if plan is None:  # pragma: no cover - the undo_run worker always sets it
            raise MemoryScopeError("undo_run did not report what it did")
        return UndoOutcome(
            run_id, context.undo_of_run, tuple(node.memory_id for node in plan.restore), tuple(plan.delete),
            dict(plan.refused), already_undone=bool(plan.already_undone) and not (plan.restore or plan.delete),
        )  # fmt: skip

    def run(self, caller: Caller, operation: str, **given: Any) -> RunResult:
        """Run a configured operation by name (consolidate, reflect, MemoryOS update, ...), with
        the limits every verb keeps; memory ids must be the caller's. Inputs given empty (None,
        "", no items, False) are left out, so a face can pass every field it has."""
        caller.require(WRITE, operation)
        inputs: dict[str, Any] = {name: tuple(v) if isinstance(v, list) else v for name, v in given.items() if v}
        if operation == "delete_all" and not caller.named:
            raise InvalidInputError("delete_all deletes every memory of one user: name the user (user_id=, --user)")
        if operation not in self.service.operations:
            known = ", ".join(self.service.operations)
            message = f"no operation {operation!r} in memory_service.{self.service.name}; known: {known}"
            raise NotFoundError(message, code="unknown_operation")
        query = inputs.get("query", "")
        if query:
            self.limits.check_text(query, "query")
        for what in ("new_memories", "memory_ids"):
            self.limits.check_count(len(inputs.get(what, ())), what)
        for text in inputs.get("new_memories", ()):
            self.limits.check_text(text, "text")
        if inputs.get("memory_ids"):
            known_ids = {node.memory_id for node in self._reachable(caller, list(inputs["memory_ids"]))}
            for memory_id in inputs["memory_ids"]:
                if memory_id not in known_ids and self._exists(memory_id):
                    raise MemoryNotFoundError(memory_id)
        if inputs.get("query_time") is not None:
            inputs["query_time"] = aware(inputs["query_time"], self.settings.tzinfo)
        return self._run(caller, operation, operation, **inputs)

    def run_summary(self, caller: Caller, operation: str, **inputs: Any) -> RunSummary:
        """`run`, and what it produced: the operation's answer, else what a backend operation's
        `store_memory` wrote (as stored now: a later change may have removed some)."""
        result = self.run(caller, operation, **inputs)
        context = result.context
        if context.memories:
            produced = self._records(context.memories)
        else:
            written = set(context.store_outcome.memory_ids)
            ids = [node.memory_id for node in (*context.new_observations, *context.updated_insights) if node.memory_id in written]
            produced = self._records(self._require_store().get(ids)) if ids else []
        return RunSummary(
            operation, result.run_id, context.result, result.stopped, tuple(result.skipped), tuple(produced),
            tuple(context.added_memory_ids or ()), tuple(context.deleted_memory_ids or ()),
            tuple(context.unknown_memory_ids or ()), tuple(result.timings), result.total_seconds,
        )  # fmt: skip

    def import_memories(self, caller: Caller, source: str | Path | TextIO, **options: Any) -> int:
        """Memories from JSON lines into the store: any users the file names, so admin only."""
        caller.require(ADMIN, "import")
        return import_memories(self._require_store(), source, **options)

    # -- reading -----------------------------------------------------------------------------

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
    ) -> list[MemoryRecord]:
        """The `top_k` memories of the caller's user that best answer `query`, best first."""
        caller.require(READ, "search")
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("search needs a query; get_all lists memories without one")
        self.limits.check_text(query, "query")
        top_k = self.limits.check_top_k(top_k)
        narrowed = SearchFilter(
            memory_types=memory_types(types),
            time_range=time_range(time_range_given, self.settings.tzinfo),
            metadata=_conditions(filters),
        )
        result = self._run(
            caller, self._retrieve_operation, "search", query=query, query_time=self._now(query_time),
            search_filter=narrowed, top_k=top_k,
        )  # fmt: skip
        return self._records(result.context.memories[:top_k])

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
            memory_types=_LISTED_BY_DEFAULT if types is None else memory_types(types),
            status=None if include_expired else MemoryStatus.VALID,
            metadata=_conditions(filters),
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
        counts = {(memory_type.value, status.value): 0 for memory_type in MemoryType for status in MemoryStatus}
        users = store.user_counts()
        for user_name in users:
            expired = store.count(MemoryFilter(user_name=user_name, status=MemoryStatus.EXPIRED))
            statuses = tuple(MemoryStatus) if expired else (MemoryStatus.VALID,)
            for memory_type in MemoryType:
                for status in statuses:
                    memory_filter = MemoryFilter(user_name=user_name, memory_types=(memory_type,), status=status)
                    counts[(memory_type.value, status.value)] += store.count(memory_filter)
        return counts, len(users)

    def user_exists(self, caller: Caller) -> bool:
        """Whether the caller's user has any memory (of any status) in its workspace and target."""
        return self._require_store().count(caller.memory_filter(status=None)) > 0

    def profile(self, caller: Caller) -> Profile:
        """What is known about the user, by the memory policy: MemoryOS's profile and knowledge, an
        agent's `human` block, or else the insights reflection drew."""
        caller.require(READ, "profile")
        if self.memoryos:
            profiles = self.get_all(caller, types=[MemoryType.MEMORYOS_PROFILE])
            knowledge = self.get_all(caller, types=[MemoryType.MEMORYOS_KNOWLEDGE])
            text = profiles[0].memory if profiles else ""
            return Profile(caller.user_id, "memoryos", text, tuple(profiles[:1] + knowledge))
        if self._agent_policy:
            blocks = [record for record in self.get_all(caller, types=[MemoryType.CORE_MEMORY]) if record.node.key == "human"]
            return Profile(caller.user_id, "agent", blocks[0].memory if blocks else "", tuple(blocks))
        insights = self.get_all(caller, types=[MemoryType.INSIGHT])
        return Profile(caller.user_id, "insights", "\n".join(record.text for record in insights), tuple(insights))

    def status(self, caller: Caller) -> Status:
        """What waits for the user's background operations and which runs changed their memories,
        read from the store (so any process sees it), with this process's own runs."""
        caller.require(READ, "status")
        store = self._require_store()
        who = Scope(caller.user_id, caller.target, caller.write_workspace)
        newest: dict[str, MemoryChange] = {}
        for change in reversed(store.history(user_name=caller.user_id, limit=_ALL_CHANGES)):
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

    # -- pieces ------------------------------------------------------------------------------

    def _run(self, caller: Caller, operation: str, verb: str, **inputs: Any) -> RunResult:
        """Run `operation` for the caller's user: the one way a verb writes."""
        if not self.service.has_operation(operation):
            known = ", ".join(self.service.operations)
            raise MemoryScopeError(
                f"{verb} runs the operation {operation!r}, which memory_service.{self.service.name} does not define "
                f"(it has: {known}); add it to the config's memory_operations"
            )
        try:
            return self.service.run_operation(
                operation, caller.user_id, target_name=caller.target, workspace=caller.write_workspace, **inputs
            )
        except WorkerError as error:
            if isinstance(error.cause, _INPUT_ERRORS):
                raise error.cause from None  # the caller's mistake, whichever worker found it
            raise

    def _require_store(self) -> MemoryStore:
        if self._store is None:
            raise MemoryScopeError(f"{self._source}: this config has no memory_store; the memory verbs need one")
        return self._store

    def _now(self, moment: datetime | None) -> datetime:
        zone = self.settings.tzinfo
        return datetime.now(zone) if moment is None else aware(moment, zone)  # type: ignore[return-value]  # not None in, not None out

    def _reaches(self, caller: Caller, user_id: str, workspace: str) -> bool:
        if caller.reach is not None:
            return caller.reach.permits(user_id, workspace)
        return user_id == caller.user_id and (caller.workspace is None or workspace == caller.workspace)

    def _reachable(self, caller: Caller, memory_ids: list[str]) -> list[MemoryNode]:
        """The memories among `memory_ids` this caller reaches: its own through the store's
        filter; for a caller that reaches other users (an admin, a local process), by owner."""
        ids = [memory_id for memory_id in dict.fromkeys(memory_ids) if isinstance(memory_id, str) and memory_id]
        if not ids:
            return []
        store = self._require_store()
        if caller.reach is None:
            return store.scan(caller.memory_filter(status=None, memory_ids=tuple(ids), any_target=True), limit=len(ids))
        return [node for node in store.get(ids) if caller.reach.permits(node.user_name, node.workspace)]

    def _exists(self, memory_id: str) -> bool:
        return bool(self._require_store().get([memory_id]))

    def _owned(self, caller: Caller, memory_id: str) -> tuple[Caller, MemoryNode]:
        """The caller's memory with this id and the caller acting as its owner; not found otherwise."""
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise InvalidInputError("give the id of a memory (get_all lists them)")
        found = self._reachable(caller, [memory_id.strip()])
        if not found:
            raise MemoryNotFoundError(memory_id)
        node = found[0]
        return replace(caller.for_user(node.user_name, node.workspace), target=node.target_name), node

    def _by_owner(self, caller: Caller, nodes: list[MemoryNode]) -> dict[Caller, list[str]]:
        owners: dict[Caller, list[str]] = {}
        for node in nodes:
            owner = replace(caller.for_user(node.user_name, node.workspace), target=node.target_name)
            owners.setdefault(owner, []).append(node.memory_id)
        return owners

    def _record(self, node: MemoryNode) -> MemoryRecord:
        return record_of(node, self.settings.language, self.settings.tzinfo)

    def _records(self, nodes: Sequence[MemoryNode]) -> list[MemoryRecord]:
        return [self._record(node) for node in nodes]

    def _record_by_id(self, memory_id: str) -> MemoryRecord:
        found = self._require_store().get([memory_id])
        if not found:
            raise MemoryNotFoundError(memory_id)
        return self._record(found[0])



def _run_dict(record: RunRecord) -> dict[str, Any]:
    return _jsonable({key: value for key, value in asdict(record).items() if key != "user_name"})


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value.isoformat() if isinstance(value, datetime) else value for key, value in values.items()}


def _conditions(filters: Mapping[str, Any] | None) -> tuple[MetadataCondition, ...]:
    """Metadata filters read (a bad one is the caller's mistake, not the store's failure)."""
    try:
        return metadata_conditions(filters)
    except StoreError as error:
        raise InvalidFilterError(str(error), code="invalid_filter") from None
