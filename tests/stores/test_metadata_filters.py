"""`memoryscope.stores.metadata`: parsing user filters into conditions (bad ones are one-line
StoreErrors), the reference meaning `matches`, and what stores index (`indexed_values`)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from memoryscope.errors import StoreError
from memoryscope.stores.metadata import (
    MAX_INDEXED_TEXT,
    MetadataCondition,
    checked_conditions,
    conditions_by_key,
    indexed_values,
    matches,
    metadata_conditions,
    metadata_time,
)
from memoryscope.testing._store_metadata_cases import METADATA_CASES, MetadataCase, metadata_population

UTC = timezone.utc
SHANGHAI = timezone(timedelta(hours=8))


def test_a_plain_value_is_equality_and_a_mapping_holds_operators() -> None:
    assert metadata_conditions({"category": "music", "rating": {"gte": 3, "lt": 5}}) == (
        MetadataCondition("category", "eq", "music"),
        MetadataCondition("rating", "gte", 3),
        MetadataCondition("rating", "lt", 5),
    )
    assert metadata_conditions({"tags": {"in": ["a", "b"]}}) == (MetadataCondition("tags", "in", ("a", "b")),)
    assert metadata_conditions(None) == metadata_conditions({}) == ()


def test_iso_times_become_utc_datetimes_and_other_texts_stay_texts() -> None:
    [after, before] = metadata_conditions(
        {"due": {"gte": "2024-10-01T08:00:00+08:00", "lt": datetime(2024, 10, 2, tzinfo=SHANGHAI)}}
    )
    assert after.value == datetime(2024, 10, 1, tzinfo=UTC) and after.value.tzinfo is UTC
    assert before.value == datetime(2024, 10, 1, 16, tzinfo=UTC) and before.is_time
    [dated] = metadata_conditions({"day": "2024-10-01"})
    assert dated.value == datetime(2024, 10, 1, tzinfo=UTC)  # a date is midnight UTC
    [naive, short, zulu] = metadata_conditions(
        {"a": "2024-10-01T00:00:00", "b": "2024", "c": {"in": ["2024-10-01T00:00:00Z", "x"]}}
    )
    assert naive.value == "2024-10-01T00:00:00" and short.value == "2024"  # no zone, too short: texts
    assert zulu.value == (datetime(2024, 10, 1, tzinfo=UTC), "x")


def test_metadata_time_reads_only_zoned_iso_texts_and_dates() -> None:
    assert metadata_time("2024-10-01T09:00:00+08:00") == datetime(2024, 10, 1, 1, tzinfo=UTC)
    assert metadata_time("2024-10-01T01:00:00Z") == datetime(2024, 10, 1, 1, tzinfo=UTC)
    assert metadata_time(datetime(2024, 10, 1, 9, tzinfo=SHANGHAI)) == datetime(2024, 10, 1, 1, tzinfo=UTC)
    for text in ("2024-10-01T09:00:00", "music", "2024-13-01", "20241001", "1" * 50, datetime(2024, 1, 1), 3):
        assert metadata_time(text) is None, text


@pytest.mark.parametrize(
    ("filters", "said"),
    [
        ({"": 1}, "non-empty texts"),
        ({3: 1}, "non-empty texts"),
        ({"k" * (MAX_INDEXED_TEXT + 1): 1}, "keys longer than 256"),
        ({"k": {}}, "at least one operator"),
        ({"k": {"like": "x"}}, "unknown operator 'like'; use one of eq, in, gt, gte, lt, lte"),
        ({"k": {"in": "abc"}}, "`in` takes a list"),
        ({"k": {"in": []}}, "at least one value"),
        ({"k": {"gt": "soon"}}, "`gt` takes a number or a time"),
        ({"k": {"lte": True}}, "`lte` takes a number or a time"),
        ({"k": {"gte": datetime(2024, 1, 1)}}, "timezone-aware"),  # naive on purpose
        ({"k": float("nan")}, "finite number"),
        ({"k": {"lt": float("inf")}}, "finite number"),
        ({"k": 10**400}, "finite number"),
        ({"k": None}, "text, number, boolean or time"),
        ({"k": ["a", "b"]}, "text, number, boolean or time"),  # a list is `in`
        ({"k": {"in": [{"a": 1}]}}, "text, number, boolean or time"),
        ({"k": "x" * (MAX_INDEXED_TEXT + 1)}, "texts longer than 256 characters are not indexed"),
    ],
)
def test_bad_filters_are_store_errors_naming_the_key_and_what_is_allowed(filters: dict[Any, Any], said: str) -> None:
    with pytest.raises(StoreError, match=said.replace("(", r"\(").replace(")", r"\)")):
        metadata_conditions(filters)


def test_filters_must_be_a_mapping() -> None:
    with pytest.raises(StoreError, match="mapping of key to value"):
        metadata_conditions([("k", 1)])  # type: ignore[arg-type]  # wrong on purpose


@pytest.mark.parametrize("case", METADATA_CASES, ids=[case.name for case in METADATA_CASES])
def test_matches_is_the_meaning_the_store_contract_pins(case: MetadataCase) -> None:
    conditions = metadata_conditions(case.filters)
    selected = {node.memory_id for node in metadata_population() if node.user_name == "ann" and matches(node.meta, conditions)}
    if case.fields:  # the other filter fields narrow it further in the stores
        assert case.expected <= selected
    else:
        assert selected == case.expected


def test_conditions_on_one_key_hold_for_one_item() -> None:
    between = metadata_conditions({"n": {"gte": 3, "lt": 5}})
    assert matches({"n": [4]}, between) and matches({"n": [1, 4, 10]}, between)
    assert not matches({"n": [1, 10]}, between)  # each bound holds for some item, never both for one
    both = metadata_conditions({"tags": "a", "n": 1})
    assert matches({"tags": ["b", "a"], "n": [2, 1]}, both)
    assert conditions_by_key(between + both) == [("n", (*between, both[1])), ("tags", (both[0],))]


def test_matches_compares_by_kind() -> None:
    assert matches({"k": 3}, metadata_conditions({"k": 3.0})) and matches({"k": 3.0}, metadata_conditions({"k": 3}))
    assert not matches({"k": True}, metadata_conditions({"k": 1})) and not matches({"k": 1}, metadata_conditions({"k": True}))
    assert matches({"k": "true"}, metadata_conditions({"k": True})) and matches({"k": False}, metadata_conditions({"k": "false"}))
    assert not matches({"k": "3"}, metadata_conditions({"k": 3})) and not matches({"k": 3}, metadata_conditions({"k": "3"}))
    assert not matches({"k": "Music"}, metadata_conditions({"k": "music"}))
    assert matches({"k": "2024-10-01T09:00:00+08:00"}, metadata_conditions({"k": "2024-10-01T01:00:00Z"}))
    assert not matches({"k": "2024-10-01T01:00:00"}, metadata_conditions({"k": "2024-10-01T01:00:00Z"}))  # no zone: a text
    assert not matches({"k": "soon"}, metadata_conditions({"k": {"lt": "2024-10-01T00:00:00Z"}}))
    assert not matches({"k": "5"}, metadata_conditions({"k": {"gt": 1}}))


def test_missing_keys_nulls_nested_objects_and_odd_numbers_never_match() -> None:
    anything = metadata_conditions({"k": {"gt": -1e300}})
    for meta in (
        {},
        {"other": 1},
        {"k": None},
        {"k": {"n": 1}},
        {"k": [[1]]},
        {"k": float("inf")},
        {"k": float("nan")},
        {"k": 10**400},
    ):
        assert not matches(meta, anything), meta
    assert matches({"k": 10**20}, anything)


def test_checked_conditions_refuse_what_is_not_a_condition_and_normalise_what_is() -> None:
    for wrong in ({"k": 1}, "k", 3, [("k", "eq", 1)], [MetadataCondition("k", "like", 1)], [MetadataCondition("", "eq", 1)]):
        with pytest.raises(StoreError):
            checked_conditions(wrong)
    [checked] = checked_conditions([MetadataCondition("due", "gte", "2024-10-01T08:00:00+08:00")])
    assert checked == MetadataCondition("due", "gte", datetime(2024, 10, 1, tzinfo=UTC))
    conditions = metadata_conditions({"a": {"in": [1, "x", "2024-10-01"]}, "b": {"lt": datetime(2024, 1, 1, tzinfo=SHANGHAI)}})
    assert checked_conditions(conditions) == conditions  # what metadata_conditions makes passes unchanged
    assert checked_conditions(()) == ()


def test_indexed_values_give_one_row_per_scalar_value() -> None:
    meta = {
        "category": "music",
        "rating": 3,
        "score": 4.5,
        "pinned": True,
        "due": "2024-10-01T09:00:00+08:00",
        "day": "2024-10-01",
        "tags": ["a", "b", "a", 2, False],
        "none": None,
        "nested": {"x": 1},
        "inf": float("inf"),
        "huge": 10**400,
        "long": "x" * (MAX_INDEXED_TEXT + 1),
        "k" * (MAX_INDEXED_TEXT + 1): "long key",
        "edge": "y" * MAX_INDEXED_TEXT,
    }
    due = datetime(2024, 10, 1, 1, tzinfo=UTC).timestamp()
    assert indexed_values(meta) == [
        ("category", "music", None, None),
        ("rating", None, 3.0, None),
        ("score", None, 4.5, None),
        ("pinned", "true", None, None),
        ("due", "2024-10-01T09:00:00+08:00", None, due),
        ("day", "2024-10-01", None, datetime(2024, 10, 1, tzinfo=UTC).timestamp()),
        ("tags", "a", None, None),
        ("tags", "b", None, None),
        ("tags", None, 2.0, None),
        ("tags", "false", None, None),
        ("edge", "y" * MAX_INDEXED_TEXT, None, None),
    ]
    assert indexed_values({}) == []


def test_times_keep_their_microseconds_when_indexed() -> None:
    [(_, _, _, late)] = indexed_values({"t": "2024-12-24T23:59:59.999999-05:00"})
    [(_, _, _, early)] = indexed_values({"t": "2024-12-25T04:59:59.999998Z"})
    assert late > early and late == datetime(2024, 12, 25, 4, 59, 59, 999999, tzinfo=UTC).timestamp()


def test_keys_are_indexed_as_the_stored_json_has_them() -> None:
    assert indexed_values({1: "one", "two": 2}) == [("1", "one", None, None), ("two", None, 2.0, None)]
