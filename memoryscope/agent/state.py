"""A MemGPT-style agent's state (recursive summary, FIFO queue, counters), kept per user in the store.

    states = AgentStateStore(store, "ann")
    state = states.load()                   # an empty AgentState when none was saved
    state.queue.append({"role": "user", "content": "hi"})
    states.save(state)                      # one write; survives a restart
    states.save_checkpoint("before-trip", state, {"human": "Ann plays the guitar."})
    state, blocks = states.load_checkpoint("before-trip")

The live state is one state record per user, target and workspace (`memoryscope.stores.state`:
kind `agent_state`, name "state", value `AgentState.to_dict()`); each checkpoint is a record of
kind `agent_checkpoint` named for it, holding the state and the core memory blocks' values
(`{"state": ..., "blocks": {name: text}}`). State records have no vector and are never searched
or listed with memories. Each save is one write of one record: atomic, and a process killed
between saves loses nothing saved. Only the latest version is kept (the agent saves every step;
checkpoints are the way back). A state kept as `agent_state` memories by an older MemoryScope
moves here on first use (`memoryscope.stores.legacy_agent`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memoryscope.errors import MemoryScopeError, closest
from memoryscope.history import ChangeSource
from memoryscope.stores.base import MemoryStore
from memoryscope.stores.legacy_agent import migrate_owner
from memoryscope.stores.state import AGENT_CHECKPOINT, AGENT_STATE, StateKey, StateOwner, StateRecord

__all__ = ["AgentState", "AgentStateError", "AgentStateStore", "STATE_NAME"]

STATE_NAME = "state"
_MAX_NAME = 100
_ROLES = frozenset({"system", "user", "assistant", "tool"})


class AgentStateError(MemoryScopeError, ValueError):
    """A state that cannot be read (wrong types, a damaged record) or a checkpoint that is not there."""


@dataclass
class AgentState:
    """What an agent carries from one step to the next, besides its core memory."""

    summary: str = ""  # the recursive summary heading the queue
    # OpenAI wire-format messages (role, content, tool_calls, tool_call_id, name) in the FIFO queue
    queue: list[dict[str, Any]] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)  # e.g. steps, flushes, warnings, evicted_messages
    last_warning_at: datetime | None = None
    updated_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (times as ISO 8601 with their zone); the queue is copied, not shared."""
        return {
            "summary": self.summary,
            "queue": copy.deepcopy(self.queue),
            "counters": dict(self.counters),
            "last_warning_at": _iso(self.last_warning_at),
            "updated_at": _iso(self.updated_at),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentState:
        """Inverse of `to_dict`. Missing keys take their defaults and unknown ones are ignored (a
        newer version may add some); a value of the wrong type is an AgentStateError naming it."""
        if not isinstance(data, Mapping):
            raise AgentStateError(f"an agent state must be a JSON object, got {type(data).__name__}")
        summary = data.get("summary", "")
        if not isinstance(summary, str):
            raise AgentStateError(f"agent state: summary must be text, got {type(summary).__name__}")
        return cls(
            summary=summary,
            queue=_queue(data.get("queue", [])),
            counters=_counters(data.get("counters", {})),
            last_warning_at=_time(data.get("last_warning_at"), "last_warning_at"),
            updated_at=_time(data.get("updated_at"), "updated_at"),
        )


class AgentStateStore:
    """The saved state and checkpoints of one user's agent (and target, workspace), in `store`."""

    def __init__(self, store: MemoryStore, user: str, *, target_name: str = "", workspace: str = "") -> None:
        if not isinstance(user, str) or not user:
            raise MemoryScopeError("the agent's state needs the user's name")
        self.store = store
        self.user = user
        self.target_name = target_name
        self.workspace = workspace
        self._owner = StateOwner(user, target_name, workspace)

    def load(self) -> AgentState:
        """The saved state; an empty one when none was saved."""
        record = self._read(AGENT_STATE, STATE_NAME)
        return AgentState() if record is None else _state_of(record.value, record)

    def save(self, state: AgentState) -> None:
        """Replace the saved state with `state` (one write)."""
        self._write(AGENT_STATE, STATE_NAME, _checked(state), "agent_state")

    def save_checkpoint(self, name: str, state: AgentState, blocks: Mapping[str, str]) -> None:
        """Keep `state` and the core memory blocks' values as checkpoint `name` (replacing one of that name)."""
        name = _checkpoint_name(name)
        if not all(isinstance(key, str) and isinstance(value, str) for key, value in blocks.items()):
            raise AgentStateError(f"checkpoint {name!r}: the blocks must map block names to their text")
        self._write(AGENT_CHECKPOINT, name, {"state": _checked(state), "blocks": dict(blocks)}, "agent_checkpoint")

    def load_checkpoint(self, name: str) -> tuple[AgentState, dict[str, str]]:
        """The state and block values of checkpoint `name`; AgentStateError listing the saved ones when unknown."""
        name = _checkpoint_name(name)
        record = self._read(AGENT_CHECKPOINT, name)
        if record is None:
            saved = [saved_name for saved_name, _ in self.checkpoints()]
            close = closest(name, saved)
            hint = f" Did you mean {close!r}?" if close else ""
            listed = ", ".join(saved) if saved else "none yet (save one first)"
            raise AgentStateError(f"no checkpoint {name!r}.{hint} Saved checkpoints: {listed}")
        blocks = record.value.get("blocks", {})
        if not isinstance(blocks, dict) or not all(isinstance(value, str) for value in blocks.values()):
            raise AgentStateError(f"checkpoint {name!r}: its blocks are not a map of texts")
        return _state_of(record.value.get("state", {}), record), dict(blocks)

    def checkpoints(self) -> list[tuple[str, datetime]]:
        """`(name, when saved)` of every checkpoint, oldest first."""
        migrate_owner(self.store, self._owner)
        records = self.store.list_state(self._owner, AGENT_CHECKPOINT)
        return sorted(((record.key.name, record.updated_at) for record in records), key=lambda pair: pair[1])

    # -- pieces -------------------------------------------------------------------------------------

    def _read(self, kind: str, name: str) -> StateRecord | None:
        migrate_owner(self.store, self._owner)
        found = self.store.read_state([StateKey(self._owner, kind, name)])
        return found[0] if found else None

    def _write(self, kind: str, name: str, value: dict[str, Any], operation: str) -> None:
        migrate_owner(self.store, self._owner)  # before: an older store's record must not overwrite this one later
        self.store.write_state({StateKey(self._owner, kind, name): value}, change=ChangeSource(operation))


def _checked(state: AgentState) -> dict[str, Any]:
    """`state` as stored; a bad queue is refused before it is saved, never found when loading."""
    if not isinstance(state, AgentState):
        raise AgentStateError(f"expected an AgentState, got {type(state).__name__}")
    data = state.to_dict()
    AgentState.from_dict(data)
    return data


def _state_of(data: Any, record: StateRecord) -> AgentState:
    where = f"agent state {record.key.kind} {record.key.name!r}"
    if not isinstance(data, dict):
        raise AgentStateError(f"{where}: the state is not an object")
    try:
        state = AgentState.from_dict(data)
    except AgentStateError as error:
        raise AgentStateError(f"{where}: {error}") from None
    if state.updated_at is None:
        state.updated_at = record.updated_at
    return state


def _checkpoint_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise AgentStateError("a checkpoint needs a name")
    name = name.strip()
    if len(name) > _MAX_NAME or any(not character.isprintable() for character in name):
        raise AgentStateError(f"checkpoint name {name[:40]!r}: use at most {_MAX_NAME} printable characters")
    return name


def _queue(queue: Any) -> list[dict[str, Any]]:
    if not isinstance(queue, list):
        raise AgentStateError(f"agent state: queue must be a list of messages, got {type(queue).__name__}")
    for position, message in enumerate(queue):
        if not isinstance(message, dict):
            raise AgentStateError(f"agent state: queue message {position} must be an object, got {type(message).__name__}")
        role = message.get("role")
        if role not in _ROLES:
            raise AgentStateError(f"agent state: queue message {position} has role {role!r}; one of {', '.join(sorted(_ROLES))}")
        content = message.get("content")
        if content is not None and not isinstance(content, str | list):
            raise AgentStateError(f"agent state: queue message {position}: content must be text, a list of parts or null")
        calls = message.get("tool_calls")
        if calls is not None and not (isinstance(calls, list) and all(isinstance(call, dict) for call in calls)):
            raise AgentStateError(f"agent state: queue message {position}: tool_calls must be a list of objects")
        for name in ("tool_call_id", "name"):
            if message.get(name) is not None and not isinstance(message[name], str):
                raise AgentStateError(f"agent state: queue message {position}: {name} must be text")
    return copy.deepcopy(queue)


def _counters(counters: Any) -> dict[str, int]:
    if not isinstance(counters, dict):
        raise AgentStateError(f"agent state: counters must be an object of whole numbers, got {type(counters).__name__}")
    for name, value in counters.items():
        if not isinstance(name, str) or isinstance(value, bool) or not isinstance(value, int):
            raise AgentStateError(f"agent state: counter {name!r} must be a whole number, got {value!r}")
    return dict(counters)


def _time(value: Any, name: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise AgentStateError(f"agent state: {name} {value!r} is not an ISO 8601 time") from None
    if not isinstance(value, datetime):
        raise AgentStateError(f"agent state: {name} must be an ISO 8601 time or null, got {type(value).__name__}")
    if value.tzinfo is None:
        raise AgentStateError(f"agent state: {name} {value.isoformat()!r} has no time zone")
    return value


def _iso(moment: datetime | None) -> str | None:
    if moment is not None and moment.tzinfo is None:
        raise AgentStateError(f"agent state: times must carry their zone, got naive {moment!r}")
    return None if moment is None else moment.isoformat()
