"""Take back one run's changes to the user's memories (`memoryscope undo RUN_ID`)."""

from __future__ import annotations

from typing import ClassVar

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.errors import InvalidInputError, NotFoundError
from memoryscope.history import undo_run
from memoryscope.stores.base import MemoryStore
from memoryscope.worker import Worker, WorkerParams, register_worker

__all__ = ["UndoRunWorker"]

_ALL = 1_000_000  # more changes than one run ever makes


@register_worker("undo_run")
class UndoRunWorker(Worker):
    """Revert run `undo_run_id`, as far as no later change built on it (see
    `memoryscope.history.undo_run`): memories it created are deleted, those it changed or deleted
    are put back. Only a run whose every change is this user's (same user, target and workspace)
    is undone; any other run id is not found. Undoing a run twice changes nothing the second time
    (`undo_plan.already_undone` names what the first undo reverted)."""

    reads: ClassVar[tuple[str, ...]] = ("undo_run_id",)
    writes: ClassVar[tuple[str, ...]] = ("undo_plan", "undo_of_run", "result")

    class Params(WorkerParams):
        pass

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")

    def run(self, ctx: MemoryContext) -> None:
        run_id = ctx.undo_run_id.strip()
        if not run_id:
            raise InvalidInputError("undo needs the id of a run (`memoryscope history --user NAME` lists them)")
        changes = self._store.history(run_id=run_id, limit=_ALL)
        owner = (ctx.user_name, ctx.target_name, ctx.workspace)
        if not changes or any((change.user_name, change.target_name, change.workspace) != owner for change in changes):
            message = f"no run {run_id!r} changed memories of yours (`memoryscope history --user NAME` lists runs)"
            raise NotFoundError(message, code="unknown_run")
        plan, undo_id = undo_run(self._store, run_id)
        ctx.undo_plan = plan
        ctx.undo_of_run = undo_id
        ctx.result = (
            f"undo of run {run_id} (recorded as run {undo_id}): {len(plan.restore)} restored, {len(plan.delete)} deleted"
            + (f", {len(plan.already_undone)} already undone" if plan.already_undone else "")
            + (f", {len(plan.refused)} refused" if plan.refused else "")
        )
