"""What the client returns: remote memories, chat results, and its one error type."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memoryscope.errors import MemoryScopeError


class MemoryScopeClientError(MemoryScopeError):
    """What went wrong, as the server said it: its HTTP `status`, its stable `code` (`unknown_memory`,
    `unauthorized`, `forbidden`, ...) and its `message`. `status` is None when no HTTP answer says it:
    the server could not be reached (`unreachable`), did not answer in time (`timeout`), sent an error
    inside a stream, or a call was refused before sending (`invalid_argument`)."""

    def __init__(self, status: int | None, code: str, message: str) -> None:
        self.status = status
        self.code = code
        self.message = message
        super().__init__(f"[{status} {code}] {message}" if status is not None else f"[{code}] {message}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.status, self.code, self.message))


@dataclass(frozen=True)
class RemoteMemory:
    """One memory as the server returns it: `MemoryRecord`'s fields (without `node`), times as datetimes."""

    id: str
    memory: str
    user_id: str
    memory_type: str
    status: str
    score: float | None
    text: str
    time: datetime
    created_at: datetime
    updated_at: datetime
    event_time: datetime | None
    message_time: datetime | None
    role: str | None
    metadata: dict[str, Any]
    superseded_by: str | None = None  # an expired memory: the id of the memory that replaced it
    pinned: bool = False  # kept from consolidation and reflection (`pin`)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RemoteMemory:
        """From `MemoryRecord.to_dict()`'s JSON; fields the server adds later are ignored."""
        return cls(
            id=str(data["id"]),
            memory=str(data["memory"]),
            user_id=str(data["user_id"]),
            memory_type=str(data["memory_type"]),
            status=str(data["status"]),
            score=None if data.get("score") is None else float(data["score"]),
            text=str(data["text"]),
            time=datetime.fromisoformat(data["time"]),
            created_at=datetime.fromisoformat(data["created_at"]),
            updated_at=datetime.fromisoformat(data["updated_at"]),
            event_time=_time_or_none(data.get("event_time")),
            message_time=_time_or_none(data.get("message_time")),
            role=data.get("role"),
            metadata=dict(data.get("metadata") or {}),
            superseded_by=data.get("superseded_by") or None,
            pinned=bool(data.get("pinned", False)),
        )


@dataclass(frozen=True)
class ChatResult:
    """A chat reply: its text, the memory lines put into the prompt and their ids, token `usage`."""

    content: str
    memories: tuple[str, ...] = ()
    memory_ids: tuple[str, ...] = ()
    usage: dict[str, int] = field(default_factory=dict)
    id: str = ""


def _time_or_none(value: Any) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


class RemoteProfile(list[RemoteMemory]):
    """The user's profile as the server's memory policy keeps it: the memories it is made of (a
    list, as `profile()` always returned), with `policy` (`insights`, `memoryos`, `agent`) and
    `text`, the profile as one text."""

    def __init__(self, memories: list[RemoteMemory], policy: str = "insights", text: str = "") -> None:
        super().__init__(memories)
        self.policy = policy
        self.text = text

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RemoteProfile:
        memories = [RemoteMemory.from_dict(item) for item in data.get("memories", data.get("insights", []))]
        return cls(memories, str(data.get("policy", "insights")), str(data.get("text", "")))
