"""Metadata filters in `elasticsearch_memory_store`: the `meta_index` field and its `nested` queries.

`meta` is kept in `_source` but never indexed (`enabled: false`: any JSON, no mapping growth).
Filters read `meta_index` instead, a `nested` field with one object per value
`metadata.indexed_values` takes from `meta` (no object when a memory has none)::

    "meta_index": {"type": "nested", "properties": {"key": {"type": "keyword"},
        "text": {"type": "keyword"}, "number": {"type": "double"}, "time": {"type": "double"}}}

`text` holds texts and booleans ("true"/"false"), `number` numbers, `time` a time as UTC epoch
seconds. A `double`, not a `date`: a `date` keeps milliseconds and `date_nanos` nothing before
1970, while `metadata.matches` compares times to the microsecond, birthdays in 1950 included.

Each object is a hidden document of its own, so the conditions on one key are one `nested`
query whose `bool.filter` holds the key's `term` and every value test: they hold for one value
together, as `matches` says. Each key's query goes into the memory filter's `bool.filter`
(`_es_queries.filter_clauses`), and so into the `knn` pre-filter, the keyword query, scans,
counts and `_delete_by_query` alike.

Writes send `meta_index` with every document (`_es_queries.node_to_document`). An index from
before the field gets it when opened (`_es_keywords.upgrade_index`); its older documents get
their objects from `memoryscope reembed` (`_es_keywords.fill_keywords`, in place) or whenever
they are written again. Until `_meta.metadata_index_version` records that every document has
them, a read with metadata conditions is refused (`require_filled`) rather than missing them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memoryscope.errors import StoreError
from memoryscope.stores.base import MemoryFilter
from memoryscope.stores.metadata import (
    METADATA_INDEX_VERSION,
    MetadataCondition,
    checked_conditions,
    conditions_by_key,
    indexed_values,
)

if TYPE_CHECKING:
    from memoryscope.stores._es_index import EsIndex

__all__ = [
    "META_INDEX_FIELD",
    "META_INDEX_MAPPING",
    "metadata_clauses",
    "meta_index_entries",
    "metadata_filled",
    "require_filled",
]

META_INDEX_FIELD = "meta_index"
META_INDEX_MAPPING: dict[str, Any] = {
    "type": "nested",
    "properties": {
        "key": {"type": "keyword"},
        "text": {"type": "keyword"},
        "number": {"type": "double"},
        "time": {"type": "double"},
    },
}
_COLUMNS = ("key", "text", "number", "time")
FILL_COMMAND = "memoryscope reembed --config CONFIG"


def meta_index_entries(meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The `meta_index` objects of a memory's `meta` (only the columns a value sets)."""
    return [
        {column: value for column, value in zip(_COLUMNS, row, strict=True) if value is not None} for row in indexed_values(meta)
    ]


def metadata_clauses(conditions: Sequence[MetadataCondition]) -> list[dict[str, Any]]:
    """One `nested` query per key of `conditions` (checked: a bad one is a StoreError)."""
    clauses = []
    for key, on_key in conditions_by_key(checked_conditions(conditions)):
        tests = [{"term": {f"{META_INDEX_FIELD}.key": key}}, *(_value_query(condition) for condition in on_key)]
        clauses.append({"nested": {"path": META_INDEX_FIELD, "query": {"bool": {"filter": tests}}}})
    return clauses


def _value_query(condition: MetadataCondition) -> dict[str, Any]:
    if condition.op not in ("eq", "in"):
        column, bound = _indexed(condition.value)
        return {"range": {column: {condition.op: bound}}}
    wanted = condition.value if condition.op == "in" else (condition.value,)
    by_column: dict[str, list[Any]] = {}
    for value in wanted:
        column, indexed = _indexed(value)
        by_column.setdefault(column, []).append(indexed)
    tests = [
        {"term": {column: values[0]}} if len(values) == 1 else {"terms": {column: values}} for column, values in by_column.items()
    ]
    return tests[0] if len(tests) == 1 else {"bool": {"should": tests, "minimum_should_match": 1}}


def _indexed(value: Any) -> tuple[str, Any]:
    """The `meta_index` field a filter value is looked up in, and the value as it is indexed."""
    if isinstance(value, bool):
        return f"{META_INDEX_FIELD}.text", "true" if value else "false"
    if isinstance(value, int | float):
        return f"{META_INDEX_FIELD}.number", float(value)
    if isinstance(value, datetime):
        return f"{META_INDEX_FIELD}.time", value.timestamp()
    return f"{META_INDEX_FIELD}.text", value


def metadata_filled(mapping: Mapping[str, Any]) -> bool:
    """Whether an index's mapping (its `mappings` object) records that every document has its
    `meta_index` objects as the current rules make them."""
    meta = mapping.get("_meta") or {}
    return META_INDEX_FIELD in (mapping.get("properties") or {}) and meta.get("metadata_index_version") == METADATA_INDEX_VERSION


def require_filled(index: EsIndex, memory_filter: MemoryFilter) -> None:
    """Refuse metadata conditions while some documents may lack their `meta_index` objects (an
    index from before the field, not filled yet); the mapping is read again first, in case
    another process has filled it since."""
    if not memory_filter.metadata or index.metadata_filled:
        return
    with index.calling("reading the mapping"):
        mappings = index.client.indices.get_mapping(index=index.name).body
    if all(metadata_filled(entry.get("mappings") or {}) for entry in mappings.values()):
        index.metadata_filled = True
        return
    raise StoreError(index.where(
        f"memories written by an older MemoryScope have no {META_INDEX_FIELD!r} objects yet, so a metadata filter "
        f"would miss them: run `{FILL_COMMAND}` once to fill them (in place; nothing is embedded again)"
    ))  # fmt: skip
