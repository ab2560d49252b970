"""What each MCP tool does, on a `MemoryScope`, for a user decided by the server (never by the model).

The functions here are plain and synchronous; `memoryscope.mcp.server` registers them with the SDK,
which runs them off the event loop. Each raises `MemoryScopeError` with a message written for the
model that called it; the server turns it into an MCP tool error.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING

from memoryscope.errors import MemoryScopeError
from memoryscope.memory import MemoryType

if TYPE_CHECKING:
    from memoryscope.app import MemoryScope
    from memoryscope.memory_api import MemoryRecord

__all__ = ["MemoryTools", "parse_time"]

CONSOLIDATE_OPERATION = "consolidate_memory"
# A service with this operation keeps memory MemoryOS's way (`configs/memoryos.yaml`): the profile
# is one evolving text, not the insights.
MEMORYOS_OPERATION = "memoryos_add"


class MemoryTools:
    """The six tools of the MemoryScope MCP server, for one scope; `user` is passed by the server."""

    def __init__(self, scope: MemoryScope, workspace: str = "") -> None:
        self.scope = scope
        self.workspace = workspace

    def add_memory(self, user: str, user_input: str, agent_response: str | None = None) -> str:
        if not user_input.strip():
            raise MemoryScopeError("user_input is empty; pass the user's message")
        turn = [{"role": "user", "content": user_input}]
        if agent_response is not None and agent_response.strip():
            turn.append({"role": "assistant", "content": agent_response})
        stored = self.scope.add(turn, user_id=user, infer=True, workspace=self.workspace)
        if not stored:
            return "Nothing new to store: this turn was stored before."
        if self._memoryos:
            noun = "dialogue page" if len(stored) == 1 else "dialogue pages"
            return f"Stored {len(stored)} {noun} in short-term memory; older pages move to mid term as it fills."
        noun = "message" if len(stored) == 1 else "messages"
        return f"Stored {len(stored)} {noun}; facts about the user are drawn from them at the next consolidation."

    def retrieve_memory(self, user: str, query: str, since: str | None = None, until: str | None = None, top_k: int = 10) -> str:
        zone = self.scope.config.settings.tzinfo
        start, end = parse_time("since", since, zone), parse_time("until", until, zone)
        if start is not None and end is not None and start > end:
            raise MemoryScopeError(f"since ({since}) is after until ({until}); swap them or drop one")
        window = None if start is None and end is None else (start, end)
        found = self.scope.search(query, user_id=user, top_k=top_k, time_range=window, workspace=self.workspace)
        return _listing(found, "No memory matches this query" + (" in that time range." if window else "."))

    def get_user_profile(self, user: str) -> str:
        if self._memoryos:
            profiles = self.scope.get_all(user, types=[MemoryType.MEMORYOS_PROFILE], workspace=self.workspace)
            if not profiles:
                return "No profile yet: it is written when a conversation topic comes up often enough."
            return profiles[0].memory
        insights = self.scope.get_all(user, types=[MemoryType.INSIGHT], workspace=self.workspace)
        return _listing(insights, "No profile yet: insights about the user appear after enough conversation is consolidated.")

    @property
    def _memoryos(self) -> bool:
        """Whether the server's memory service follows MemoryOS's policy."""
        return MEMORYOS_OPERATION in self.scope.default_service.operations

    def list_memory(self, user: str, type: str | None = None, limit: int | None = None) -> str:
        types: Sequence[str] | None = [type] if type else None
        memories = self.scope.get_all(user, types=types, limit=limit, workspace=self.workspace)
        return _listing(memories, "No memories stored for this user yet.")

    def delete_memory(self, user: str, memory_id: str) -> str:
        record = self.scope.get(memory_id)
        # another user's memory answers as if it did not exist: its existence is not the caller's to learn
        if record is None or record.user_id != user or record.node.workspace != self.workspace:
            raise MemoryScopeError(f"no memory has the id {memory_id!r}; list_memory shows the ids of yours")
        if not self.scope.delete(memory_id):
            raise MemoryScopeError(f"no memory has the id {memory_id!r}; list_memory shows the ids of yours")
        return f"Deleted memory {memory_id}: {record.memory}"

    def consolidate_memory(self, user: str) -> str:
        service = self.scope.default_service
        if CONSOLIDATE_OPERATION not in service.operations:
            known = ", ".join(service.operations)
            raise MemoryScopeError(f"this server's memory service has no {CONSOLIDATE_OPERATION} operation (it has: {known})")
        result = service.run_operation(CONSOLIDATE_OPERATION, user, workspace=self.workspace)
        context = result.context
        lines = [context.result or ("Consolidation stopped: " + result.stopped if result.stopped else "Consolidation done.")]
        written = set(context.store_outcome.memory_ids)  # a backend operation answers with none: what store_memory wrote
        produced = context.memories or [
            node for node in (*context.new_observations, *context.updated_insights) if node.memory_id in written
        ]
        if produced:
            lines.append("New or changed memories:")
            changed = [self.scope.get(node.memory_id) for node in produced]
            lines.append(_listing(changed, "(none left: later changes removed them)"))
        return "\n".join(lines)


def parse_time(name: str, value: str | None, zone: tzinfo) -> datetime | None:
    """An ISO 8601 time from a tool argument; one without a zone is read in `zone` (the config's)."""
    if value is None or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise MemoryScopeError(
            f"{name} {value!r} is not an ISO 8601 time; write e.g. 2024-10-26, 2024-10-26T21:26:20 or 2024-10-26T21:26:20+08:00"
        ) from None
    return moment.replace(tzinfo=zone) if moment.tzinfo is None else moment


def _listing(records: Sequence[MemoryRecord | None], empty: str) -> str:
    lines = [_line(record) for record in records if record is not None]
    return "\n".join(lines) if lines else empty


def _line(record: MemoryRecord) -> str:
    return f"{record.text}  (id: {record.id}; {record.memory_type})"
