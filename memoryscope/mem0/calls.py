"""mem0's verbs as calls of the door's, for a caller a face made: the Python drop-in
(`memoryscope.mem0.Memory`, a caller of this process) and the REST aliases
(`memoryscope.server.routes_mem0`, the request's caller) both call these, so they answer alike.

`add(infer=True)` keeps the messages as the conversation (the door's `add`), then, when the
service can consolidate (an LLM is configured), runs `consolidate_memory` right away, as mem0
extracts facts in its `add`: the answer is the facts learnt (`event: ADD`). Without an LLM the
answer is the messages kept, which search finds as they are. `add(infer=False)` stores each
message as one memory, as given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from memoryscope.door import Caller, Door, MemoryNotFoundError, MemoryRecord, parse_time
from memoryscope.errors import InvalidInputError
from memoryscope.mem0.shapes import ADD, ENTITY_KEYS, history_item, memory_item

__all__ = ["said_at", "add", "search", "get", "get_all", "update", "delete", "delete_all", "history", "reset", "CONSOLIDATE"]

CONSOLIDATE = "consolidate_memory"
_ROLES = ("user", "assistant")


def messages_of(messages: Any) -> list[dict[str, Any]]:
    """mem0's input (a text, a message dict or a list of them) as the door's messages; system
    messages are left out (mem0 does not remember them either)."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    elif isinstance(messages, Mapping):
        messages = [messages]
    elif not isinstance(messages, Sequence) or isinstance(messages, bytes):
        raise InvalidInputError(f"messages must be str, dict, or list[dict], got {type(messages).__name__}")
    said = []
    for index, message in enumerate(messages):
        if isinstance(message, str):
            message = {"role": "user", "content": message}
        if not isinstance(message, Mapping) or not isinstance(message.get("content"), str):
            raise InvalidInputError(f"messages[{index}] must be {{'role': ..., 'content': '...'}}, got {message!r}")
        role = message.get("role") or "user"
        if role == "system":
            continue
        if role not in _ROLES:
            raise InvalidInputError(f"messages[{index}]: role must be 'user', 'assistant' or 'system', got {role!r}")
        said.append({"role": role, "content": message["content"], **({"name": message["name"]} if message.get("name") else {})})
    return said


def said_at(timestamp: Any, door: Door) -> datetime | None:
    """mem0 Platform's `timestamp` (Unix seconds), or a datetime or ISO 8601 text: when the messages were said."""
    if timestamp is None or isinstance(timestamp, datetime | str):
        return parse_time("timestamp", timestamp, door.settings.tzinfo)
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float):
        raise InvalidInputError(f"timestamp must be Unix seconds, a datetime or an ISO 8601 text, got {timestamp!r}")
    return datetime.fromtimestamp(timestamp, tz=timezone.utc)


def own_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The metadata to keep: mem0's ids are the memory's scope, not metadata, so they are left out."""
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(f"metadata must be a dict, got {type(metadata).__name__}")
    return {key: value for key, value in metadata.items() if key not in (*ENTITY_KEYS, "actor_id")}


def add(
    door: Door, caller: Caller, messages: Any, *, metadata: Mapping[str, Any] | None, infer: bool, time: datetime | None = None
) -> dict[str, Any]:
    """mem0's `add`: `{"results": [{"id", "memory", "event": "ADD"}, ...]}`; `time`: when the
    messages were said (default now)."""
    said = messages_of(messages)
    if not any(message["content"].strip() for message in said):
        return {"results": []}
    stored = door.add(caller, said, metadata=own_metadata(metadata), infer=infer, time=time)
    if infer and _learns(door):
        learnt = door.run_summary(caller, CONSOLIDATE)
        return {"results": [_event(record) for record in learnt.produced]}
    return {"results": [_event(record) for record in stored]}


def _learns(door: Door) -> bool:
    operation = door.service.operations.get(CONSOLIDATE)
    return operation is not None and not operation.unavailable


def _event(record: MemoryRecord) -> dict[str, Any]:
    item: dict[str, Any] = {"id": record.id, "memory": record.memory, "event": ADD}
    if record.role:
        item["role"] = record.role
    return item


def search(
    door: Door, caller: Caller, query: str, *, top_k: int, filters: Mapping[str, Any] | None, threshold: float | None
) -> dict[str, Any]:
    """mem0's `search`: the best `top_k` memories the caller reads, each with its `score`."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("Invalid query: cannot be empty or whitespace-only.")
    found = door.search(caller, query.strip(), top_k=top_k, filters=filters, threshold=threshold)
    return {"results": [memory_item(record) for record in found]}


def get_all(
    door: Door, caller: Caller, *, filters: Mapping[str, Any] | None, limit: int, show_expired: bool = False
) -> dict[str, Any]:
    """mem0's `get_all`: the memories the caller reads, newest first, the first `limit`."""
    found = door.get_all(caller, filters=filters, limit=limit, include_expired=show_expired)
    return {"results": [memory_item(record, score=False) for record in found]}


def get(door: Door, caller: Caller, memory_id: str) -> dict[str, Any] | None:
    """mem0's `get`: one memory, or None."""
    record = door.get(caller, memory_id)
    return None if record is None else memory_item(record)


def update(door: Door, caller: Caller, memory_id: str, text: str | None, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """mem0's `update`: a new text (embedded again) and/or metadata keys."""
    if text is None and metadata is None:
        raise InvalidInputError("At least one of text or metadata must be provided.")
    door.update(caller, memory_id, text, metadata=own_metadata(metadata))
    return {"message": "Memory updated successfully!"}


def delete(door: Door, caller: Caller, memory_id: str) -> dict[str, Any]:
    """mem0's `delete`: MemoryNotFoundError when no memory the caller reaches has the id."""
    outcome = door.delete(caller, [memory_id])
    if not outcome.deleted_count:
        raise MemoryNotFoundError(memory_id)
    return {"message": "Memory deleted successfully!"}


def delete_all(door: Door, caller: Caller) -> dict[str, Any]:
    """mem0's `delete_all`: every memory the caller reads (a caller of mem0's read scope: `Mem0Scope`)."""
    door.delete_all(caller)
    return {"message": "Memories deleted successfully!"}


def history(door: Door, caller: Caller, memory_id: str) -> list[dict[str, Any]]:
    """mem0's `history`: every change to one memory, oldest first ([] for an unknown id)."""
    try:
        changes = door.history(caller, memory_id)
    except MemoryNotFoundError:
        return []
    return [history_item(change) for change in changes]


def reset(door: Door, caller: Caller) -> None:
    """mem0's `reset`: every memory of every user deleted (admin)."""
    door.reset(caller)
