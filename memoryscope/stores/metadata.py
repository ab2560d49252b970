"""Filters on a memory's metadata (`MemoryNode.meta`): equality, one-of, numeric and time ranges.

    metadata_conditions({"category": "music"})                      # equality
    metadata_conditions({"category": {"in": ["music", "sport"]}})   # one of
    metadata_conditions({"rating": {"gte": 3, "lt": 5}})            # numeric range
    metadata_conditions({"due": {"gte": "2024-10-01T00:00:00+08:00"}})  # time range

Every condition must hold (AND). A memory without the key fails the condition. A metadata value
that is a list matches when one of its items does (`{"tags": "music"}` finds `tags: ["music",
"jazz"]`), and the conditions on one key must hold for the same item: `{"due": {"gte": a,
"lt": b}}` finds a list holding a time between a and b, not one with a time before a and another
after b (as a range query on a list field means in Elasticsearch). Comparisons are typed:

- numbers compare as numbers (3 equals 3.0); booleans are not numbers (`True` does not equal 1)
  but the texts "true" and "false" (so a store may index them as texts);
- a range bound that is a `datetime` (timezone-aware) or an ISO 8601 text with a time zone
  compares against metadata values that are such texts (or datetimes), by instant, whatever zone
  each was written in; a date-only text (`2024-10-01`) is midnight UTC;
- texts compare exactly (case-sensitive); a filter value that is an ISO time (a text with a zone,
  or a date) is a time, so equality and one-of compare instants too.

What stores index (`indexed_values`): one `(key, text, number, time)` row per scalar value. Texts
and keys longer than `MAX_INDEXED_TEXT` (256) characters are not indexed, and a filter on such a
key or text is refused, so no filter can miss a memory it means: a chat message's neighbour
texts (`context`, `reply`, see `memoryscope.memory.AROUND_META`) are usually longer and cost the
index nothing, a short one is found like any other value. Numbers that are not finite (or too
large for a float) are neither indexed nor matched.

Stores translate conditions to their own query language; `matches` is the reference meaning
(what the store contract pins), used where a store filters in Python. A store checks the
conditions it is given with `checked_conditions`. `METADATA_INDEX_VERSION` names these indexing
rules: a store whose index was built under other rules builds it again (SQLite, when opened)
or asks for it to be filled (Elasticsearch, `memoryscope reembed`).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any

from memoryscope.errors import StoreError

__all__ = [
    "MetadataCondition",
    "METADATA_OPERATORS",
    "METADATA_INDEX_VERSION",
    "MAX_INDEXED_TEXT",
    "checked_conditions",
    "conditions_by_key",
    "metadata_conditions",
    "matches",
    "metadata_time",
    "indexed_values",
]

# the rules of `indexed_values`; change it whenever they change, so stores index again
METADATA_INDEX_VERSION = "1"
# longer keys and texts are not indexed (and cannot be filtered on): neighbour texts of a chat
# message, notes; every time text is shorter, and Elasticsearch's keyword terms stay small
MAX_INDEXED_TEXT = 256

# operator → what it means; `eq` and `in` take any scalar, the ranges numbers or times
METADATA_OPERATORS = {
    "eq": "equals",
    "in": "equals one of (a list)",
    "gt": "greater than",
    "gte": "greater than or equal to",
    "lt": "less than",
    "lte": "less than or equal to",
}
RANGE_OPERATORS = frozenset({"gt", "gte", "lt", "lte"})
Scalar = str | int | float | bool | datetime


@dataclass(frozen=True)
class MetadataCondition:
    """`meta[key] <op> value`. For `in`, `value` is a tuple of scalars; for a range, a number or
    an aware `datetime` (texts given as bounds are parsed to one when they are ISO times)."""

    key: str
    op: str
    value: Any

    @property
    def is_time(self) -> bool:
        """A range or equality on a time: compared by instant."""
        return isinstance(self.value, datetime)


def metadata_conditions(filters: Mapping[str, Any] | None) -> tuple[MetadataCondition, ...]:
    """`filters` (`{key: value}` or `{key: {operator: value, ...}}`) as checked conditions.

    A bad filter is a `StoreError` naming the key and what is allowed."""
    if not filters:
        return ()
    if not isinstance(filters, Mapping):
        raise StoreError(f"metadata filters must be a mapping of key to value or {{operator: value}}, got {filters!r}")
    conditions: list[MetadataCondition] = []
    for key, wanted in filters.items():
        _check_key(key)
        if isinstance(wanted, Mapping):
            if not wanted:
                raise StoreError(f"metadata filter {key!r}: give at least one operator ({_operator_names()})")
            conditions.extend(_condition(key, str(op), value) for op, value in wanted.items())
        else:
            conditions.append(_condition(key, "eq", wanted))
    return tuple(conditions)


def checked_conditions(conditions: Any) -> tuple[MetadataCondition, ...]:
    """`MemoryFilter.metadata` checked, as a store needs it: each a `MetadataCondition` with a
    known operator and a value of the right kind (ISO time texts as times). StoreError otherwise."""
    if isinstance(conditions, Mapping | str | bytes) or not isinstance(conditions, Iterable):
        raise StoreError(
            "MemoryFilter.metadata takes the conditions metadata_conditions({key: value, ...}) makes, "
            f"got {type(conditions).__name__} {conditions!r}"
        )
    checked = []
    for condition in conditions:
        if not isinstance(condition, MetadataCondition):
            raise StoreError(
                "MemoryFilter.metadata takes the conditions metadata_conditions({key: value, ...}) makes, "
                f"got {type(condition).__name__} {condition!r}"
            )
        _check_key(condition.key)
        checked.append(_condition(condition.key, condition.op, condition.value))
    return tuple(checked)


def conditions_by_key(conditions: Iterable[MetadataCondition]) -> list[tuple[str, tuple[MetadataCondition, ...]]]:
    """The conditions grouped by key, in the order keys first appear: each group must hold for
    one item of the key's value (one index entry)."""
    groups: dict[str, list[MetadataCondition]] = {}
    for condition in conditions:
        groups.setdefault(condition.key, []).append(condition)
    return [(key, tuple(group)) for key, group in groups.items()]


