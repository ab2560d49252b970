"""The simple memory API on `MemoryScope`: the verbs users of other memory libraries know.

    ms.add("I moved to Hangzhou last week", user_id="lin")       # kept; consolidation extracts facts
    ms.add([{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}], user_id="lin")
    ms.add("prefers tea", user_id="lin", infer=False, metadata={"source": "crm"})  # stored as given
    hits = ms.search("where does Lin live?", user_id="lin", top_k=5, filters={"source": "crm"})
    hits[0].id, hits[0].memory, hits[0].score, hits[0].text    # text: "[2024-10-26 21:26:20 Sat] ..."
    ms.get(memory_id); ms.get_all(user_id="lin", filters={"rating": {"gte": 3}})
    ms.update(memory_id, text="prefers green tea", metadata={"rating": 5})   # re-embedded
    ms.pin(memory_id); ms.undo(run_id); ms.profile("lin"); ms.status("lin"); ms.export("lin.jsonl", user_id="lin")
    ms.delete(memory_id); ms.delete_all(user_id="lin"); ms.history(memory_id)

A face over `memoryscope.door`: each method makes the caller and calls the verb of its name, so
sizes, ownership, history and run ids are the same here as over the CLI, REST and MCP. A method
given `user_id` works on that user's memories only (another user's memory id is not found);
without it, methods by memory id reach any user's memory (this process owns the store) and the
others work on the service's `human_name`.

`infer=True` stores the messages as the conversation (the configured `read_message` operation),
and consolidation draws observations from them in the background, as a chat's messages;
`infer=False` stores each text as one memory of the user's own (`obs_customized`, the
`add_memory` operation), no LLM involved. `search` runs the configured retrieval
(`retrieve_memory`: the same search, ranking and time handling a chat gets), narrowed by
`filters` (see `memoryscope.stores.metadata`), `types` and `time_range`. Metadata lives in the
memory's `meta`; the keys MemoryScope itself keeps there (`role`, `speaker`, `context`, `reply`,
`pinned`, `consolidation_*`) cannot be set. Observations drawn from messages carry the messages'
metadata, so a filter finds what was learnt from them too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memoryscope.door import (
    BlockRecord,
    Caller,
    MemoryNotFoundError,
    MemoryRecord,
    MessagesIn,
    Profile,
    Status,
    Tiers,
    TimeRange,
    UndoOutcome,
)
from memoryscope.history import MemoryChange
from memoryscope.memory import MemoryType

if TYPE_CHECKING:
    from memoryscope.door import Door

__all__ = ["MemoryApi", "MemoryRecord", "MemoryNotFoundError"]


class MemoryApi:
    """The simple verbs, mixed into `MemoryScope` (which provides `door`)."""

    if TYPE_CHECKING:

        @property
        def door(self) -> Door: ...

    # -- writing -----------------------------------------------------------------------------

    def add(
        self,
        messages: MessagesIn,
        user_id: str | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        infer: bool = True,
        time: datetime | str | None = None,
        target_name: str = "",
        workspace: str = "",
    ) -> list[MemoryRecord]:
        """Remember `messages`: a text, a message (`{"role", "content"}`, optionally `"time"` and
        `"name"`, or a `Message`) or a list of them, for `user_id` (default: the service's
        `human_name`). `time` is when they were said: a datetime or ISO 8601 text
        (`"2024-10-01T10:00:00+08:00"`; without a zone, the config's), default now; a message's
        own time wins.

        `infer=True`: kept as the conversation (user and assistant messages alike), and
        consolidation extracts what matters about the user from them (right away when enough
        messages wait, as configured). `infer=False`: each text is stored as one memory, as given.
        `metadata` is kept with every memory stored (filter on it in `search` and `get_all`).
        Returns the memories stored (a message already stored is not stored again)."""
        caller = self._caller(user_id, workspace, target_name)
        return self.door.add(caller, messages, metadata=metadata, infer=infer, time=time)

    def update(
        self, memory_id: str, text: str | None = None, *, metadata: Mapping[str, Any] | None = None, user_id: str | None = None
    ) -> MemoryRecord:
        """Change a memory's text (it is embedded again) and/or metadata: the keys given are set,
        a key given as None is removed, the others are kept. Kept in its history."""
        return self.door.update(self._caller(user_id, None), memory_id, text, metadata=metadata)

    def delete(self, memory_id: str, *, user_id: str | None = None) -> bool:
        """Delete one memory; False when no memory (of `user_id`, when given) has that id."""
        return self.door.delete(self._caller(user_id, None), [memory_id]).deleted_count > 0

    def delete_all(self, user_id: str | None = None, *, target_name: str = "", workspace: str = "") -> int:
        """Delete every memory of `user_id` (in that target and workspace), an agent's core memory
        and saved state included; returns how many. The user must be named."""
        return self.door.delete_all(self._caller(user_id, workspace, target_name)).deleted_count

    def pin(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        """Keep a memory from being expired or rewritten by consolidation and reflection."""
        return self.door.pin(self._caller(user_id, None), memory_id)

    def unpin(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        """Let consolidation and reflection change a pinned memory again."""
        return self.door.pin(self._caller(user_id, None), memory_id, pinned=False)

    def undo(self, run_id: str, *, user_id: str | None = None) -> UndoOutcome:
        """Take back what one run changed (every change names its run: `history`)."""
        return self.door.undo(self._caller(user_id, None), run_id)

    # -- reading -----------------------------------------------------------------------------

    def search(
        self,
        query: str,
        user_id: str | None = None,
        *,
        top_k: int = 10,
        filters: Mapping[str, Any] | None = None,
        types: Sequence[MemoryType | str] | None = None,
        time_range: TimeRange | tuple[datetime | None, datetime | None] | None = None,
        query_time: datetime | str | None = None,
        target_name: str = "",
        workspace: str = "",
        threshold: float | None = None,
    ) -> list[MemoryRecord]:
        """The `top_k` memories of `user_id` that best answer `query`, best first, with scores
        (0 to 1, higher is better); with `threshold`, only those scoring at least that.

        `filters` on metadata (`{"source": "crm", "rating": {"gte": 3}}`), `types` of memory
        (`observation`, `insight`, `conversation`, `obs_customized`; an agent's `core_memory` and
        `agent_state` are never retrieved, `get_all` lists them; under the `memoryos` config the
        search is MemoryOS's pack of `memoryos_*` records, narrowed by `types` only), `time_range` a
        `TimeRange` or `(start, end)` on when each memory was said (`message_time`; either end
        may be None; a time without a zone is in the config's). `query_time` is when the question
        is asked ("last week" is relative to it)."""
        return self.door.search(
            self._caller(user_id, workspace, target_name), query, top_k=top_k, filters=filters, types=types,
            time_range_given=time_range, query_time=query_time, threshold=threshold,
        )  # fmt: skip

    def get(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord | None:
        """The memory with this id (of `user_id`, when given), or None."""
        return self.door.get(self._caller(user_id, None), memory_id)

    def get_all(
        self,
        user_id: str | None = None,
        *,
        filters: Mapping[str, Any] | None = None,
        types: Sequence[MemoryType | str] | None = None,
        include_expired: bool = False,
        limit: int | None = None,
        target_name: str = "",
        workspace: str = "",
    ) -> list[MemoryRecord]:
        """`user_id`'s memories, newest first: all of them, or the first `limit`; only those whose
        metadata passes `filters` and of `types`, when given. Expired memories (replaced by newer
        ones) only with `include_expired`. Without `types`, an agent's core memory blocks and
        MemoryOS's records (`memoryos_page`, `memoryos_segment`, `memoryos_profile`,
        `memoryos_knowledge`) are listed and an agent's saved state (`agent_state`) is not: ask
        for that type to see it."""
        return self.door.get_all(
            self._caller(user_id, workspace, target_name), filters=filters, types=types,
            include_expired=include_expired, limit=limit,
        )  # fmt: skip

    def history(self, memory_id: str, *, user_id: str | None = None) -> list[MemoryChange]:
        """Every change to one memory, oldest first: added, updated, expired, deleted, by what
        operation and run (`undo(run_id)` takes a run back). Unknown ids give an empty list."""
        try:
            return self.door.history(self._caller(user_id, None), memory_id)
        except MemoryNotFoundError:
            return []

    def profile(self, user_id: str | None = None, *, target_name: str = "", workspace: str = "") -> Profile:
        """What is known about the user, by the config's memory policy (insights, MemoryOS's
        profile, or an agent's `human` block)."""
        return self.door.profile(self._caller(user_id, workspace, target_name))

    def tiers(self, user_id: str | None = None, *, target_name: str = "", workspace: str = "") -> Tiers:
        """The user's memories by the policy's tiers: under MemoryOS, the short-term pages, the
        mid-term segments with their heat, the long-term profile and knowledge (else empty)."""
        return self.door.tiers(self._caller(user_id, workspace, target_name))

    def blocks(self, user_id: str | None = None, *, target_name: str = "") -> list[BlockRecord]:
        """The core memory blocks of the user's agent (an agent config), in the config's order."""
        return self.door.blocks(self._caller(user_id, "", target_name))

    def set_block(self, name: str, value: str, user_id: str | None = None, *, target_name: str = "") -> BlockRecord:
        """Make `value` the whole text of the agent's block `name` (within its limit, as the agent's tools)."""
        return self.door.set_block(self._caller(user_id, "", target_name), name, value)

    def status(self, user_id: str | None = None, *, target_name: str = "", workspace: str = "") -> Status:
        """What waits for the user's background operations, and the runs that changed their memories."""
        return self.door.status(self._caller(user_id, workspace, target_name))

    def export(self, out: str | Path | IO[str], user_id: str | None = None, *, workspace: str = "") -> int:
        """Write the user's memories and their history as JSON lines (`import_memories` reads them back)."""
        return self.door.export(self._caller(user_id, workspace), out)

    def import_memories(self, source: str | Path | IO[str]) -> int:
        """Read memories (and their history) from JSON lines written by `export`."""
        return self.door.import_memories(self._caller(None, ""), source)  # type: ignore[arg-type]  # any text stream

    # -- pieces ------------------------------------------------------------------------------

    def _caller(self, user_id: str | None, workspace: str | None, target: str = "") -> Caller:
        """This process's caller: `user_id` when given (then only their memories), else the
        default user (and, by memory id, any user's memory)."""
        return self.door.caller(user_id, workspace=workspace, target=target)
