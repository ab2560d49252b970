"""Memory history: every change to a memory, kept by the store in the same write as the change.

A change says what happened (`created`, `updated`, `expired`, `deleted`, `restored`), when, by
which operation and run (`ChangeSource`, handed to the store's write), and the memory before and
after (its fields as `MemoryNode.to_dict()` gives them, without vectors). Deletion means
deletion: when a memory is deleted its content leaves the history too (the changes stay, with
their times and sources, but `before`/`after` are emptied), unless the store is configured to
keep it (`history_keep_deleted_content`).

`undo_plan` works out how to revert one run: what to delete (memories the run created), what to
put back (the state before the run), and what it refuses because a later change built on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memoryscope.errors import MemoryScopeError
from memoryscope.memory import MemoryNode, MemoryStatus, utc_now

if TYPE_CHECKING:
    from memoryscope.stores.base import MemoryStore

__all__ = [
    "ChangeSource",
    "MemoryChange",
    "UndoPlan",
    "changes_of_write",
    "changes_of_delete",
    "undo_plan",
    "undo_run",
    "node_from_dict",
    "is_pinned",
]

CREATED, UPDATED, EXPIRED, DELETED, RESTORED = "created", "updated", "expired", "deleted", "restored"
ACTIONS = (CREATED, UPDATED, EXPIRED, DELETED, RESTORED)
_MAX_CHANGES = 1_000_000  # more changes than one run or one memory ever has
_UNDO = "undo-"  # an undo's run id is the undone run's, after this


@dataclass(frozen=True)
class ChangeSource:
    """Who changes memories: the operation (`consolidate_memory`, `delete_memory`, `import`, ...)
    and its run's id ("" when the change comes from a direct call)."""

    operation: str = ""
    run_id: str = ""
    restoring: bool = False  # an undo puts memories back: their change is `restored`

    @classmethod
    def of(cls, ctx: Any) -> ChangeSource:
        """The source of the changes a workflow run makes (its `MemoryContext`'s operation and run id)."""
        return cls(ctx.operation, ctx.run_id)


