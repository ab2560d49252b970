"""Data for the metadata-filter part of the store contract: memories whose `meta` covers every kind
of value (texts, numbers, booleans, times in several zones, lists, missing keys, values that are
not indexed) and filter cases, each with the memories it must select written out by hand.

The expected ids are the documented meaning of `memoryscope.stores.metadata`; the contract checks
both every store and the reference `matches` against them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.stores.base import MemoryFilter, TimeRange
from memoryscope.stores.metadata import metadata_conditions

__all__ = ["METADATA_CASES", "MetadataCase", "metadata_population"]

_BASE = datetime(2024, 10, 26, 21, 26, 20, 123456, tzinfo=timezone(timedelta(hours=8)))
_UTC = timezone.utc

# ann's memories by number; `m03`'s due has no zone (a text, not a time), `m09`'s context is
# longer than what is indexed, `m06` holds lists whose items each fall outside the ranges asked
_ANN_META: dict[str, dict[str, Any]] = {
    "m00": {"category": "music", "rating": 5, "tags": ["jazz", "live"], "due": "2024-10-01T09:00:00+08:00", "pinned": True},
    "m01": {"category": "music", "rating": 3.0, "tags": ["rock"], "due": "2024-10-01T02:00:00Z", "pinned": False},
    "m02": {"category": "sport", "rating": 4.5, "tags": "jazz", "due": "2024-09-30", "pinned": "true"},
    "m03": {"category": "Music", "rating": "3", "due": "2024-10-01T00:00:00"},
    "m04": {"category": "food", "rating": 3, "tags": [], "due": "2024-12-24T23:59:59.999999-05:00"},
    "m05": {},
    "m06": {"category": ["music", "food"], "rating": [1, 10], "due": ["2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z"]},
    "m07": {"category": None, "rating": None, "nested": {"category": "music"}},
    "m08": {"category": "music", "rating": True, "count": 1},
    "m09": {"category": "sport", "rating": 0, "due": "2023-06-15T12:00:00+02:00", "context": "x" * 300, "speaker": "Ann"},
    "m10": {"category": "music", "rating": -2.5, "tags": ["jazz"]},
    "m11": {"category": "sport", "rating": 4, "tags": ["live"], "due": "2024-10-01T01:00:00+00:00"},
}
_INSIGHTS = ("m01", "m06", "m10")
_EVENT_DAYS = {"m00": 1, "m01": 2, "m02": 3, "m08": 4}  # event_time = _BASE - days; the rest have none
_BOB_META: dict[str, dict[str, Any]] = {
    "b00": {"category": "music", "rating": 3, "tags": ["jazz"]},
    "b01": {"due": "2024-10-01T01:00:00Z"},
}


def metadata_population() -> list[MemoryNode]:
    """ann's twelve memories (ids `m00`..`m11`) and two of bob's with values ann filters on."""
    nodes = []
    for number, (memory_id, meta) in enumerate(_ANN_META.items()):
        days = _EVENT_DAYS.get(memory_id)
        nodes.append(
            MemoryNode(
                user_name="ann",
                memory_id=memory_id,
                content=f"memo {number} with metadata",
                memory_type=MemoryType.INSIGHT if memory_id in _INSIGHTS else MemoryType.OBSERVATION,
                created_at=_BASE + timedelta(minutes=number),
                updated_at=_BASE + timedelta(minutes=number),
                event_time=None if days is None else _BASE - timedelta(days=days),
                meta=meta,
            )
        )
    for memory_id, meta in _BOB_META.items():
        nodes.append(MemoryNode(user_name="bob", memory_id=memory_id, content="memo of bob", meta=meta, created_at=_BASE))
    return nodes


@dataclass(frozen=True)
class MetadataCase:
    """`filters` (as a user writes them) plus other `MemoryFilter` fields select `expected` of ann's."""

    name: str
    filters: dict[str, Any]
    expected: frozenset[str]
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def memory_filter(self) -> MemoryFilter:
        return MemoryFilter("ann", metadata=metadata_conditions(self.filters), **self.fields)


