"""MemoryOS's tier objects, as read-only views over the store through the door's verbs.

MemoryOS's own MCP server and README reach into `Memoryos`'s tiers (`short_term_memory.get_all()`,
`user_long_term_memory.get_user_knowledge()`, `retriever.retrieve_context(...)`, ...). Here each
tier is records of the `memoryos` config's memory types, read with `get_all` (and retrieval run as
the `memoryos_retrieve` operation), for one caller: the user, with the assistant as the target.
The views answer with MemoryOS's dicts (`user_input`, `agent_response`, `timestamp`,
`knowledge`, ...); times are texts "YYYY-MM-DD HH:MM:SS" in the config's zone, as MemoryOS writes
them. They write nothing but what retrieval writes (a segment's visits): memories are added with
`Memoryos.add_memory`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memoryscope.door import Caller, Door, MemoryRecord, RunResult
from memoryscope.errors import InvalidInputError
from memoryscope.memory import MemoryNode, utc_now

__all__ = [
    "ShortTermMemoryView",
    "MidTermMemoryView",
    "LongTermMemoryView",
    "RetrieverView",
    "run_retrieval",
    "stamp",
    "NO_PROFILE",
]

PAGE = "memoryos_page"
SEGMENT = "memoryos_segment"
PROFILE = "memoryos_profile"
KNOWLEDGE = "memoryos_knowledge"
RETRIEVE = "memoryos_retrieve"
UPDATE = "memoryos_update"
NO_PROFILE = "None"  # what MemoryOS's get_raw_user_profile answers for a user without one
_LABELS = (("User: ", "Assistant: "), ("用户：", "助手："))


def stamp(when: datetime, door: Door) -> str:
    """A time as MemoryOS writes one: "YYYY-MM-DD HH:MM:SS", in the config's zone."""
    return when.astimezone(door.settings.tzinfo).strftime("%Y-%m-%d %H:%M:%S")


def run_retrieval(door: Door, caller: Caller, query: str, when: datetime) -> RunResult:
    """The `memoryos_retrieve` run for `query` at `when`; a segment it made hot is promoted right
    after (`memoryos_update`), as MemoryOS's next `add_memory` would."""
    result = door.run(caller, RETRIEVE, query=query, query_time=when)
    if result.context.memoryos_update_due:
        door.run(caller, UPDATE, query_time=when)
    return result


def page_dict(page: MemoryNode, door: Door, meta_info: str | None = None) -> dict[str, Any]:
    """A page as MemoryOS keeps one: the user's input, the assistant's response, when it was said
    (and, for a mid-term page, its id and the summary of its segment as `meta_info`)."""
    asked, answered = split_page(page.content)
    out: dict[str, Any] = {
        "user_input": asked,
        "agent_response": answered,
        "timestamp": stamp(page.message_time or page.created_at, door),
    }
    if meta_info is not None:
        out.update({"page_id": page.memory_id, "meta_info": meta_info})
    return out


def split_page(content: str) -> tuple[str, str]:
    """("what the user said", "what the assistant answered") of a page's text."""
    first, _, rest = content.partition("\n")
    for user, assistant in _LABELS:
        if first.startswith(user) and rest.startswith(assistant):
            return first[len(user) :], rest[len(assistant) :]
    return content, ""


def knowledge_dict(entry: MemoryNode, door: Door) -> dict[str, Any]:
    """A knowledge entry as MemoryOS keeps one (without its embedding)."""
    return {"knowledge": entry.content, "timestamp": stamp(entry.created_at, door)}


class _View:
    def __init__(self, door: Door, caller: Caller) -> None:
        self.door = door
        self.caller = caller


class ShortTermMemoryView(_View):
    """MemoryOS's `ShortTermMemory`: the newest pages, not yet moved to mid term."""

    def __init__(self, door: Door, caller: Caller, max_capacity: int | None = None) -> None:
        super().__init__(door, caller)
        self.max_capacity = max_capacity

    def records(self) -> list[MemoryRecord]:
        pages = self.door.get_all(self.caller, types=[PAGE], filters={"memoryos_tier": "short"}, newest_first=False)
        return sorted(pages, key=lambda record: record.message_time or record.created_at)

    def get_all(self) -> list[dict[str, Any]]:
        """The short-term pages, oldest first: `user_input`, `agent_response`, `timestamp`."""
        return [page_dict(record.node, self.door) for record in self.records()]

    def is_full(self) -> bool:
        """Whether the next page moves the oldest to mid term (never, without a capacity)."""
        return self.max_capacity is not None and len(self.records()) >= self.max_capacity