def matches(meta: Mapping[str, Any], conditions: Iterable[MetadataCondition]) -> bool:
    """Whether a memory with metadata `meta` passes every condition (those on one key by one item)."""
    for key, on_key in conditions_by_key(conditions):
        if key not in meta:
            return False
        stored = meta[key]
        values = stored if isinstance(stored, list | tuple) else (stored,)
        if not any(all(_holds(condition, value) for condition in on_key) for value in values):
            return False
    return True


def metadata_time(value: Any) -> datetime | None:
    """`value` as an aware UTC datetime when it is one or an ISO 8601 text of one (a date-only
    text is midnight UTC; a time without a zone is not a time here); else None."""
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc) if value.tzinfo is not None else None
    if not isinstance(value, str) or not 10 <= len(value) <= 40 or not value[:4].isdigit():
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        return None
    if len(value) == 10:  # 2024-10-01
        return datetime.combine(date.fromisoformat(value), datetime.min.time(), timezone.utc)
    return moment.astimezone(timezone.utc) if moment.tzinfo is not None else None


def indexed_values(meta: Mapping[str, Any]) -> list[tuple[str, str | None, float | None, float | None]]:
    """What a store indexes to answer conditions: `(key, text, number, epoch seconds)` per scalar
    value (per item of a list of scalars). `text` is set for texts and booleans ("true"/"false"),
    `number` for numbers (not booleans), the time for times (datetimes and ISO texts with a zone,
    or date-only texts). Nested mappings are not indexed."""
    if not all(isinstance(key, str) for key in meta):
        # as the store keeps it (JSON makes every key a text), so a memory read back matches the
        # same; a meta JSON cannot hold is refused by the store anyway
        with contextlib.suppress(TypeError, ValueError):
            meta = json.loads(json.dumps(dict(meta)))
    rows: list[tuple[str, str | None, float | None, float | None]] = []
    for key, stored in meta.items():
        if not isinstance(key, str) or len(key) > MAX_INDEXED_TEXT:
            continue
        for value in stored if isinstance(stored, list | tuple) else (stored,):
            if isinstance(value, bool):
                rows.append((key, "true" if value else "false", None, None))
            elif isinstance(value, int | float):
                number = _number(value)
                if number is not None:
                    rows.append((key, None, number, None))
            elif isinstance(value, str | datetime):
                text = value if isinstance(value, str) else value.isoformat()
                if len(text) <= MAX_INDEXED_TEXT:
                    moment = metadata_time(value)
                    rows.append((key, text, None, moment.timestamp() if moment is not None else None))
    return list(dict.fromkeys(rows))  # a value repeated in a list is one row


