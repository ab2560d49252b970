"""What `fake_elasticsearch` knows of sorting and `_source` filtering: `sort` in the forms
Elasticsearch accepts, the `sort` values a hit shows, `search_after`, `_source` includes / excludes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memoryscope.testing._fake_es_search import QueryError, epoch_nanos, field_type, field_values

__all__ = ["filter_source", "parse_sort", "sort_key", "sort_values"]


def parse_sort(sort: Any) -> list[tuple[str, str]]:
    """`[("created_at", "desc"), ...]` from the forms Elasticsearch accepts."""
    out = []
    for item in sort if isinstance(sort, list) else [sort]:
        if isinstance(item, str):
            out.append((item, "desc" if item == "_score" else "asc"))
        elif isinstance(item, Mapping) and len(item) == 1:
            field, spec = next(iter(item.items()))
            order = spec.get("order", "asc") if isinstance(spec, Mapping) else spec
            if order not in ("asc", "desc"):
                raise QueryError(f"[sort] unknown order [{order}]")
            out.append((field, order))
        else:
            raise QueryError(f"[sort] malformed: {item!r}")
    return out


def sort_values(document: Mapping[str, Any], sort: Sequence[tuple[str, str]], mappings: Mapping[str, Any]) -> list[Any]:
    """What a hit's `sort` shows: epoch millis for `date`, epoch nanos for `date_nanos`, else the value."""
    values: list[Any] = []
    for field, _ in sort:
        kind = field_type(mappings, field)
        if kind is None:
            raise QueryError(f"No mapping found for [{field}] in order to sort on", "query_shard_exception")
        present = field_values(document, field)
        if not present:
            values.append(None)
        elif kind == "date":
            values.append(epoch_nanos(present[0], kind) // 1_000_000)
        elif kind == "date_nanos":
            values.append(epoch_nanos(present[0], kind))
        else:
            values.append(present[0])
    return values


def sort_key(values: Sequence[Any], sort: Sequence[tuple[str, str]]) -> tuple[Any, ...]:
    """A key that orders hits as `sort` asks, missing values last."""
    key: list[tuple[int, Any]] = []
    for value, (_, order) in zip(values, sort, strict=True):
        if value is None:
            key.append((1, 0))
        elif isinstance(value, (int, float)):
            key.append((0, -value if order == "desc" else value))
        else:
            key.append((0, _Reversed(value) if order == "desc" else value))
    return tuple(key)


class _Reversed:
    def __init__(self, value: Any):
        self.value = value

    def __lt__(self, other: _Reversed) -> bool:
        return bool(self.value > other.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


def filter_source(source: Mapping[str, Any], includes: Sequence[str] | None, excludes: Sequence[str] | None) -> dict[str, Any]:
    kept = {name: value for name, value in source.items() if includes is None or name in includes}
    return {name: value for name, value in kept.items() if not excludes or name not in excludes}