class MidTermMemoryView(_View):
    """MemoryOS's `MidTermMemory`: its `sessions` (the topic segments) and their pages."""

    def __init__(self, door: Door, caller: Caller, max_capacity: int | None = None) -> None:
        super().__init__(door, caller)
        self.max_capacity = max_capacity

    @property
    def sessions(self) -> dict[str, dict[str, Any]]:
        """Segment id -> MemoryOS's session dict: `summary`, `summary_keywords`, `N_visit`,
        `L_interaction`, `H_segment` (the heat when last computed), `last_visit_time`,
        `timestamp` and `details` (its pages, oldest first)."""
        segments = self.door.get_all(self.caller, types=[SEGMENT])
        pages: dict[str, list[MemoryRecord]] = {}
        for record in self.door.get_all(self.caller, types=[PAGE], filters={"memoryos_tier": "mid"}, newest_first=False):
            pages.setdefault(str(record.node.meta.get("memoryos_segment_id", "")), []).append(record)
        out: dict[str, dict[str, Any]] = {}
        for segment in segments:
            meta = segment.node.meta
            details = sorted(pages.get(segment.id, []), key=lambda record: record.message_time or record.created_at)
            out[segment.id] = {
                "id": segment.id,
                "summary": segment.memory,
                "summary_keywords": list(meta.get("memoryos_keywords") or ()),
                "N_visit": segment.node.access_count,
                "L_interaction": int(meta.get("memoryos_interaction_length", 0) or 0),
                "H_segment": float(meta.get("memoryos_heat", 0.0) or 0.0),
                "last_visit_time": stamp(segment.node.last_accessed_at or segment.updated_at, self.door),
                "timestamp": stamp(segment.created_at, self.door),
                "details": [page_dict(record.node, self.door, segment.memory) for record in details],
            }
        return out

    def get_page_by_id(self, page_id: str) -> dict[str, Any] | None:
        record = self.door.get(self.caller, page_id)
        if record is None or record.memory_type != PAGE or record.node.meta.get("memoryos_tier") != "mid":
            return None
        segment = self.door.get(self.caller, str(record.node.meta.get("memoryos_segment_id", "")))
        return page_dict(record.node, self.door, segment.memory if segment is not None else "")


class LongTermMemoryView(_View):
    """MemoryOS's `LongTermMemory`: the user's profile, user knowledge and assistant knowledge
    (MemoryOS keeps the assistant's knowledge in a second object of this class; so does
    `Memoryos` here, both reading the same user-and-assistant records)."""

    def __init__(self, door: Door, caller: Caller, knowledge_capacity: int | None = None) -> None:
        super().__init__(door, caller)
        self.knowledge_capacity = knowledge_capacity

    def _profile(self, user_id: str) -> MemoryRecord | None:
        if user_id != self.caller.user_id:
            return None  # another user's profile is not in this user's memory (as in MemoryOS's per-user file)
        found = self.door.get_all(self.caller, types=[PROFILE], limit=1)
        return found[0] if found and found[0].memory.strip() else None

    def get_raw_user_profile(self, user_id: str) -> str:
        """The profile text, or "None" when there is none yet (as MemoryOS answers)."""
        profile = self._profile(user_id)
        return profile.memory if profile is not None else NO_PROFILE

    def get_user_profile_data(self, user_id: str) -> dict[str, Any]:
        """`{"data": text, "last_updated": time}`, or {} when there is no profile yet."""
        profile = self._profile(user_id)
        if profile is None:
            return {}
        return {"data": profile.memory, "last_updated": stamp(profile.updated_at, self.door)}

    def _knowledge(self, about: str) -> list[dict[str, Any]]:
        records = self.door.get_all(self.caller, types=[KNOWLEDGE], newest_first=False)
        return [knowledge_dict(record.node, self.door) for record in records if record.node.key == about]

    def get_user_knowledge(self) -> list[dict[str, Any]]:
        """The user knowledge entries, oldest first: `knowledge`, `timestamp`."""
        return self._knowledge("user")

    def get_assistant_knowledge(self) -> list[dict[str, Any]]:
        """The assistant knowledge entries, oldest first: `knowledge`, `timestamp`."""
        return self._knowledge("assistant")


class RetrieverView(_View):
    """MemoryOS's `Retriever`: `retrieve_context` runs the `memoryos_retrieve` operation (the
    segments it returns gain a visit, as MemoryOS's search does)."""

    def __init__(self, door: Door, caller: Caller, queue_capacity: int | None = None) -> None:
        super().__init__(door, caller)
        self.retrieval_queue_capacity = queue_capacity

    def retrieve_context(
        self,
        user_query: str,
        user_id: str | None = None,
        segment_similarity_threshold: float | None = None,
        page_similarity_threshold: float | None = None,
        knowledge_threshold: float | None = None,
        top_k_sessions: int | None = None,
        top_k_knowledge: int | None = None,
    ) -> dict[str, Any]:
        """MemoryOS's answer: `retrieved_pages` (mid-term pages, best first, with their segment's
        summary as `meta_info`), `retrieved_user_knowledge`, `retrieved_assistant_knowledge`,
        `retrieved_at`; at most `retrieval_queue_capacity` pages (as the config's
        `memoryos_recall_mid` keeps, when None). `user_id` must be this memory's user (or None).
        MemoryOS's thresholds and top-k arguments are accepted for its callers; the config's
        apply (`similarity_threshold`, `retrieval_queue_capacity`, `knowledge_top_k`), which are
        set for this store's embedding model."""
        if user_id is not None and user_id != self.caller.user_id:
            raise InvalidInputError(f"retrieve_context: user_id {user_id!r} is not this memory's user {self.caller.user_id!r}")
        del segment_similarity_threshold, page_similarity_threshold, knowledge_threshold, top_k_sessions, top_k_knowledge
        now = utc_now()
        context = run_retrieval(self.door, self.caller, user_query, now).context
        pages, summaries = [], {}
        for node in context.mid_term_recall:
            if node.memory_type.value == SEGMENT:
                summaries[node.memory_id] = node.content
        for node in context.mid_term_recall:
            if node.memory_type.value == PAGE:
                pages.append(page_dict(node, self.door, summaries.get(str(node.meta.get("memoryos_segment_id")), "")))
        knowledge = [node for node in context.long_term_recall if node.memory_type.value == KNOWLEDGE]
        return {
            "retrieved_pages": pages[: self.retrieval_queue_capacity],
            "retrieved_user_knowledge": [knowledge_dict(n, self.door) for n in knowledge if n.key == "user"],
            "retrieved_assistant_knowledge": [knowledge_dict(n, self.door) for n in knowledge if n.key == "assistant"],
            "retrieved_at": stamp(now, self.door),
        }
