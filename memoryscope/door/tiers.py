"""The `tiers` verb: a user's memories as the memory policy arranges them, for views that show the
policy at work (the playground). Under MemoryOS (`configs/memoryos.yaml`): the short-term pages in
the order they were said, the mid-term segments with their heat (as the last update computed it)
and the heat at which a segment is promoted, the long-term profile and knowledge. Under another
policy the tiers are empty and `policy` says which it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memoryscope.door.base import DoorBase
from memoryscope.door.caller import READ, Caller
from memoryscope.door.records import MemoryRecord

__all__ = ["Segment", "Tiers", "TierVerbs"]

# MemoryOS's memory types and meta entries (registered by workers/_memoryos.py)
_PAGE, _SEGMENT, _PROFILE, _KNOWLEDGE = "memoryos_page", "memoryos_segment", "memoryos_profile", "memoryos_knowledge"
_TIER, _SEGMENT_ID, _HEAT, _LENGTH = "memoryos_tier", "memoryos_segment_id", "memoryos_heat", "memoryos_interaction_length"
_MOST = 10_000  # the pages and segments one view reads at most (MemoryOS keeps a few hundred)


@dataclass(frozen=True)
class Segment:
    """A mid-term segment: its summary (`record`), its heat, visits and interaction length, its
    pages, and whether it is hot enough for the next update to promote it."""

    record: MemoryRecord
    heat: float
    visits: int
    interaction_length: int
    pages: tuple[MemoryRecord, ...]
    due_for_promotion: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.record.to_dict(),
            "heat": self.heat,
            "visits": self.visits,
            "interaction_length": self.interaction_length,
            "pages": [page.to_dict() for page in self.pages],
            "due_for_promotion": self.due_for_promotion,
        }


@dataclass(frozen=True)
class Tiers:
    """The user's memories by tier (`policy`: `memoryos`; empty tiers under another policy)."""

    user_id: str
    policy: str
    short_term: tuple[MemoryRecord, ...]  # oldest first
    mid_term: tuple[Segment, ...]  # hottest first
    profile: MemoryRecord | None
    knowledge: tuple[MemoryRecord, ...]  # newest first
    heat_threshold: float | None  # a segment this hot is promoted by the next update

    def to_dict(self) -> dict[str, Any]:
        return {
            "user": self.user_id,
            "policy": self.policy,
            "short_term": [record.to_dict() for record in self.short_term],
            "mid_term": [segment.to_dict() for segment in self.mid_term],
            "profile": self.profile.to_dict() if self.profile is not None else None,
            "knowledge": [record.to_dict() for record in self.knowledge],
            "heat_threshold": self.heat_threshold,
        }


class TierVerbs(DoorBase):
    def tiers(self, caller: Caller) -> Tiers:
        """The caller's memories by the policy's tiers (see the module docstring)."""
        caller.require(READ, "tiers")
        if not self.memoryos:
            return Tiers(caller.user_id, self.policy, (), (), None, (), None)
        read = self.get_all  # type: ignore[attr-defined]  # ReadingVerbs', beside this in Door
        pages = read(caller, types=[_PAGE], limit=_MOST, newest_first=False)
        short = tuple(page for page in pages if page.node.meta.get(_TIER) != "mid")
        by_segment: dict[str, list[MemoryRecord]] = {}
        for page in pages:
            if page.node.meta.get(_TIER) == "mid":
                by_segment.setdefault(str(page.node.meta.get(_SEGMENT_ID, "")), []).append(page)
        threshold = self.heat_threshold
        segments = []
        for record in read(caller, types=[_SEGMENT], limit=_MOST):
            heat = float(record.node.meta.get(_HEAT, 0.0) or 0.0)
            length = int(record.node.meta.get(_LENGTH, 0) or 0)
            pages = tuple(by_segment.get(record.id, ()))
            due = threshold is not None and heat >= threshold
            segments.append(Segment(record, heat, record.node.access_count, length, pages, due))
        segments.sort(key=lambda segment: segment.heat, reverse=True)
        profiles = read(caller, types=[_PROFILE], limit=1)
        knowledge = tuple(read(caller, types=[_KNOWLEDGE], limit=_MOST))
        profile = profiles[0] if profiles else None
        return Tiers(caller.user_id, self.policy, short, tuple(segments), profile, knowledge, threshold)
