"""What each MCP tool does: a face over `memoryscope.door`, for a user decided by the server
(never by the model).

The functions here are plain and synchronous; `memoryscope.mcp.server` registers them with the SDK,
which runs them off the event loop. Each raises `MemoryScopeError` with a message written for the
model that called it; the server turns it into an MCP tool error (its kind from the door's table).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memoryscope.door import Caller, Door, MemoryRecord, parse_time
from memoryscope.errors import InvalidInputError, NotFoundError

if TYPE_CHECKING:
    from memoryscope.app import MemoryScope

__all__ = ["McpToolHandlers"]

CONSOLIDATE_OPERATION = "consolidate_memory"


class McpToolHandlers:
    """The six tools of the MemoryScope MCP server, on one door; `user` is passed by the server."""

    def __init__(self, door: Door | MemoryScope, workspace: str = "", target: str = "") -> None:
        self.door = door if isinstance(door, Door) else door.door  # a MemoryScope: its verbs
        self.workspace = workspace
        self.target = target  # the assistant the memories are kept for (MemoryOS's assistant_id); "" for none

    def _caller(self, user: str) -> Caller:
        return self.door.caller(
            user, target=self.target, workspace=self.workspace, local=False, scopes=frozenset(("read", "write"))
        )

    def add_memory(self, user: str, user_input: str, agent_response: str | None = None) -> str:
        if not user_input.strip():
            raise InvalidInputError("user_input is empty; pass the user's message")
        turn = [{"role": "user", "content": user_input}]
        if agent_response is not None and agent_response.strip():
            turn.append({"role": "assistant", "content": agent_response})
        stored = self.door.add(self._caller(user), turn, infer=True)
        if not stored:
            return "Nothing new to store: this turn was stored before."
        if self.door.memoryos:
            noun = "dialogue page" if len(stored) == 1 else "dialogue pages"
            return f"Stored {len(stored)} {noun} in short-term memory; older pages move to mid term as it fills."
        noun = "message" if len(stored) == 1 else "messages"
        return f"Stored {len(stored)} {noun}; facts about the user are drawn from them at the next consolidation."

    def retrieve_memory(
        self,
        user: str,
        query: str,
        since: str | None = None,
        until: str | None = None,
        top_k: int = 10,
        threshold: float | None = None,
    ) -> str:
        """The best `top_k` memories for `query`; with `threshold` (0..1), only those scored at least that."""
        zone = self.door.settings.tzinfo
        start, end = parse_time("since", since, zone), parse_time("until", until, zone)
        window = None if start is None and end is None else (start, end)
        found = self.door.search(self._caller(user), query, top_k=top_k, time_range_given=window, threshold=threshold)
        empty = "No memory matches this query" + (" in that time range" if window else "")
        return _listing(found, empty + (f" with a score of at least {threshold}." if threshold is not None else "."))

    def get_user_profile(self, user: str) -> str:
        profile = self.door.profile(self._caller(user))
        if profile.policy == "insights":
            return _listing(
                profile.records, "No profile yet: insights about the user appear after enough conversation is consolidated."
            )
        if not profile.text:
            if profile.policy == "memoryos":
                return "No profile yet: it is written when a conversation topic comes up often enough."
            return "No profile yet: the agent has written nothing about the user."
        return profile.text

    def list_memory(self, user: str, type: str | None = None, limit: int | None = None) -> str:
        types: Sequence[str] | None = [type] if type else None
        memories = self.door.get_all(self._caller(user), types=types, limit=limit)
        return _listing(memories, "No memories stored for this user yet.")

    def delete_memory(self, user: str, memory_id: str) -> str:
        caller = self._caller(user)
        record = self.door.get(caller, memory_id)
        # another user's memory answers as if it did not exist: its existence is not the caller's to learn
        if record is None or not self.door.delete(caller, [memory_id]).deleted_count:
            message = f"no memory has the id {memory_id!r}; list_memory shows the ids of yours"
            raise NotFoundError(message, code="unknown_memory")
        return f"Deleted memory {memory_id}: {record.memory}"

    def consolidate_memory(self, user: str) -> str:
        summary = self.door.run_summary(self._caller(user), CONSOLIDATE_OPERATION)
        lines = [summary.result or ("Consolidation stopped: " + summary.stopped if summary.stopped else "Consolidation done.")]
        if summary.produced:
            lines.append("New or changed memories:")
            lines.append(_listing(summary.produced, "(none left: later changes removed them)"))
        return "\n".join(lines)


def _listing(records: Sequence[MemoryRecord | None], empty: str) -> str:
    lines = [_line(record) for record in records if record is not None]
    return "\n".join(lines) if lines else empty


def _line(record: MemoryRecord) -> str:
    return f"{record.text}  (id: {record.id}; {record.memory_type})"
