"""The door: every verb of `memoryscope.door.verbs`, for a `Caller`, on one service and its store.

Faces (the Python API, the CLI, REST, the OpenAI endpoint, MCP, the agent's tools, the peers'
facades) make a `Caller` and call a method here; they never reach the store, the workflows or
the context themselves. What the door decides, it decides once for all of them: the limits on
sizes (`limits`), who owns a memory id (the store's filter, `base`), times without a zone (the
config's, `inputs`), what the profile is under each memory policy, what export writes, what
status reports (`reading`); a user's named agents (`agents`) and data sources (`sources`). This
module holds the writing verbs of memories: each runs an operation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from memoryscope.door.agents import AgentVerbs
from memoryscope.door.base import MemoryNotFoundError, UnknownOperationError
from memoryscope.door.blocks import BlockVerbs
from memoryscope.door.caller import ADMIN, READ, WRITE, Caller
from memoryscope.door.failures import failure_of
from memoryscope.door.inputs import MessagesIn, aware, checked_idempotency_key, checked_metadata, messages_of
from memoryscope.door.limits import Limits
from memoryscope.door.reading import ReadingVerbs
from memoryscope.door.records import MemoryRecord, RunSummary, UndoOutcome, WriteOutcome
from memoryscope.door.sources import SourceVerbs
from memoryscope.door.tiers import TierVerbs
from memoryscope.errors import InvalidInputError, MemoryScopeError, NotFoundError
from memoryscope.history import ChangeSource
from memoryscope.stores.state import StateKey, StateOwner
from memoryscope.transfer.jsonl import import_memories
from memoryscope.workflow import RunResult

__all__ = ["Door", "Limits", "MemoryNotFoundError"]

ACCEPTED_WRITE = "accepted_write"  # the state records of writes accepted now and done later


class Door(ReadingVerbs, AgentVerbs, SourceVerbs, TierVerbs, BlockVerbs):
    """Every verb, for a caller. Built once per `MemoryScope` (`scope.door`); `with_limits` gives
    the same door with other limits (a server given its own settings)."""

    def add(
        self,
        caller: Caller,
        messages: MessagesIn,
        *,
        metadata: Mapping[str, Any] | None = None,
        infer: bool = True,
        time: datetime | str | None = None,
        idempotency_key: str | None = None,
    ) -> list[MemoryRecord]:
        """Remember `messages` (see `MemoryApi.add`): as the conversation (`infer`, the
        `store_operation`), or each as one memory as given (the `add_memory` operation).

        With `idempotency_key` (a client's name for this request), message `i` gets the id
        `KEY#i` unless it has one, so its memory id is fixed: the same request sent again (a
        retry after a timeout) stores nothing twice."""
        return self.checked_add(caller, messages, metadata=metadata, infer=infer, time=time, idempotency_key=idempotency_key)()

    def checked_add(
        self,
        caller: Caller,
        messages: MessagesIn,
        *,
        metadata: Mapping[str, Any] | None = None,
        infer: bool = True,
        time: datetime | str | None = None,
        idempotency_key: str | None = None,
    ) -> Callable[[], list[MemoryRecord]]:
        """`add`, its input checked now (every error `add` raises for its input) and its write
        returned to be run later: what a face accepting a write before doing it (HTTP's 202) uses."""
        caller.require(WRITE, "add")
        caller.require_exact("add")
        extra = checked_metadata(metadata)
        said = messages_of(messages, self._now(time), extra)
        if idempotency_key is not None:
            key = checked_idempotency_key(idempotency_key)
            said = [
                message if message.message_id else replace(message, message_id=f"{key}#{index}")
                for index, message in enumerate(said)
            ]
        self.limits.check_count(len(said), "messages")
        for message in said:
            self.limits.check_text(message.content, "message")

        def write() -> list[MemoryRecord]:
            if infer:
                result = self._run(caller, self._store_operation, "add(infer=True)", messages=tuple(said))
                ids = list(result.context.stored_message_ids or ())
            else:
                result = self._run(caller, "add_memory", "add(infer=False)", new_memories=tuple(said))
                ids = list(result.context.added_memory_ids)
            return self._records(self._require_store().get(ids))

        return write

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
        """Delete every memory of the caller's user in its target and workspace (None: in every
        one, a `delete_all` run for each, so the history names each target and workspace): the
        user must be named. Several owners' runs answer with no single `run_id`."""
        caller.require(WRITE, "delete_all")
        if not caller.named:
            raise InvalidInputError("delete_all deletes every memory of one user: name the user (user_id=, --user)")
        if not caller.widened:
            result = self._run(caller, "delete_all", "delete_all")
            context = result.context
            return WriteOutcome(result.run_id, "delete_all", context.result, deleted_count=context.deleted_count)
        outcomes = [self.delete_all(owner) for owner in self._owners(caller, with_state=True)]
        if len(outcomes) == 1:
            return outcomes[0]
        deleted = sum(outcome.deleted_count for outcome in outcomes)
        summary = f"deleted {deleted} memories of {caller.user_id!r} in {len(outcomes)} targets and workspaces"
        return WriteOutcome("", "delete_all", summary, deleted_count=deleted)

    def reset(self, caller: Caller) -> WriteOutcome:
        """Delete every memory of every user, target and workspace in the store (admin only): one
        `delete_all` run per owner, so each is in the history and `undo` can take it back."""
        caller.require(ADMIN, "reset")
        store = self._require_store()
        owners: set[tuple[str, str, str]] = set()
        for batch in store.iter_all():
            owners.update((node.user_name, node.target_name, node.workspace) for node in batch)
        for records in store.iter_state():
            owners.update((r.key.owner.user_name, r.key.owner.target_name, r.key.owner.workspace) for r in records)
        deleted = 0
        for user_id, target, workspace in sorted(owners):
            owner = Caller(user_id, workspace, target, scopes=caller.scopes)
            deleted += self._run(owner, "delete_all", "reset").context.deleted_count
        summary = f"deleted {deleted} memories of {len(owners)} users, targets and workspaces"
        return WriteOutcome("", "reset", summary, deleted_count=deleted)

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
        caller.require_exact(operation)
        inputs: dict[str, Any] = {name: tuple(v) if isinstance(v, list) else v for name, v in given.items() if v}
        if operation == "delete_all" and not caller.named:
            raise InvalidInputError("delete_all deletes every memory of one user: name the user (user_id=, --user)")
        if operation not in self.service.operations:
            raise UnknownOperationError(self.service.name, operation, list(self.service.operations))
        query = inputs.get("query", "")
        if query:
            self.limits.check_text(query, "query")
        for what in ("new_memories", "memory_ids"):
            self.limits.check_count(len(inputs.get(what, ())), what)
        for text in inputs.get("new_memories", ()):
            self.limits.check_text(text, "text")
        if inputs.get("memory_ids"):
            # another user's memory is not found (no such id is left to the worker, which reports it)
            asked = list(inputs["memory_ids"])
            known_ids = {node.memory_id for node in self._reachable(caller, asked)}
            others = [memory_id for memory_id in asked if memory_id not in known_ids]
            foreign = [node.memory_id for node in self._require_store().get(others)] if others else []
            if foreign:
                raise MemoryNotFoundError(foreign[0])
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

    # -- writes accepted now and done later (a face's 202) ------------------------------------------

    def accept_write(self, caller: Caller, key: str, what: str) -> dict[str, Any]:
        """Note that the write named `key` (its idempotency key) was accepted for the caller's user,
        before it runs; any process can read it back (`accepted_write`)."""
        caller.require(WRITE, "add")
        return self._note_write(caller, key, {"status": "accepted", "what": what})

    def finish_write(self, caller: Caller, key: str, stored: Sequence[MemoryRecord] | None, error: BaseException | None) -> None:
        """Note how the accepted write `key` ended: the memories it stored, or the failure's kind."""
        if error is None:
            ids = [record.id for record in stored or ()]
            self._note_write(caller, key, {"status": "done", "count": len(ids), "memory_ids": ids})
        else:
            failure = failure_of(error)
            self._note_write(caller, key, {"status": "failed", "code": failure.kind, "http_status": failure.http_status})

    def accepted_write(self, caller: Caller, key: str) -> dict[str, Any]:
        """What became of the write accepted as `key` for the caller's user; NotFoundError when none was."""
        caller.require(READ, "status")
        found = self._require_store().read_state([self._write_key(caller, key)])
        if not found:
            raise NotFoundError(f"no write accepted as {key!r} for user {caller.user_id!r}", code="unknown_write")
        record = found[0]
        return {**record.value, "idempotency_key": key, "updated_at": record.updated_at.isoformat()}

    def _note_write(self, caller: Caller, key: str, value: dict[str, Any]) -> dict[str, Any]:
        self._require_store().write_state({self._write_key(caller, key): value}, change=ChangeSource("accepted_write"))
        return value

    @staticmethod
    def _write_key(caller: Caller, key: str) -> StateKey:
        return StateKey(
            StateOwner(caller.user_id, caller.write_target, caller.write_workspace), ACCEPTED_WRITE, checked_idempotency_key(key)
        )

    def import_memories(self, caller: Caller, source: str | Path | TextIO, **options: Any) -> int:
        """Memories from JSON lines into the store: any users the file names, so admin only."""
        caller.require(ADMIN, "import")
        return import_memories(self._require_store(), source, **options)
