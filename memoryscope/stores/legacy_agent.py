"""Agent state kept as memories by MemoryScope before state records: moved on first use.

Before, each core memory block was a `core_memory` memory and the agent's state and checkpoints
were `agent_state` memories (zero vectors, JSON in `meta`). A store written so is migrated owner
by owner, the first time this process uses an owner's agent state (`migrate_owner`): each such
memory becomes a state record (a block keeps every version its memory's history holds, with
their times and runs), then the memory is deleted. Any store, any process: a record written by
another process's migration meanwhile is simply written again with the same versions.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from typing import Any

from memoryscope.history import ChangeSource
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.stores.base import MemoryFilter, MemoryStore
from memoryscope.stores.state import AGENT_CHECKPOINT, AGENT_STATE, CORE_BLOCK, StateKey, StateOwner, StateRecord

__all__ = ["migrate_owner", "legacy_block_id", "legacy_state_id"]

_BLOCK_NAMESPACE = uuid.UUID("9a4f6c1e-2b7d-5e3a-8c0f-6d1b2a7e9c41")
_STATE_NAMESPACE = uuid.UUID("3c8e2f5a-7d41-5b9e-a06c-1f4d8b2e7a93")
_CHECKPOINT_PREFIX = "checkpoint:"
_PAGE = 500
_MAX_VERSIONS = 10_000
_MIGRATION = ChangeSource("migrate_agent_state")

_done: weakref.WeakKeyDictionary[MemoryStore, set[StateOwner]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def legacy_block_id(owner: StateOwner, name: str) -> str:
    """The memory id block `name` had as a `core_memory` memory."""
    parts = ("core_memory", owner.user_name, owner.target_name, owner.workspace, name)
    return uuid.uuid5(_BLOCK_NAMESPACE, "\x1f".join(parts)).hex


def legacy_state_id(owner: StateOwner, key: str) -> str:
    """The memory id of the `agent_state` memory `key` ("state", "checkpoint:NAME")."""
    parts = ("agent_state", owner.user_name, owner.target_name, owner.workspace, key)
    return uuid.uuid5(_STATE_NAMESPACE, "\x1f".join(parts)).hex


def migrate_owner(store: MemoryStore, owner: StateOwner) -> int:
    """Move the owner's agent memories into state records (once per store and owner in a process);
    returns how many memories moved."""
    with _lock:
        if owner in _done.setdefault(store, set()):
            return 0
    legacy_filter = MemoryFilter(
        owner.user_name,
        target_name=owner.target_name,
        workspace=owner.workspace,
        memory_types=(MemoryType.CORE_MEMORY, MemoryType.AGENT_STATE),
    )
    moved = 0
    while nodes := store.scan(legacy_filter, limit=_PAGE, newest_first=False):
        records = [record for node in nodes for record in _records_of(store, node)]
        store.import_state(records)
        moved += store.delete([node.memory_id for node in nodes], change=_MIGRATION)
        if len(nodes) < _PAGE:
            break
    with _lock:
        _done.setdefault(store, set()).add(owner)
    return moved


def _records_of(store: MemoryStore, node: MemoryNode) -> list[StateRecord]:
    owner = StateOwner(node.user_name, node.target_name, node.workspace)
    source = (node.updated_at, "migrate_agent_state", "")
    if node.memory_type is MemoryType.CORE_MEMORY:
        limit = node.meta.get("limit")
        key = StateKey(owner, CORE_BLOCK, node.key)
        versions = _block_versions(store, node)
        return [
            StateRecord(key, {"text": text, "limit": limit}, number, at, operation, run_id)
            for number, (text, at, operation, run_id) in enumerate(versions, start=1)
        ]
    state: dict[str, Any] = dict(node.meta.get("state") or {})
    state["summary"] = node.content
    if node.key.startswith(_CHECKPOINT_PREFIX):
        key = StateKey(owner, AGENT_CHECKPOINT, node.key.removeprefix(_CHECKPOINT_PREFIX))
        return [StateRecord(key, {"state": state, "blocks": node.meta.get("blocks", {})}, 1, *source)]
    return [StateRecord(StateKey(owner, AGENT_STATE, node.key), state, 1, *source)]


def _block_versions(store: MemoryStore, node: MemoryNode) -> list[tuple[str, Any, str, str]]:
    """`(text, time, operation, run id)` of each version the memory's history holds, ending with
    the memory as it is."""
    versions: list[tuple[str, Any, str, str]] = []
    changes = store.history(memory_id=node.memory_id, limit=_MAX_VERSIONS)
    for change in sorted(changes, key=lambda change: (change.at, change.seq)):
        text = None if change.after is None else change.after.get("content")
        if isinstance(text, str) and (not versions or versions[-1][0] != text):
            versions.append((text, change.at, change.operation, change.run_id))
    if not versions or versions[-1][0] != node.content:
        versions.append((node.content, node.updated_at, "migrate_agent_state", ""))
    return versions