def _case(name: str, filters: dict[str, Any], *expected: str, **fields: Any) -> MetadataCase:
    return MetadataCase(name, filters, frozenset(expected), fields)


METADATA_CASES: list[MetadataCase] = [
    _case("text_equals_exactly", {"category": "music"}, "m00", "m01", "m06", "m08", "m10"),
    _case("three_equals_three_point_zero", {"rating": 3}, "m01", "m04"),
    _case("three_point_zero_equals_three", {"rating": {"eq": 3.0}}, "m01", "m04"),
    _case("a_text_is_not_a_number", {"rating": "3"}, "m03"),
    _case("boolean_true_is_the_text_true", {"pinned": True}, "m00", "m02"),
    _case("the_text_false_is_boolean_false", {"pinned": "false"}, "m01"),
    _case("a_boolean_is_not_a_number", {"rating": True}, "m08"),
    _case("a_number_is_not_a_boolean", {"rating": 1}, "m06"),
    _case("one_of_texts", {"category": {"in": ["sport", "food"]}}, "m02", "m04", "m06", "m09", "m11"),
    _case("one_of_mixed_kinds", {"rating": {"in": [5, "3", True]}}, "m00", "m03", "m08"),
    _case("greater_than", {"rating": {"gt": 4}}, "m00", "m02", "m06"),
    _case("greater_or_equal", {"rating": {"gte": 4}}, "m00", "m02", "m06", "m11"),
    _case("less_than", {"rating": {"lt": 0}}, "m10"),
    _case("less_or_equal", {"rating": {"lte": 0}}, "m09", "m10"),
    _case("between_for_one_item", {"rating": {"gte": 3, "lt": 5}}, "m01", "m02", "m04", "m11"),
    _case("time_equals_across_zones", {"due": "2024-10-01T01:00:00Z"}, "m00", "m11"),
    _case(
        "time_between_bounds_in_other_zones",
        {"due": {"gte": "2024-10-01T08:30:00+08:00", "lt": "2024-10-01T02:00:00Z"}},
        "m00",
        "m11",
    ),
    _case("time_before_a_datetime_with_dates", {"due": {"lt": datetime(2024, 10, 1, tzinfo=_UTC)}}, "m02", "m06", "m09"),
    _case("time_to_the_microsecond", {"due": {"gt": "2024-12-25T04:59:59.999998Z"}}, "m04", "m06"),
    _case("time_after_open_end", {"due": {"gte": "2024-10-01T02:00:00+00:00"}}, "m01", "m04", "m06"),
    _case(
        "time_between_for_one_item",
        {"due": {"gt": "2024-06-01T00:00:00Z", "lt": "2024-12-01T00:00:00Z"}},
        "m00",
        "m01",
        "m02",
        "m11",
    ),
    _case("list_matches_by_item", {"tags": "jazz"}, "m00", "m02", "m10"),
    _case("one_of_items", {"tags": {"in": ["rock", "live"]}}, "m00", "m01", "m11"),
    _case("a_missing_key_never_matches", {"pinned": False}, "m01"),
    _case("a_short_neighbour_key_is_indexed", {"speaker": "Ann"}, "m09"),
    _case("nested_objects_are_not_searched", {"nested": "music"}),
    _case("several_conditions_all_hold", {"category": "music", "tags": "jazz"}, "m00", "m10"),
    _case("with_types", {"category": "music"}, "m01", "m06", "m10", memory_types=(MemoryType.INSIGHT,)),
    _case(
        "with_a_time_range",
        {"category": "music"},
        "m00",
        "m01",
        time_range=TimeRange("event_time", start=_BASE - timedelta(days=3, hours=12)),
    ),
    _case("with_memory_ids", {"category": "music"}, "m00", "m08", memory_ids=("m00", "m02", "m08", "b00", "unknown")),
]
