"""What the MemoryOS MCP tools do, answering as MemoryOS's own MCP server (`server_new.py`) does.

`add_memory(user_input, agent_response, timestamp, meta_data)`, `retrieve_memory(query,
relationship_with_user, style_hint, max_results)` and `get_user_profile(include_knowledge,
include_assistant_knowledge)` return MemoryOS's dicts: `status` "success" with its fields, or
`status` "error" with a `message` (MemoryOS answers failures so, not as tool errors). Served by
`memoryscope.mcp.server.build_mcp` for a service that keeps memory MemoryOS's way. They read and
write through the door (the tiers as `memoryscope.memoryos`'s views), for the user the server
decides and the assistant it serves (`target`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from memoryscope.door import READ, WRITE, Caller, Door, parse_time
from memoryscope.errors import InvalidInputError
from memoryscope.memory import utc_now
from memoryscope.memoryos import NO_PROFILE, LongTermMemoryView, RetrieverView, ShortTermMemoryView, stamp

__all__ = ["MemoryosToolHandlers", "error_answer"]

NO_USER_PROFILE = "No detailed user profile"  # what MemoryOS's server says for a user without one


def error_answer(message: str) -> dict[str, Any]:
    """MemoryOS's failure answer."""
    return {"status": "error", "message": message}


class MemoryosToolHandlers:
    """The three MemoryOS tools on one door; `user` is passed by the server, `target` is the
    assistant (MemoryOS's `assistant_id`)."""

    def __init__(self, door: Door, workspace: str = "", target: str = "") -> None:
        self.door = door
        self.workspace = workspace
        self.target = target

    def _caller(self, user: str) -> Caller:
        return self.door.caller(user, target=self.target, workspace=self.workspace, local=False, scopes=frozenset((READ, WRITE)))

    def _now(self) -> str:
        return stamp(utc_now(), self.door)

    def add_memory(
        self,
        user: str,
        user_input: str,
        agent_response: str,
        timestamp: str | None = None,
        meta_data: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Keep one turn as a short-term page, said at `timestamp` (default: now), with `meta_data`
        as its metadata."""
        if not user_input or not agent_response:
            return error_answer("user_input and agent_response are required")
        said: datetime | None = parse_time("timestamp", timestamp, self.door.settings.tzinfo) if timestamp else None
        turn = [{"role": "user", "content": user_input}, {"role": "assistant", "content": agent_response}]
        self.door.add(self._caller(user), turn, metadata=meta_data or None, infer=True, time=said)
        return {
            "status": "success",
            "message": "Memory has been successfully added to MemoryOS",
            "timestamp": timestamp or self._now(),
            "details": {
                "user_input_length": len(user_input),
                "agent_response_length": len(agent_response),
                "has_meta_data": meta_data is not None,
            },
        }

    def retrieve_memory(
        self, user: str, query: str, relationship_with_user: str = "friend", style_hint: str = "", max_results: int = 10
    ) -> dict[str, Any]:
        """The short-term pages, the profile, and the best mid-term pages and knowledge for `query`
        (at most `max_results` of each; the totals say how many were found).
        `relationship_with_user` and `style_hint` shape no retrieval (MemoryOS's server takes them
        and uses neither)."""
        del relationship_with_user, style_hint
        if not query:
            return error_answer("query parameter is required")
        if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
            raise InvalidInputError(f"max_results must be a whole number of at least 1, got {max_results!r}")
        caller = self._caller(user)
        found = RetrieverView(self.door, caller).retrieve_context(query)
        short_term = ShortTermMemoryView(self.door, caller).get_all()
        profile = LongTermMemoryView(self.door, caller).get_raw_user_profile(caller.user_id)
        pages, user_knowledge, assistant_knowledge = (
            found["retrieved_pages"], found["retrieved_user_knowledge"], found["retrieved_assistant_knowledge"]
        )  # fmt: skip
        return {
            "status": "success",
            "query": query,
            "timestamp": self._now(),
            "user_profile": profile if profile != NO_PROFILE else NO_USER_PROFILE,
            "short_term_memory": short_term,
            "short_term_count": len(short_term),
            "retrieved_pages": [
                {key: page[key] for key in ("user_input", "agent_response", "timestamp", "meta_info")}
                for page in pages[:max_results]
            ],
            "retrieved_user_knowledge": user_knowledge[:max_results],
            "retrieved_assistant_knowledge": assistant_knowledge[:max_results],
            "total_pages_found": len(pages),
            "total_user_knowledge_found": len(user_knowledge),
            "total_assistant_knowledge_found": len(assistant_knowledge),
        }

    def get_user_profile(
        self, user: str, include_knowledge: bool = True, include_assistant_knowledge: bool = False
    ) -> dict[str, Any]:
        """The profile text, with the user knowledge (`include_knowledge`) and the assistant
        knowledge (`include_assistant_knowledge`) and their counts."""
        caller = self._caller(user)
        long_term = LongTermMemoryView(self.door, caller)
        profile = long_term.get_raw_user_profile(caller.user_id)
        out: dict[str, Any] = {
            "status": "success",
            "timestamp": self._now(),
            "user_id": caller.user_id,
            "assistant_id": self.target,
            "user_profile": profile if profile != NO_PROFILE else NO_USER_PROFILE,
        }
        if include_knowledge:
            knowledge = long_term.get_user_knowledge()
            out["user_knowledge"] = knowledge
            out["user_knowledge_count"] = len(knowledge)
        if include_assistant_knowledge:
            knowledge = long_term.get_assistant_knowledge()
            out["assistant_knowledge"] = knowledge
            out["assistant_knowledge_count"] = len(knowledge)
        return out
