"""Core memory: named, size-limited text blocks per user, always in a MemGPT-style agent's prompt.

    core = CoreMemory(store, "ann", [BlockSpec("persona", 2000, "I am Sam."), BlockSpec("human", 2000)])
    core.append("human", "Ann plays the guitar.")
    core.replace("human", "guitar", "cello")
    core.render()            # '<persona characters="9/2000">\\nI am Sam.\\n</persona>\\n<human ...'
    core.history("human")    # every version, oldest first, with its time

Each block is one memory node in the store (`core_memory`; `key` the block's name, `content` its
text, `meta["limit"]` its limit), so blocks persist, move with an export and are isolated per
user, target and workspace like every memory. A block's id is derived from its owner and name:
the first use of a spec creates the node, later ones find it. Every edit is one upsert of that
node, and the store keeps each version in its history (`MemoryStore.history`), which is what
`history()` lists. Limits are checked before anything is written; a refused edit raises
`BlockError`, whose message is the tool result the model reads (it says what to do instead).

Block nodes are stored with a zero vector: nothing searches them (retrieval names the types it
reads), an edit costs no embedding call, and an empty block is no input for an embedding API
(remote ones refuse empty text). Reads always go to the store, so an edit made elsewhere (the
memory API, another process) shows in the next prompt. Every write is a compare-and-set on the
block as it was read (`MemoryStore.upsert(expected=...)`): when another process or another
`CoreMemory` changed the block meanwhile, the edit is applied again to what that one wrote, so
two agents editing one block never lose an edit (a `replace` whose text is gone by then is
refused, as it would be had it come second).
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from memoryscope.errors import MemoryScopeError, StoreConflict, closest
from memoryscope.history import ChangeSource
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType, utc_now
from memoryscope.stores.base import MemoryStore

__all__ = ["Block", "BlockChange", "BlockError", "BlockSpec", "CoreMemory", "block_id"]

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_ID_NAMESPACE = uuid.UUID("9a4f6c1e-2b7d-5e3a-8c0f-6d1b2a7e9c41")
# the versions history() lists at most: Elasticsearch's default `max_result_window` (one search)
_MAX_VERSIONS = 10_000
# A block edit is a compare-and-set; this many tries while other processes keep changing the block
_EDIT_ATTEMPTS = 8
_KEPT_CHANGING = "core memory block {names} kept changing under this edit (other agents write it); try again"


@dataclass(frozen=True)
class BlockSpec:
    """A block as configured: its name (also its tag in the prompt), its limit in characters and
    the text it starts with."""

    name: str
    limit: int
    initial: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"core memory block name {self.name!r}: use a letter, then letters, digits, '_' or '-' (64 at most)")
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1:
            raise ValueError(f"core memory block {self.name!r}: the limit must be a whole number of characters, 1 or more")
        if not isinstance(self.initial, str):
            raise ValueError(f"core memory block {self.name!r}: the initial value must be text")
        if len(self.initial) > self.limit:
            raise ValueError(
                f"core memory block {self.name!r}: the initial value has {len(self.initial):,} characters, "
                f"over the limit of {self.limit:,}"
            )


@dataclass(frozen=True)
class Block:
    """A block as stored now."""

    name: str
    value: str
    limit: int
    updated_at: datetime


@dataclass(frozen=True)
class BlockChange:
    """One version of a block: its text from `time` on."""

    time: datetime
    value: str


class BlockError(MemoryScopeError, ValueError):
    """An edit refused (unknown block, over the limit, text not found); the message is what the
    model reads back, so it says what to do."""


def block_id(user_name: str, target_name: str, workspace: str, name: str) -> str:
    """The memory id of block `name` of one user, target and workspace (the same in every store)."""
    return uuid.uuid5(_ID_NAMESPACE, "\x1f".join(("core_memory", user_name, target_name, workspace, name))).hex


class CoreMemory:
    """The core memory blocks of one user (and target, workspace), kept in `store`."""

    def __init__(
        self, store: MemoryStore, user: str, specs: Sequence[BlockSpec], *, target_name: str = "", workspace: str = ""
    ) -> None:
        if not isinstance(user, str) or not user:
            raise MemoryScopeError("core memory needs the user's name")
        if not specs:
            raise MemoryScopeError("core memory needs at least one block (e.g. persona and human)")
        names = [spec.name for spec in specs]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise MemoryScopeError(f"core memory blocks named twice: {', '.join(repeated)}")
        self.store = store
        self.user = user
        self.target_name = target_name
        self.workspace = workspace
        self._specs = {spec.name: spec for spec in specs}
        self._ids = {name: block_id(user, target_name, workspace, name) for name in self._specs}
        self._lock = threading.RLock()

    @property
    def specs(self) -> tuple[BlockSpec, ...]:
        return tuple(self._specs.values())

    # -- reading ------------------------------------------------------------------------------------

    def blocks(self) -> dict[str, Block]:
        """Every block, in spec order; blocks not stored yet are created from their specs first."""
        with self._lock:
            return {name: self._block(name, node) for name, node in self._nodes().items()}

    def get(self, name: str) -> Block:
        """Block `name`; BlockError naming the known blocks when there is none."""
        self._spec(name)
        return self.blocks()[name]

    def history(self, name: str) -> list[BlockChange]:
        """Every version of block `name` the store's history holds, oldest first (the first
        10,000). Deleting the block's memory (e.g. `delete_all`) takes the versions before it out
        of the history, as for every memory (unless the store keeps deleted content)."""
        self._spec(name)
        changes = self.store.history(memory_id=self._ids[name], limit=_MAX_VERSIONS)
        # by time: an import records its own write before the history it brings; a change that
        # left the text as it was (the limit, an import) is no new version
        versions: list[BlockChange] = []
        for change in sorted(changes, key=lambda change: (change.at, change.seq)):
            value = None if change.after is None else change.after.get("content")
            if isinstance(value, str) and (not versions or versions[-1].value != value):
                versions.append(BlockChange(change.at, value))
        return versions

    def render(self) -> str:
        """The blocks as they go into the system prompt, in spec order:

        <persona characters="9/2000">
        I am Sam.
        </persona>
        """
        parts = []
        for block in self.blocks().values():
            body = f"{block.value}\n" if block.value else ""
            parts.append(f'<{block.name} characters="{len(block.value)}/{block.limit}">\n{body}</{block.name}>')
        return "\n".join(parts)

    # -- editing ------------------------------------------------------------------------------------

    def append(self, name: str, content: str) -> Block:
        """Add `content` to block `name` on a new line (MemGPT's `core_memory_append`)."""
        if not isinstance(content, str) or not content.strip():
            raise BlockError(f'nothing to append to core memory block "{name}": give the text to add')
        return self._edit(name, lambda text: f"{text}\n{content}" if text else content, "core_memory_append")

    def replace(self, name: str, old_content: str, new_content: str) -> Block:
        """Replace every occurrence of `old_content` in block `name` with `new_content`
        (MemGPT's `core_memory_replace`). An empty `new_content` deletes the text; a line that
        held only that text goes with its line break."""
        if not isinstance(old_content, str) or not old_content:
            raise BlockError(f'core memory block "{name}": say which text to replace (old_content is empty)')
        if not isinstance(new_content, str):
            raise BlockError(f'core memory block "{name}": new_content must be text ("" deletes old_content)')

        def replaced(value: str) -> str:
            if old_content not in value:
                raise BlockError(
                    f'core memory block "{name}" does not contain {_quoted(old_content)}: '
                    "copy the text to replace exactly as the block shows it"
                )
            if not new_content and "\n" not in old_content:
                value = "\n".join(line for line in value.split("\n") if line != old_content)
            return value.replace(old_content, new_content)

        return self._edit(name, replaced, "core_memory_replace")

    def set(self, name: str, value: str) -> Block:
        """Make `value` the whole text of block `name` (restoring a checkpoint, rewriting a block)."""
        if not isinstance(value, str):
            raise BlockError(f'core memory block "{name}": the value must be text')
        return self._edit(name, lambda _: value, "core_memory_set")

    def set_many(self, values: Mapping[str, str]) -> dict[str, Block]:
        """Set several blocks in one write (all or none): every value is checked first. Names that
        are not blocks here are a BlockError, as are values over their limits."""
        unknown = [name for name in values if name not in self._specs]
        if unknown:
            self._spec(unknown[0])
        for name, value in values.items():
            if not isinstance(value, str):
                raise BlockError(f'core memory block "{name}": the value must be text')
        with self._lock:
            for _ in range(_EDIT_ATTEMPTS):
                nodes = self._nodes()
                changed: dict[str, MemoryNode] = {}
                for name, value in values.items():
                    self._check(name, nodes[name].content, value)
                    if value != nodes[name].content:
                        changed[name] = self._changed(name, nodes[name], value)
                try:
                    self._upsert(list(changed.values()), "core_memory_set", read=nodes)
                except StoreConflict:
                    continue  # another process changed a block meanwhile: set them over what it wrote
                return {name: self._block(name, changed.get(name, node)) for name, node in nodes.items()}
        raise BlockError(_KEPT_CHANGING.format(names=", ".join(f'"{name}"' for name in values)))

    # -- pieces -------------------------------------------------------------------------------------

    def _spec(self, name: str) -> BlockSpec:
        spec = self._specs.get(name) if isinstance(name, str) else None
        if spec is None:
            known = ", ".join(f'"{known}"' for known in self._specs)
            close = closest(name, list(self._specs)) if isinstance(name, str) else None
            hint = f' Did you mean "{close}"?' if close else ""
            raise BlockError(f"there is no core memory block {_quoted(str(name))}.{hint} The blocks are: {known}")
        return spec

    def _node(self, name: str) -> MemoryNode:
        self._spec(name)
        return self._nodes()[name]

    def _nodes(self) -> dict[str, MemoryNode]:
        """The stored node of every block, by name in spec order; missing ones created (one write)."""
        found = {node.memory_id: node for node in self.store.get(list(self._ids.values()))}
        nodes: dict[str, MemoryNode] = {}
        missing: list[MemoryNode] = []
        for name, memory_id in self._ids.items():
            node = found.get(memory_id)
            if node is not None:
                self._check_owner(node)
                nodes[name] = node
            else:
                missing.append(self._new_node(self._specs[name]))
                nodes[name] = missing[-1]
        if missing:
            try:
                self.store.upsert(
                    missing, vectors=np.zeros((len(missing), int(self.store.dimension)), dtype=np.float32),
                    change=ChangeSource("core_memory_create"), expected=dict.fromkeys(node.memory_id for node in missing),
                )  # fmt: skip
            except StoreConflict:
                return self._nodes()  # another process made them meanwhile: take what it wrote
        return nodes

    def _check_owner(self, node: MemoryNode) -> None:
        owner = (node.user_name, node.target_name, node.workspace, node.memory_type)
        if owner != (self.user, self.target_name, self.workspace, MemoryType.CORE_MEMORY):
            # a block's id comes from its owner: another memory under it was written by something else
            raise MemoryScopeError(
                f"memory {node.memory_id} should be core memory block {node.key!r} of user {self.user!r} "
                f"but is a {node.memory_type.value} memory of user {node.user_name!r}; delete it to let the block be made"
            )

    def _new_node(self, spec: BlockSpec) -> MemoryNode:
        now = utc_now()
        return MemoryNode(
            user_name=self.user,
            target_name=self.target_name,
            workspace=self.workspace,
            memory_id=self._ids[spec.name],
            memory_type=MemoryType.CORE_MEMORY,
            key=spec.name,
            content=spec.initial,
            status=MemoryStatus.VALID,
            created_at=now,
            updated_at=now,
            meta={"limit": spec.limit},
        )

    def _edit(self, name: str, edit: Callable[[str], str], operation: str) -> Block:
        """Apply `edit` to block `name`'s text and write it, as a compare-and-set: if another
        process changed the block since it was read, read it again and apply the edit to that, so
        neither edit is lost."""
        with self._lock:
            for _ in range(_EDIT_ATTEMPTS):
                node = self._node(name)
                value = edit(node.content)
                self._check(name, node.content, value)
                if value == node.content:
                    return self._block(name, node)
                changed = self._changed(name, node, value)
                try:
                    self._upsert([changed], operation, read={name: node})
                except StoreConflict:
                    continue
                return self._block(name, changed)
        raise BlockError(_KEPT_CHANGING.format(names=f'"{name}"'))

    def _check(self, name: str, old: str, new: str) -> None:
        limit = self._specs[name].limit
        # a block over its limit (the limit was lowered since) may still be shortened
        if len(new) > limit and len(new) >= len(old):
            raise BlockError(
                f'core memory block "{name}" would hold {len(new):,} characters, over its limit of {limit:,}: '
                "replace or shorten something first"
            )

    def _changed(self, name: str, node: MemoryNode, value: str) -> MemoryNode:
        limit = self._specs[name].limit
        return node.replace(key=name, content=value, updated_at=utc_now(), meta={**node.meta, "limit": limit})

    def _upsert(self, nodes: list[MemoryNode], operation: str, read: Mapping[str, MemoryNode] | None = None) -> None:
        """Write `nodes` with zero vectors; with `read`, only over the blocks as they were read
        (`StoreConflict` when one changed since)."""
        if nodes:
            zeros = np.zeros((len(nodes), int(self.store.dimension)), dtype=np.float32)
            expected = None if read is None else {node.memory_id: node.updated_at for node in read.values()}
            self.store.upsert(nodes, vectors=zeros, change=ChangeSource(operation), expected=expected)

    def _block(self, name: str, node: MemoryNode) -> Block:
        return Block(name, node.content, self._specs[name].limit, node.updated_at)


def _quoted(text: str) -> str:
    shown = text if len(text) <= 80 else text[:77] + "..."
    return '"' + shown.replace("\n", "\\n") + '"'
