"""MemoryOS's tiers on MemoryScope's store: the records, their ids, and heat.

MemoryOS (BAI-LAB) keeps a user's memory like an operating system. Here every tier is memory
nodes of its own type, isolated like every memory by `user_name` (the user), `target_name` (the
assistant) and `workspace`:

- `memoryos_page`: one question-answer turn. `content` "User: ...\\nAssistant: ...",
  `message_time` when it was said, `meta["memoryos_tier"]` "short" or "mid", `meta["memoryos_segment_id"]` (mid).
  Embedded: pages are found by similarity.
- `memoryos_segment`: a mid-term topic. `content` its LLM-written summary (embedded),
  `meta["memoryos_keywords"]`, `meta["memoryos_interaction_length"]` (pages joined since the last promotion),
  `access_count` its visits, `last_accessed_at` its last visit; heat is computed from these.
- `memoryos_profile`: one per user, assistant and workspace (id derived from them), `content` the
  evolving profile text.
- `memoryos_knowledge`: a long-term entry, `key` "user" or "assistant", `content` the fact (embedded),
  `last_accessed_at` its last use (the least recently used go first at capacity); its id derives
  from owner, kind and text, so learning it again only refreshes it.

Their own meta keys start with `memoryos_` (a caller's metadata may not use that prefix).
Eviction marks a node expired (in the same atomic write as the rest of a run), so a killed run
leaves everything as it was and the history shows what was evicted.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable
from datetime import datetime, tzinfo
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memoryscope.context import MemoryContext, context_field
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType, utc_now
from memoryscope.memory_types import register_memory_type
from memoryscope.stores.base import MemoryFilter, MemoryStore

__all__ = [
    "MEMORYOS_PAGE",
    "MEMORYOS_SEGMENT",
    "MEMORYOS_PROFILE",
    "MEMORYOS_KNOWLEDGE",
    "PAGE",
    "SEGMENT",
    "PROFILE",
    "KNOWLEDGE",
    "SHORT",
    "MID",
    "HeatParams",
    "segment_heat",
    "profile_id",
    "segment_id_for",
    "knowledge_id",
    "scope_filter",
    "scan_all",
    "clock",
    "page_line",
    "last_used",
    "latest",
    "derived_id",
]

# MemoryOS's own context fields (the core `MemoryContext` knows nothing of the tiers)
_MEMORYOS = "memoryos"
context_field("short_term_pages", (), "the user's short-term pages, oldest first (memoryos_load)", owner=_MEMORYOS)
context_field("mid_term_segments", (), "the user's valid mid-term segments (memoryos_load)", owner=_MEMORYOS)
context_field("long_term_memories", (), "the user's profile and knowledge entries (memoryos_load)", owner=_MEMORYOS)
context_field("mid_term_writes", (), "pages moved, segments made, changed or evicted (memoryos_mid_term)", owner=_MEMORYOS)
context_field("long_term_writes", (), "profile, knowledge, segments reset (memoryos_long_term)", owner=_MEMORYOS)
context_field("short_term_recall", (), "retrieval: the short-term pages", owner=_MEMORYOS)
context_field("mid_term_recall", (), "retrieval: the best segments, then their best pages", owner=_MEMORYOS)
context_field("long_term_recall", (), "retrieval: the profile, then the best knowledge entries", owner=_MEMORYOS)
context_field("memoryos_notes", (), "what a memoryos step skipped and why (an unreadable LLM answer)", owner=_MEMORYOS)
context_field(
    "memoryos_update_due", False, "short term is over capacity or a segment is hot: run memoryos_update", owner=_MEMORYOS
)

# MemoryOS's tiers, registered by this capability (`memoryscope.memory_types`), shown in this order
# after the insights: the profile and knowledge (long-term), then segments (mid) and pages (short).
_OWNER = "memoryscope.workers.memoryos"
# one question-answer turn; meta: tier short|mid, segment id
MEMORYOS_PAGE = register_memory_type("memoryos_page", labels={"en": "dialogue page", "zh": "对话页"}, order=80, owner=_OWNER)
# a mid-term topic: content its summary; meta: keywords, heat inputs
MEMORYOS_SEGMENT = register_memory_type(
    "memoryos_segment", labels={"en": "mid-term segment", "zh": "中期片段"}, order=70, owner=_OWNER
)
# the one evolving user profile per user, target and workspace
MEMORYOS_PROFILE = register_memory_type(
    "memoryos_profile", labels={"en": "user profile", "zh": "用户画像"}, order=10, owner=_OWNER
)
# a long-term fact: `key` "user" or "assistant"; meta: last used
MEMORYOS_KNOWLEDGE = register_memory_type(
    "memoryos_knowledge", labels={"en": "long-term knowledge", "zh": "长期知识"}, order=20, owner=_OWNER
)
PAGE, SEGMENT, PROFILE, KNOWLEDGE = MEMORYOS_PAGE, MEMORYOS_SEGMENT, MEMORYOS_PROFILE, MEMORYOS_KNOWLEDGE
SHORT = "short"
MID = "mid"
_NAMESPACE = uuid.UUID("3f0c7d52-8e1a-5b64-9d2e-7a41c0b6e8f3")
_PAGE_SIZE = 500


class HeatParams(BaseModel):
    """Heat = alpha * visits + beta * interaction length + gamma * exp(-seconds since last visit / tau)
    (MemoryOS's `compute_segment_heat`, with its defaults)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha: float = Field(1.0, ge=0, le=1000, description="Weight of a segment's visits (retrievals that returned it).")
    beta: float = Field(1.0, ge=0, le=1000, description="Weight of its interaction length (pages joined since promotion).")
    gamma: float = Field(1.0, ge=0, le=1000, description="Weight of its recency, exp(-seconds since last visit / tau).")
    recency_tau_seconds: float = Field(1e7, gt=0, le=1e10, description="Time constant of the recency decay, in seconds.")


def segment_heat(segment: MemoryNode, now: datetime, heat: HeatParams) -> float:
    """The heat of `segment` at `now`."""
    visits = segment.access_count
    length = int(segment.meta.get("memoryos_interaction_length", 0) or 0)
    last = segment.last_accessed_at or segment.updated_at
    elapsed = max(0.0, (now - last).total_seconds())
    return heat.alpha * visits + heat.beta * length + heat.gamma * math.exp(-elapsed / heat.recency_tau_seconds)


def derived_id(*parts: str) -> str:
    """A memory id derived from `parts`: the same in every store and every run."""
    return uuid.uuid5(_NAMESPACE, "\x1f".join(parts)).hex


def profile_id(user_name: str, target_name: str, workspace: str) -> str:
    """The memory id of the profile of one user, assistant and workspace (the same in every store)."""
    return derived_id("memoryos_profile", user_name, target_name, workspace)


def segment_id_for(first_page_id: str) -> str:
    """A new segment's id, from the page that opened it: a rerun of a move makes the same segment."""
    return derived_id("memoryos_segment", first_page_id)


def knowledge_id(user_name: str, target_name: str, workspace: str, about: str, text: str) -> str:
    """A knowledge entry's id: the same fact learnt again is the same entry."""
    return derived_id("memoryos_knowledge", user_name, target_name, workspace, about, " ".join(text.casefold().split()))


def scope_filter(ctx: MemoryContext, *types: MemoryType, **extra: Any) -> MemoryFilter:
    """The valid memories of these types of the run's user, assistant and workspace."""
    return MemoryFilter(
        user_name=ctx.user_name,
        target_name=ctx.target_name,
        workspace=ctx.workspace,
        memory_types=types,
        status=MemoryStatus.VALID,
        **extra,
    )


def scan_all(store: MemoryStore, memory_filter: MemoryFilter, *, limit: int = 100_000) -> list[MemoryNode]:
    """Every match, oldest first (by `created_at`), at most `limit`."""
    found: list[MemoryNode] = []
    while len(found) < limit:
        page = store.scan(memory_filter, limit=min(_PAGE_SIZE, limit - len(found)), offset=len(found), newest_first=False)
        found += page
        if len(page) < _PAGE_SIZE:
            break
    return found


def clock(ctx: MemoryContext, zone: tzinfo) -> datetime:
    """The run's "now": the caller's `query_time` when given (a turn's time stamp; without a zone,
    in `zone`, the config's), else the current time."""
    moment = ctx.query_time
    if moment is None:
        return utc_now()
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)


def page_line(page: MemoryNode, language: str, zone: Any) -> str:
    """A page as an LLM reads it: time-stamped, on one line."""
    return page.format(language, zone).replace("\n", " ")


def last_used(node: MemoryNode) -> datetime:
    return node.last_accessed_at or node.created_at


def latest(nodes: Iterable[MemoryNode]) -> dict[str, MemoryNode]:
    """By id, the last of `nodes` with each id (later writes of a run win)."""
    return {node.memory_id: node for node in nodes}