@dataclass(frozen=True)
class MemoryChange:
    """One change to one memory."""

    memory_id: str
    user_name: str
    action: str
    at: datetime
    operation: str = ""
    run_id: str = ""
    target_name: str = ""
    workspace: str = ""
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    seq: int = 0  # order of the changes in the store (later is larger)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryChange:
        """Inverse of `to_dict` (`seq` is the order in the store it came from; a store gives its own)."""
        missing = [name for name in ("memory_id", "user_name", "action", "at") if not isinstance(data.get(name), str)]
        if missing:
            raise ValueError(f"a change needs {', '.join(missing)} as text")
        if data["action"] not in ACTIONS:
            raise ValueError(f"unknown action {data['action']!r}; known: {', '.join(ACTIONS)}")
        for name in ("before", "after"):
            if data.get(name) is not None and not isinstance(data[name], dict):
                raise ValueError(f"{name!r} must be an object or null")
        at = datetime.fromisoformat(data["at"])
        if at.tzinfo is None:
            raise ValueError("`at` must carry its time zone")
        return cls(
            memory_id=data["memory_id"],
            user_name=data["user_name"],
            target_name=str(data.get("target_name", "")),
            workspace=str(data.get("workspace", "")),
            action=data["action"],
            at=at,
            operation=str(data.get("operation", "")),
            run_id=str(data.get("run_id", "")),
            before=data.get("before"),
            after=data.get("after"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "memory_id": self.memory_id,
            "user_name": self.user_name,
            "target_name": self.target_name,
            "workspace": self.workspace,
            "action": self.action,
            "at": self.at.isoformat(),
            "operation": self.operation,
            "run_id": self.run_id,
            "before": self.before,
            "after": self.after,
        }


def changes_of_write(
    before: Mapping[str, MemoryNode], written: Iterable[MemoryNode], source: ChangeSource | None, at: datetime | None = None
) -> list[MemoryChange]:
    """The changes a write makes: each node written, against what was stored before (`before` by id)."""
    source = source or ChangeSource()
    at = at or utc_now()
    changes = []
    for node in written:
        old = before.get(node.memory_id)
        if old is not None and _same(old, node):
            continue  # nothing a person would call a change (only `updated_at` moved)
        changes.append(_change(node, _action(old, node, source), at, source, old, node))
    return changes


def changes_of_delete(
    deleted: Iterable[MemoryNode], source: ChangeSource | None, keep_content: bool, at: datetime | None = None
) -> list[MemoryChange]:
    source = source or ChangeSource()
    at = at or utc_now()
    return [_change(node, DELETED, at, source, node if keep_content else None, None) for node in deleted]


@dataclass
class UndoPlan:
    """How to revert one run: nodes to put back, ids to delete, and what is refused, with why."""

    restore: list[MemoryNode] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # memory id -> reason
    already_undone: list[str] = field(default_factory=list)  # an earlier undo of the run reverted these


def undo_plan(run_changes: Sequence[MemoryChange], later_changes: Mapping[str, MemoryChange]) -> UndoPlan:
    """Revert the changes of one run (oldest first); `later_changes`: for a memory the run
    changed, the first change made after the run's last one, if any (then that memory is refused)."""
    plan = UndoPlan()
    first_by_memory: dict[str, MemoryChange] = {}
    for change in run_changes:
        first_by_memory.setdefault(change.memory_id, change)
    for memory_id, first in first_by_memory.items():
        later = later_changes.get(memory_id)
        if later is not None:
            by = later.operation or "a direct change"
            plan.refused[memory_id] = f"changed later ({later.action} by {by} at {later.at.isoformat(timespec='seconds')})"
        elif first.action == CREATED:
            plan.delete.append(memory_id)
        elif first.before is None:
            plan.refused[memory_id] = "its earlier state is not in the history (deleted content is not kept)"
        else:
            plan.restore.append(node_from_dict(first.before))
    return plan


def is_pinned(node: MemoryNode) -> bool:
    """A pinned memory is never expired or merged by consolidation or reflection (`memoryscope pin ID`)."""
    return bool(node.meta.get("pinned"))


def node_from_dict(data: Mapping[str, Any]) -> MemoryNode:
    """A node back from `MemoryNode.to_dict()`."""
    return MemoryNode.from_dict(dict(data))


def _action(old: MemoryNode | None, new: MemoryNode, source: ChangeSource) -> str:
    if source.restoring:
        return RESTORED
    if old is None:
        return CREATED
    if old.status is MemoryStatus.VALID and new.status is MemoryStatus.EXPIRED:
        return EXPIRED
    return UPDATED


def _same(old: MemoryNode, new: MemoryNode) -> bool:
    return old.replace(updated_at=new.updated_at, score=None) == new.replace(score=None)


def _change(
    node: MemoryNode, action: str, at: datetime, source: ChangeSource, before: MemoryNode | None, after: MemoryNode | None
) -> MemoryChange:
    return MemoryChange(
        memory_id=node.memory_id,
        user_name=node.user_name,
        target_name=node.target_name,
        workspace=node.workspace,
        action=action,
        at=at,
        operation=source.operation,
        run_id=source.run_id,
        before=None if before is None else before.to_dict(),
        after=None if after is None else after.to_dict(),
    )


def _standing(changes: list[MemoryChange]) -> list[MemoryChange]:
    """`changes` less those of runs undone among them (and their undos): a later run that was taken
    back does not block taking back an earlier one."""
    undone = {change.run_id.removeprefix(_UNDO) for change in changes if change.run_id.startswith(_UNDO)}
    return [change for change in changes if change.run_id not in undone and change.run_id.removeprefix(_UNDO) not in undone]


def undo_run(store: MemoryStore, run_id: str) -> tuple[UndoPlan, str]:
    """Revert what run `run_id` changed, as far as no later change built on it; returns the plan
    carried out and the undo's own run id (its changes are recorded under it)."""
    run_changes = store.history(run_id=run_id, limit=_MAX_CHANGES)
    if not run_changes:
        raise MemoryScopeError(f"no changes are recorded for run {run_id!r}; `memoryscope history --user NAME` lists runs")
    last_seq: dict[str, int] = {}
    for change in run_changes:
        last_seq[change.memory_id] = change.seq
    # the undo's run id comes from the run's: an undo cut short can be run again, and what it
    # already did does not count as a later change
    undo_id = f"{_UNDO}{run_id}"
    later: dict[str, MemoryChange] = {}
    done: list[str] = []
    for memory_id, seq in last_seq.items():
        history = store.history(memory_id=memory_id, limit=_MAX_CHANGES)
        after = _standing([change for change in history if change.seq > seq and change.run_id != undo_id])
        if after:
            later[memory_id] = after[0]
        elif history and history[-1].seq > seq and history[-1].run_id == undo_id:
            done.append(memory_id)  # an earlier undo of this run put it back already
    plan = undo_plan([change for change in run_changes if change.memory_id not in done], later)
    plan.already_undone = done
    if plan.restore:
        store.upsert(plan.restore, change=ChangeSource("undo", undo_id, restoring=True))
    if plan.delete:
        store.delete(plan.delete, change=ChangeSource("undo", undo_id))
    return plan, undo_id
