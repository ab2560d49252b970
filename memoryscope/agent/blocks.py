"""Core memory: named, size-limited text blocks per user, always in a MemGPT-style agent's prompt.

    core = CoreMemory(store, "ann", [BlockSpec("persona", 2000, "I am Sam."), BlockSpec("human", 2000)])
    core.append("human", "Ann plays the guitar.")
    core.replace("human", "guitar", "cello")
    core.render()            # '<persona characters="9/2000">\\nI am Sam.\\n</persona>\\n<human ...'
    core.history("human")    # every version, oldest first, with its time

Each block is one state record of the store (`memoryscope.stores.state`: kind `core_block`, named
for the block, value `{"text", "limit"}`), beside the memories and not one of them: no vector,
never searched or listed, isolated per user, target and workspace, and moved by an export. The
first use of a spec creates the record; later ones find it. Every edit writes the next version
and keeps the one before (`versioned`), which is what `history()` lists. Limits are checked
before anything is written; a refused edit raises `BlockError`, whose message is the tool result
the model reads (it says what to do instead).

Reads always go to the store, so an edit made elsewhere (another process, the playground) shows
in the next prompt. Every write is a compare-and-set on the version read: when another process
or another `CoreMemory` changed the block meanwhile, the edit is applied again to what that one
wrote, so two agents editing one block never lose an edit (a `replace` whose text is gone by then
is refused, as it would be had it come second). Blocks kept as `core_memory` memories by an
older MemoryScope move here on first use (`memoryscope.stores.legacy_agent`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memoryscope.errors import MemoryScopeError, StoreConflict, closest
from memoryscope.history import ChangeSource
from memoryscope.stores.base import MemoryStore
from memoryscope.stores.legacy_agent import migrate_owner
from memoryscope.stores.state import CORE_BLOCK, StateKey, StateOwner, StateRecord

__all__ = ["Block", "BlockChange", "BlockError", "BlockSpec", "CoreMemory", "block_key"]

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
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


def block_key(user_name: str, target_name: str, workspace: str, name: str) -> StateKey:
    """The state record of block `name` of one user, target and workspace."""
    return StateKey(StateOwner(user_name, target_name, workspace), CORE_BLOCK, name)


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
        self._keys = {name: block_key(user, target_name, workspace, name) for name in self._specs}
        self._lock = threading.RLock()

    @property
    def specs(self) -> tuple[BlockSpec, ...]:
        return tuple(self._specs.values())

    # -- reading ------------------------------------------------------------------------------------

    def blocks(self) -> dict[str, Block]:
        """Every block, in spec order; blocks not stored yet are created from their specs first."""
        with self._lock:
            return {name: self._block(name, record) for name, record in self._records().items()}

    def get(self, name: str) -> Block:
        """Block `name`; BlockError naming the known blocks when there is none."""
        self._spec(name)
        return self.blocks()[name]

    def history(self, name: str) -> list[BlockChange]:
        """Every version of block `name`, oldest first (the last 10,000)."""
        self._spec(name)
        self._records()  # a block never used yet is made (and an older store's block moved) first
        versions: list[BlockChange] = []
        for record in self.store.state_versions(self._keys[name], limit=_MAX_VERSIONS):
            value = _text_of(record)
            if not versions or versions[-1].value != value:  # a new limit alone is no new version
                versions.append(BlockChange(record.updated_at, value))
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
                records = self._records()
                changed = {}
                for name, value in values.items():
                    self._check(name, _text_of(records[name]), value)
                    if value != _text_of(records[name]):
                        changed[name] = value
                try:
                    written = self._write(changed, records, "core_memory_set")
                except StoreConflict:
                    continue  # another process changed a block meanwhile: set them over what it wrote
                return {name: self._block(name, written.get(name, record)) for name, record in records.items()}
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

    def _records(self) -> dict[str, StateRecord]:
        """The stored record of every block, by name in spec order; missing ones created (one write)."""
        migrate_owner(self.store, StateOwner(self.user, self.target_name, self.workspace))
        found = {record.key.name: record for record in self.store.read_state(list(self._keys.values()))}
        missing = {self._keys[name]: self._value(name, spec.initial) for name, spec in self._specs.items() if name not in found}
        if missing:
            try:
                created = self.store.write_state(
                    missing, expected=dict.fromkeys(missing, 0), versioned=True, change=ChangeSource("core_memory_create")
                )
            except StoreConflict:
                return self._records()  # another process made them meanwhile: take what it wrote
            found.update((record.key.name, record) for record in created)
        return {name: found[name] for name in self._specs}

    def _edit(self, name: str, edit: Callable[[str], str], operation: str) -> Block:
        """Apply `edit` to block `name`'s text and write it, as a compare-and-set: if another
        process changed the block since it was read, read it again and apply the edit to that, so
        neither edit is lost."""
        self._spec(name)
        with self._lock:
            for _ in range(_EDIT_ATTEMPTS):
                records = self._records()
                old = _text_of(records[name])
                value = edit(old)
                self._check(name, old, value)
                if value == old:
                    return self._block(name, records[name])
                try:
                    written = self._write({name: value}, records, operation)
                except StoreConflict:
                    continue
                return self._block(name, written[name])
        raise BlockError(_KEPT_CHANGING.format(names=f'"{name}"'))

    def _check(self, name: str, old: str, new: str) -> None:
        limit = self._specs[name].limit
        # a block over its limit (the limit was lowered since) may still be shortened
        if len(new) > limit and len(new) >= len(old):
            raise BlockError(
                f'core memory block "{name}" would hold {len(new):,} characters, over its limit of {limit:,}: '
                "replace or shorten something first"
            )

    def _value(self, name: str, text: str) -> dict[str, Any]:
        return {"text": text, "limit": self._specs[name].limit}

    def _write(self, texts: Mapping[str, str], read: Mapping[str, StateRecord], operation: str) -> dict[str, StateRecord]:
        """Write the blocks of `texts` over the versions in `read` (`StoreConflict` when one changed since)."""
        if not texts:
            return {}
        values = {self._keys[name]: self._value(name, text) for name, text in texts.items()}
        expected = {self._keys[name]: read[name].version for name in texts}
        written = self.store.write_state(values, expected=expected, versioned=True, change=ChangeSource(operation))
        return {record.key.name: record for record in written}

    def _block(self, name: str, record: StateRecord) -> Block:
        return Block(name, _text_of(record), self._specs[name].limit, record.updated_at)


def _text_of(record: StateRecord) -> str:
    text = record.value.get("text")
    return text if isinstance(text, str) else ""


def _quoted(text: str) -> str:
    shown = text if len(text) <= 80 else text[:77] + "..."
    return '"' + shown.replace("\n", "\\n") + '"'
