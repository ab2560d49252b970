"""A MemGPT-style agent's state (recursive summary, FIFO queue, counters), kept per user in the store.

    states = AgentStateStore(store, "ann")
    state = states.load()                   # an empty AgentState when none was saved
    state.queue.append({"role": "user", "content": "hi"})
    states.save(state)                      # one write; survives a restart
    states.save_checkpoint("before-trip", state, {"human": "Ann plays the guitar."})
    state, blocks = states.load_checkpoint("before-trip")

The live state is one `agent_state` memory per user, target and workspace (`key` "state"); each
checkpoint is another (`key` "checkpoint:NAME") that also holds the core memory blocks' values.
The summary is the memory's `content`, the rest is JSON under `meta["state"]` (and the blocks
under `meta["blocks"]`): nested, so the store's metadata index leaves it alone (Elasticsearch
keeps `meta` unindexed anyway). Ids are derived from the owner and the key, so each save is one
upsert of the same memory: atomic, and a process killed between saves loses nothing saved.

Like core memory blocks, these memories are stored with a zero vector: nothing searches them, a
save costs no embedding call, and an empty summary is no input for an embedding API.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memoryscope.errors import MemoryScopeError, closest
from memoryscope.history import ChangeSource
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType, utc_now
from memoryscope.stores.base import MemoryFilter, MemoryStore

__all__ = ["AgentState", "AgentStateError", "AgentStateStore", "agent_state_id", "STATE_KEY", "CHECKPOINT_PREFIX"]

STATE_KEY = "state"
CHECKPOINT_PREFIX = "checkpoint:"
_ID_NAMESPACE = uuid.UUID("3c8e2f5a-7d41-5b9e-a06c-1f4d8b2e7a93")
_MAX_NAME = 100
_PAGE = 200
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


def agent_state_id(user_name: str, target_name: str, workspace: str, key: str) -> str:
    """The memory id of the state record `key` ("state", "checkpoint:NAME") of one user, target and workspace."""
    return uuid.uuid5(_ID_NAMESPACE, "\x1f".join(("agent_state", user_name, target_name, workspace, key))).hex


class AgentStateStore:
    """The saved state and checkpoints of one user's agent (and target, workspace), in `store`."""

    def __init__(self, store: MemoryStore, user: str, *, target_name: str = "", workspace: str = "") -> None:
        if not isinstance(user, str) or not user:
            raise MemoryScopeError("the agent's state needs the user's name")
        self.store = store
        self.user = user
        self.target_name = target_name
        self.workspace = workspace

    def load(self) -> AgentState:
        """The saved state; an empty one when none was saved."""
        node = self._get(STATE_KEY)
        return AgentState() if node is None else _state_of(node)

    def save(self, state: AgentState) -> None:
        """Replace the saved state with `state` (one write)."""
        self._put(STATE_KEY, state, {}, "agent_state")

    def save_checkpoint(self, name: str, state: AgentState, blocks: Mapping[str, str]) -> None:
        """Keep `state` and the core memory blocks' values as checkpoint `name` (replacing one of that name)."""
        name = _checkpoint_name(name)
        if not all(isinstance(key, str) and isinstance(value, str) for key, value in blocks.items()):
            raise AgentStateError(f"checkpoint {name!r}: the blocks must map block names to their text")
        self._put(CHECKPOINT_PREFIX + name, state, {"blocks": dict(blocks)}, "agent_checkpoint")

    def load_checkpoint(self, name: str) -> tuple[AgentState, dict[str, str]]:
        """The state and block values of checkpoint `name`; AgentStateError listing the saved ones when unknown."""
        name = _checkpoint_name(name)
        node = self._get(CHECKPOINT_PREFIX + name)
        if node is None:
            saved = [saved_name for saved_name, _ in self.checkpoints()]
            close = closest(name, saved)
            hint = f" Did you mean {close!r}?" if close else ""
            listed = ", ".join(saved) if saved else "none yet (save one first)"
            raise AgentStateError(f"no checkpoint {name!r}.{hint} Saved checkpoints: {listed}")
        blocks = node.meta.get("blocks", {})
        if not isinstance(blocks, dict) or not all(isinstance(value, str) for value in blocks.values()):
            raise AgentStateError(f"checkpoint {name!r} (memory {node.memory_id}): its blocks are not a map of texts")
        return _state_of(node), dict(blocks)

    def checkpoints(self) -> list[tuple[str, datetime]]:
        """`(name, when saved)` of every checkpoint, oldest first."""
        memory_filter = MemoryFilter(
            user_name=self.user,
            target_name=self.target_name,
            workspace=self.workspace,
            memory_types=(MemoryType.AGENT_STATE,),
        )
        found: list[tuple[str, datetime]] = []
        offset = 0
        while page := self.store.scan(memory_filter, limit=_PAGE, offset=offset, newest_first=False):
            found += [
                (node.key.removeprefix(CHECKPOINT_PREFIX), node.updated_at)
                for node in page
                if node.key.startswith(CHECKPOINT_PREFIX)
            ]
            offset += len(page)
            if len(page) < _PAGE:
                break
        return sorted(found, key=lambda pair: pair[1])

    # -- pieces -------------------------------------------------------------------------------------

    def _id(self, key: str) -> str:
        return agent_state_id(self.user, self.target_name, self.workspace, key)

    def _get(self, key: str) -> MemoryNode | None:
        found = self.store.get([self._id(key)])
        if not found:
            return None
        node = found[0]
        owner = (node.user_name, node.target_name, node.workspace, node.memory_type, node.key)
        if owner != (self.user, self.target_name, self.workspace, MemoryType.AGENT_STATE, key):
            # the id comes from the owner and the key: another memory under it was written by something else
            raise AgentStateError(
                f"memory {node.memory_id} should be the agent state {key!r} of user {self.user!r} but is a "
                f"{node.memory_type.value} memory {node.key!r} of user {node.user_name!r}; delete it to save the state again"
            )
        return node

    def _put(self, key: str, state: AgentState, extra: dict[str, Any], operation: str) -> None:
        if not isinstance(state, AgentState):
            raise AgentStateError(f"expected an AgentState, got {type(state).__name__}")
        data = state.to_dict()
        summary = data.pop("summary")
        # checked here: a bad queue is refused before it is saved, never found when loading
        AgentState.from_dict(data)
        now = utc_now()
        node = MemoryNode(
            user_name=self.user,
            target_name=self.target_name,
            workspace=self.workspace,
            memory_id=self._id(key),
            memory_type=MemoryType.AGENT_STATE,
            key=key,
            content=summary,
            status=MemoryStatus.VALID,
            created_at=now,
            updated_at=now,
            meta={"state": data, **extra},
        )
        zeros = np.zeros((1, int(self.store.dimension)), dtype=np.float32)
        self.store.upsert([node], vectors=zeros, change=ChangeSource(operation))


def _state_of(node: MemoryNode) -> AgentState:
    data = node.meta.get("state", {})
    if not isinstance(data, dict):
        raise AgentStateError(f"agent state {node.key!r} (memory {node.memory_id}): meta['state'] is not an object")
    try:
        state = AgentState.from_dict({**data, "summary": node.content})
    except AgentStateError as error:
        raise AgentStateError(f"agent state {node.key!r} (memory {node.memory_id}): {error}") from None
    if state.updated_at is None:
        state.updated_at = node.updated_at
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
