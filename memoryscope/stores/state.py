"""State records: the small things kept beside the memories, such as a MemGPT-style agent's core
memory blocks, its message queue and summary, and its checkpoints.

A state record is not a memory: it has no vector, nothing searches it, and memory listings
never show it. It is a JSON object under a `StateKey`: its owner (user, target, workspace), its
kind (`core_block`, `agent_state`, `agent_checkpoint`, or any kind a capability names) and its
name within the kind. Every write of a record gives it the next version (1, 2, ...). A write may
say which version it read (`expected`), so it is a compare-and-set: when another process wrote
the record meanwhile, nothing is written and `StoreConflict` says so. A write of several records
lands whole or not at all (Elasticsearch: each record is guarded, see its store).

A `versioned` write also keeps the version it replaces, so the record's history stays readable
(`MemoryStore.state_versions`): core memory blocks are written so. Other kinds keep only the
latest version (an agent saves its queue every step; its checkpoints are the way back).

Each store keeps state records apart from its memories: SQLite in the table `state_records` of
the same file, Elasticsearch in the index `<index_name>-state`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memoryscope.errors import StoreError

__all__ = [
    "StateKey",
    "StateOwner",
    "StateRecord",
    "CORE_BLOCK",
    "AGENT_STATE",
    "AGENT_CHECKPOINT",
    "checked_state_value",
    "state_value_json",
]

# The kinds MemoryScope itself writes (`memoryscope.agent`): a core memory block (value
# {"text", "limit"}), the agent's live state ({"summary", "queue", "counters", ...}) and a
# checkpoint ({"state": {...}, "blocks": {name: text}}).
CORE_BLOCK = "core_block"
AGENT_STATE = "agent_state"
AGENT_CHECKPOINT = "agent_checkpoint"

_MAX_PART = 512  # characters of a kind or a name


@dataclass(frozen=True)
class StateOwner:
    """Whose a state record is: a user, and the target and workspace the user's memories have."""

    user_name: str
    target_name: str = ""
    workspace: str = ""


@dataclass(frozen=True)
class StateKey:
    """One state record's place: its owner, its kind and its name within the kind."""

    owner: StateOwner
    kind: str
    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.owner, StateOwner) or not isinstance(self.owner.user_name, str) or not self.owner.user_name:
            raise StoreError("a state record needs its owner's user name")
        for part, value in (("target_name", self.owner.target_name), ("workspace", self.owner.workspace)):
            if not isinstance(value, str):
                raise StoreError(f"a state record's {part} must be text, got {type(value).__name__}")
        for part, value in (("kind", self.kind), ("name", self.name)):
            if not isinstance(value, str) or not value or len(value) > _MAX_PART:
                raise StoreError(f"a state record's {part} must be text of 1 to {_MAX_PART} characters, got {value!r:.60}")

    def parts(self) -> tuple[str, str, str, str, str]:
        """`(user_name, target_name, workspace, kind, name)`."""
        return (self.owner.user_name, self.owner.target_name, self.owner.workspace, self.kind, self.name)


@dataclass(frozen=True)
class StateRecord:
    """One version of a state record, as stored."""

    key: StateKey
    value: dict[str, Any]
    version: int
    updated_at: datetime
    operation: str = ""  # what wrote it (`core_memory_append`, `import`, ...)
    run_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for an export."""
        user_name, target_name, workspace, kind, name = self.key.parts()
        return {
            "user_name": user_name,
            "target_name": target_name,
            "workspace": workspace,
            "kind": kind,
            "name": name,
            "version": self.version,
            "updated_at": self.updated_at.isoformat(),
            "operation": self.operation,
            "run_id": self.run_id,
            "value": self.value,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StateRecord:
        """Inverse of `to_dict`; ValueError naming what is wrong."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a state record must be an object, got {type(data).__name__}")
        texts = ("user_name", "target_name", "workspace", "kind", "name", "updated_at")
        wrong = [name for name in texts if not isinstance(data.get(name, ""), str)]
        if wrong:
            raise ValueError(f"a state record's {', '.join(wrong)} must be text")
        version = data.get("version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValueError(f"a state record's version must be a whole number from 1, got {version!r}")
        updated_at = datetime.fromisoformat(str(data.get("updated_at", "")))
        if updated_at.tzinfo is None:
            raise ValueError("a state record's updated_at must carry its time zone")
        try:
            owner = StateOwner(str(data.get("user_name", "")), str(data.get("target_name", "")), str(data.get("workspace", "")))
            key = StateKey(owner, str(data.get("kind", "")), str(data.get("name", "")))
            value = checked_state_value(data.get("value"), key)
        except StoreError as error:
            raise ValueError(str(error)) from None
        return cls(key, value, version, updated_at, str(data.get("operation", "")), str(data.get("run_id", "")))


def checked_state_value(value: Any, key: StateKey) -> dict[str, Any]:
    """`value` when it is a JSON object that reads back as it was written (finite numbers, text
    keys, no lone surrogates); StoreError naming the record otherwise."""
    state_value_json(value, key)
    return dict(value)


def state_value_json(value: Any, key: StateKey) -> str:
    """`value` as JSON text; StoreError naming the record when it cannot be stored as JSON."""
    where = f"state record {key.kind} {key.name!r} of user {key.owner.user_name!r}"
    if not isinstance(value, Mapping):
        raise StoreError(f"{where}: the value must be a JSON object, got {type(value).__name__}")
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        text.encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError) as error:
        raise StoreError(f"{where}: the value cannot be stored as JSON ({error})") from None
    return text