# -- parsing and meaning ---------------------------------------------------------------------


def _operator_names() -> str:
    return ", ".join(METADATA_OPERATORS)


def _check_key(key: Any) -> None:
    if not isinstance(key, str) or not key:
        raise StoreError(f"metadata filter keys must be non-empty texts, got {key!r}")
    if len(key) > MAX_INDEXED_TEXT:
        raise StoreError(f"metadata filter key {key[:40]!r}...: keys longer than {MAX_INDEXED_TEXT} characters are not indexed")


def _number(value: Any) -> float | None:
    """`value` as a finite float when it is a number (not a boolean); else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        return None
    return number if math.isfinite(number) else None


def _condition(key: str, op: str, value: Any) -> MetadataCondition:
    if op not in METADATA_OPERATORS:
        raise StoreError(f"metadata filter {key!r}: unknown operator {op!r}; use one of {_operator_names()}")
    if op == "in":
        if isinstance(value, str | bytes) or not isinstance(value, Iterable):
            raise StoreError(f"metadata filter {key!r}: `in` takes a list of values, got {value!r}")
        items = tuple(_as_time_or_self(_scalar(key, op, item)) for item in value)
        if not items:
            raise StoreError(f"metadata filter {key!r}: `in` needs at least one value")
        return MetadataCondition(key, op, items)
    scalar = _as_time_or_self(_scalar(key, op, value))
    if op in RANGE_OPERATORS:
        if isinstance(scalar, bool) or not isinstance(scalar, int | float | datetime):
            raise StoreError(
                f"metadata filter {key!r}: `{op}` takes a number or a time (a timezone-aware datetime or an "
                f"ISO 8601 text with a zone, e.g. 2024-10-01T00:00:00+00:00), got {value!r}"
            )
        return MetadataCondition(key, op, scalar)
    return MetadataCondition(key, op, scalar)


def _scalar(key: str, op: str, value: Any) -> Scalar:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise StoreError(f"metadata filter {key!r}: `{op}` needs a timezone-aware datetime, got naive {value!r}")
        return value.astimezone(timezone.utc)
    if isinstance(value, int | float) and not isinstance(value, bool) and _number(value) is None:
        raise StoreError(f"metadata filter {key!r}: `{op}` takes a finite number, got {value!r}")
    if isinstance(value, str) and len(value) > MAX_INDEXED_TEXT:
        raise StoreError(
            f"metadata filter {key!r}: texts longer than {MAX_INDEXED_TEXT} characters are not indexed, got one of {len(value)}"
        )
    if isinstance(value, str | int | float | bool):
        return value
    raise StoreError(
        f"metadata filter {key!r}: `{op}` takes a text, number, boolean or time, got {type(value).__name__} {value!r}"
    )


def _as_time_or_self(value: Scalar) -> Scalar:
    """A text that is an ISO time, as that time (compared by instant); anything else as it is."""
    moment = metadata_time(value) if isinstance(value, str) else None
    return moment if moment is not None else value


def _holds(condition: MetadataCondition, value: Any) -> bool:
    if condition.op == "in":
        return any(_equal(wanted, value) for wanted in condition.value)
    if condition.op == "eq":
        return _equal(condition.value, value)
    bound = condition.value
    if isinstance(bound, datetime):
        stored = metadata_time(value)
        if stored is None:
            return False
        return _compare(condition.op, stored.timestamp(), bound.timestamp())
    number = _number(value)
    if number is None:
        return False
    return _compare(condition.op, number, float(bound))


def _equal(wanted: Scalar, value: Any) -> bool:
    if isinstance(wanted, bool) or isinstance(value, bool):  # a boolean is the text "true"/"false"
        return _boolean_text(wanted) is not None and _boolean_text(wanted) == _boolean_text(value)
    if isinstance(wanted, int | float):
        number = _number(value)
        return number is not None and number == float(wanted)
    if isinstance(wanted, datetime):
        stored = metadata_time(value)
        return stored is not None and stored == wanted
    return isinstance(value, str) and value == wanted


def _boolean_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if value in ("true", "false") else None


def _compare(op: str, left: float, right: float) -> bool:
    if op == "gt":
        return left > right
    if op == "gte":
        return left >= right
    if op == "lt":
        return left < right
    return left <= right
