"""mem0's shapes over the door's records: its ids as a caller's scope, its memory items and history rows.

Shared by the Python drop-in (`memoryscope.mem0.Memory`) and the REST aliases
(`memoryscope.server.routes_mem0`), so both answer exactly alike.

How mem0's ids map onto the door's caller (`memoryscope.door.Caller`): `user_id` is the user,
`agent_id` the target, `run_id` the workspace. A memory carries every id it was added with (an
`add` writes exactly them). As in mem0, the ids of a read (`search`, `get_all`) or a `delete_all`
are filters: an id not given matches any, so `search(..., user_id="ann")` finds Ann's memories
added with any `agent_id` and `run_id`; the door does it (a caller's target or workspace None).
Memories added with no `user_id` belong to the user `NO_USER`, a name no mem0 id can have (mem0
ids have no whitespace), so they never mix with a user's; a read with no `user_id` reads them:
`get_all(agent_id="bot")` finds the memories added with that `agent_id` and no `user_id` (mem0
finds every user's too; here a user's memories are read only by naming the user).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memoryscope.door import Caller, Door, MemoryRecord
from memoryscope.errors import InvalidInputError
from memoryscope.history import MemoryChange

__all__ = ["NO_USER", "ENTITY_KEYS", "Mem0Scope", "scope_of", "split_filters", "memory_item", "history_item", "ADD"]

NO_USER = "(no user)"  # the user of memories added with an agent_id or run_id only
ENTITY_KEYS = ("user_id", "agent_id", "run_id")
ADD, UPDATE, DELETE = "ADD", "UPDATE", "DELETE"
_EVENTS = {"created": ADD, "restored": ADD, "updated": UPDATE, "expired": DELETE, "deleted": DELETE}


@dataclass(frozen=True)
class Mem0Scope:
    """mem0's `user_id`, `agent_id` and `run_id` ("" when not given) as the door's user, target and
    workspace: exactly them for a write; for a read, an id not given is any (None)."""

    user_id: str = ""
    agent_id: str = ""
    run_id: str = ""

    @property
    def user(self) -> str:
        return self.user_id or NO_USER

    @property
    def read_target(self) -> str | None:
        return self.agent_id or None

    @property
    def read_workspace(self) -> str | None:
        return self.run_id or None

    def local_caller(self, door: Door, *, reading: bool = False) -> Caller:
        """The caller of this process (the Python drop-in): for exactly these ids, or `reading`
        (search, get_all, delete_all), for every memory that has them."""
        if reading:
            return door.caller(self.user, workspace=self.read_workspace, target=self.read_target)
        return door.caller(self.user, workspace=self.run_id, target=self.agent_id)


def _entity_id(value: Any, name: str) -> str:
    """mem0's rule for an id: a number is read as text; trimmed; not empty; no whitespace inside."""
    if value is None:
        return ""
    text = str(value).strip() if isinstance(value, str | int) and not isinstance(value, bool) else None
    if text is None:
        raise InvalidInputError(f"{name} must be a text, got {type(value).__name__}")
    if not text:
        raise InvalidInputError(f"Invalid {name}: cannot be empty or whitespace-only. Provide a valid identifier.")
    if any(character.isspace() for character in text):
        raise InvalidInputError(f"Invalid {name}: cannot contain whitespace. Provide a valid identifier without spaces.")
    return text


def scope_of(user_id: Any = None, agent_id: Any = None, run_id: Any = None, *, verb: str) -> Mem0Scope:
    """The ids given, checked as mem0 checks them; at least one is needed."""
    scope = Mem0Scope(_entity_id(user_id, "user_id"), _entity_id(agent_id, "agent_id"), _entity_id(run_id, "run_id"))
    if not (scope.user_id or scope.agent_id or scope.run_id):
        raise InvalidInputError(
            f"{verb}: at least one of 'user_id', 'agent_id' or 'run_id' must be provided, "
            "e.g. filters={'user_id': 'alice'} (or user_id='alice')"
        )
    return scope


def split_filters(
    filters: Mapping[str, Any] | None, *, user_id: Any = None, agent_id: Any = None, run_id: Any = None, verb: str
) -> tuple[Mem0Scope, dict[str, Any] | None]:
    """mem0's `filters` (the ids, newer form) and keyword ids (older form) as the scope, and the rest
    of `filters` as metadata conditions (mem0's operators `eq`, `in`, `gte`, ... are the door's too)."""
    if filters is not None and not isinstance(filters, Mapping):
        raise InvalidInputError(f"{verb}: filters must be a dict, e.g. {{'user_id': 'alice'}}, got {type(filters).__name__}")
    given = dict(filters or {})
    ids = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
    for key in ENTITY_KEYS:
        in_filters = given.pop(key, None)
        if ids[key] is not None and in_filters is not None and str(ids[key]).strip() != str(in_filters).strip():
            both = f"{ids[key]!r} and filters {in_filters!r}"
            raise InvalidInputError(f"{verb}: {key} is given twice with different values ({both})")
        ids[key] = ids[key] if ids[key] is not None else in_filters
    return scope_of(**ids, verb=verb), given or None


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _hash(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()  # mem0's `hash`: the md5 of the memory's text


def memory_item(record: MemoryRecord, *, score: bool = True) -> dict[str, Any]:
    """One memory as mem0 answers it: `id`, `memory`, `hash`, `metadata`, `score` (search and
    get; not get_all), `created_at`, `updated_at`, and the ids it belongs to (`user_id`,
    `agent_id`, `run_id`, as given when added), plus `role` for a message."""
    node = record.node
    item: dict[str, Any] = {
        "id": record.id,
        "memory": record.memory,
        "hash": _hash(record.memory),
        "metadata": record.metadata or None,
    }
    if score:
        item["score"] = record.score
    item.update(created_at=_iso(record.created_at), updated_at=_iso(record.updated_at))
    if record.user_id != NO_USER:
        item["user_id"] = record.user_id
    if node is not None and node.target_name:
        item["agent_id"] = node.target_name
    if node is not None and node.workspace:
        item["run_id"] = node.workspace
    if record.role:
        item["role"] = record.role
    return item


def history_item(change: MemoryChange) -> dict[str, Any]:
    """One change as a row of mem0's history: `event` ADD, UPDATE or DELETE (an expired memory,
    replaced by a newer one, is a DELETE), `old_memory`, `new_memory`, `is_deleted`."""
    before, after = change.before or {}, change.after or {}
    event = _EVENTS.get(change.action, UPDATE)
    created = after.get("created_at") or before.get("created_at") or change.at.isoformat()
    role = (after.get("meta") or before.get("meta") or {}).get("role")
    return {
        "id": f"{change.memory_id}#{change.seq}",
        "memory_id": change.memory_id,
        "old_memory": before.get("content") if event != ADD else None,
        "new_memory": after.get("content") if event != DELETE else None,
        "event": event,
        "created_at": created,
        "updated_at": change.at.isoformat() if event != ADD else None,
        "is_deleted": event == DELETE,
        "actor_id": None,
        "role": role if isinstance(role, str) else None,
    }
