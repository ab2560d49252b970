"""What verbs answer with: one `MemoryRecord` per memory, the profile, the status of a user, the
outcome of a write. Every face turns these into its medium (JSON, lines of text, tool results)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from memoryscope.history import MemoryChange, is_pinned
from memoryscope.memory import MemoryNode, caller_metadata

__all__ = ["MemoryRecord", "Profile", "Status", "WriteOutcome", "UndoOutcome", "RunSummary", "record_of"]


@dataclass(frozen=True)
class MemoryRecord:
    """One memory as the verbs return it. `memory` is its text, `text` the time-stamped line
    a person or an LLM sees; `score` is set by `search` (higher is better); `pinned`: kept from
    consolidation and reflection (`pin`/`unpin` set it); `node` is the full `MemoryNode`."""

    id: str
    memory: str
    user_id: str
    memory_type: str
    status: str
    superseded_by: str | None  # an expired memory: the id of the memory that replaced it
    score: float | None
    text: str
    time: datetime
    created_at: datetime
    updated_at: datetime
    event_time: datetime | None
    message_time: datetime | None
    role: str | None
    metadata: dict[str, Any]
    pinned: bool = False
    node: MemoryNode = field(default=None, repr=False, compare=False)  # type: ignore[assignment]  # always set by record_of

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (times as ISO 8601 texts)."""
        out: dict[str, Any] = {}
        for name in MemoryRecord.__dataclass_fields__:
            if name == "node":
                continue
            value = getattr(self, name)
            out[name] = value.isoformat() if isinstance(value, datetime) else value
        return out


def record_of(node: MemoryNode, language: str, zone: ZoneInfo) -> MemoryRecord:
    role = node.meta.get("role")
    return MemoryRecord(
        id=node.memory_id,
        memory=node.content,
        user_id=node.user_name,
        memory_type=node.memory_type.value,
        status=node.status.value,
        superseded_by=node.superseded_by or None,
        score=node.score,
        text=node.format(language, zone),
        time=node.shown_time,
        created_at=node.created_at,
        updated_at=node.updated_at,
        event_time=node.event_time,
        message_time=node.message_time,
        role=role if isinstance(role, str) else None,
        metadata=caller_metadata(node.meta),
        pinned=is_pinned(node),
        node=node,
    )


@dataclass(frozen=True)
class WriteOutcome:
    """What a deleting verb did: its run (`undo` takes it back), the ids deleted, the ids asked
    for that name no memory of the caller's, and a readable summary."""

    run_id: str
    operation: str
    result: str
    deleted_ids: tuple[str, ...] = ()
    unknown_ids: tuple[str, ...] = ()
    deleted_count: int = 0


@dataclass(frozen=True)
class UndoOutcome:
    """An undone run: what was put back, what was deleted, what was refused and why."""

    run_id: str
    undo_run_id: str
    restored: tuple[str, ...]
    deleted: tuple[str, ...]
    refused: dict[str, str]
    already_undone: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "undo_run_id": self.undo_run_id,
            "restored": list(self.restored),
            "deleted": list(self.deleted),
            "refused": dict(self.refused),
            "already_undone": self.already_undone,
        }


@dataclass(frozen=True)
class Profile:
    """What is known about the user, by the config's memory policy: `insights` (MemoryScope's),
    `memoryos` (MemoryOS's evolving profile and knowledge) or `agent` (the agent's `human` block).
    `text` is the profile as one readable text; `records` the memories it is made of."""

    user_id: str
    policy: str
    text: str
    records: tuple[MemoryRecord, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "user": self.user_id,
            "policy": self.policy,
            "text": self.text,
            "memories": [record.to_dict() for record in self.records],
        }


@dataclass(frozen=True)
class Status:
    """What waits and what ran for one user: the backlog and the runs that changed their memories,
    read from the store (so any process sees them), and what this process runs or ran for them."""

    user_id: str
    workspace: str
    target: str
    label: str  # how status and logs name the user: `ann`, `ann [target bob, workspace work]`
    pending_messages: dict[str, Any]  # ready, backing_off, parked, next_retry, last_error, ...
    unreflected_observations: int
    stored_runs: tuple[MemoryChange, ...]  # the newest change of each run that wrote for the user, newest first
    running: tuple[dict[str, Any], ...]  # what this process runs for the user now
    waiting: bool  # this process's scheduler has a run of theirs queued
    last_runs: dict[str, dict[str, Any]]  # this process's last run of each operation for the user
    last_errors: dict[str, dict[str, Any]]  # and its last failed one

    def to_dict(self) -> dict[str, Any]:
        return {
            "user": self.user_id,
            "workspace": self.workspace,
            "target": self.target,
            "pending_messages": self.pending_messages,
            "unreflected_observations": self.unreflected_observations,
            "stored_runs": [
                {"run_id": change.run_id, "operation": change.operation, "at": change.at.isoformat()}
                for change in self.stored_runs
            ],
            "running": list(self.running),
            "waiting": self.waiting,
            "last_runs": self.last_runs,
            "last_errors": self.last_errors,
        }


@dataclass(frozen=True)
class RunSummary:
    """What one run of an operation did: its answer or, for a backend operation (which answers
    with none), the observations and insights it wrote (`produced`); the ids it added, deleted or
    did not know; each worker's seconds."""

    operation: str
    run_id: str
    result: str
    stopped: str
    skipped: tuple[str, ...]
    produced: tuple[MemoryRecord, ...]
    added_memory_ids: tuple[str, ...]
    deleted_memory_ids: tuple[str, ...]
    unknown_memory_ids: tuple[str, ...]
    timings: tuple[tuple[str, float], ...]
    total_seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "run_id": self.run_id,
            "result": self.result,
            "stopped": self.stopped,
            "skipped": list(self.skipped),
            "memories": [record.node.to_dict() for record in self.produced],  # the stored fields, as always
            "added_memory_ids": list(self.added_memory_ids),
            "deleted_memory_ids": list(self.deleted_memory_ids),
            "unknown_memory_ids": list(self.unknown_memory_ids),
            "timings": [[worker, seconds] for worker, seconds in self.timings],
            "total_seconds": self.total_seconds,
        }
