"""Request bodies of the Elasticsearch store, as pure functions (Elasticsearch 8.x REST API).

Kept apart from the store so tests can pin every body the store sends. Nothing here talks to
a server or imports `elasticsearch`. Field names are the `MemoryNode` field names, plus `vector`.

Time fields: `created_at` and `updated_at` are `date_nanos` so that ordering and paging by
creation time keep the microseconds Python gives them (a `date` field keeps milliseconds, which
would tie memories written in the same millisecond). `date_nanos` cannot hold times before 1970,
which the times a memory was written never are; `event_time` (which can be a birthday in 1950),
`message_time` and `last_accessed_at` are plain `date` fields, exact to the millisecond in range
filters. `_source` keeps every value exactly as written either way.

Keyword search: `keywords` holds `memoryscope.text.keyword_text(node)` (content, key and a chat
message's speaker, context and reply; tokenised, jieba-segmented and stemmed by MemoryScope,
space-joined), indexed with the `whitespace` analyzer, so Elasticsearch sees exactly the words
the SQLite store indexes; a query is `keyword_query(text)`, matched with BM25. The field stays
in `_source` (a partial `_update` re-indexes a document from its `_source`, and would drop a
field kept out of it) but reads leave it out (`SOURCE_SHOWN`). `_meta.keyword_text_version`
records that every document has the field as the current `keyword_text` makes it.

Metadata filters: `meta_index`, a `nested` field of the values of `meta` (see `_es_metadata`).

Ranker terms: `rank_terms` holds `memoryscope.text.rank_terms(node)`, parsed once when the memory
is written, kept in `_source` only (a disabled object: never parsed or indexed) and handed back on
`MemoryNode.rank_terms`, so the ranker parses no memory per query. `_meta.rank_terms_version`
records that every document has it as the current `rank_terms` makes it; a document without it
is ranked as before (the ranker parses it).

Schema versions: 1 had no `keywords` field; 2 adds it; 3 adds `meta_index`; 4 adds `rank_terms`. An older index is
upgraded when opened (`_es_keywords.upgrade_mapping_body`: the fields are added, nothing is
lost); its older documents get them from `fill_keywords` (`memoryscope reembed`), or whenever
they are written again.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memoryscope.errors import StoreError
from memoryscope.memory import MemoryNode
from memoryscope.stores._es_metadata import META_INDEX_FIELD, META_INDEX_MAPPING, meta_index_entries, metadata_clauses
from memoryscope.stores.base import MemoryFilter, TimeRange
from memoryscope.stores.metadata import METADATA_INDEX_VERSION
from memoryscope.text import KEYWORD_TEXT_VERSION, keyword_text, rank_terms

__all__ = [
    "SCHEMA_VERSION",
    "UPGRADABLE_SCHEMA_VERSIONS",
    "VECTOR_FIELD",
    "KEYWORDS_FIELD",
    "KEYWORDS_MAPPING",
    "RANK_TERMS_FIELD",
    "RANK_TERMS_MAPPING",
    "SOURCE_SHOWN",
    "MAX_RESULT_WINDOW",
    "MAX_NUM_CANDIDATES",
    "index_body",
    "index_meta",
    "filter_clauses",
    "filter_query",
    "knn_search_body",
    "match_search_body",
    "scan_body",
    "count_body",
    "iter_body",
    "user_counts_body",
    "alias_swap_body",
    "delete_by_query_body",
    "update_body",
    "bulk_index_lines",
    "bulk_delete_lines",
    "node_to_document",
    "document_to_node",
    "validate_filter",
    "stored_vector",
    "drop_empty_vector",
]

SCHEMA_VERSION = 4
UPGRADABLE_SCHEMA_VERSIONS = (1, 2, 3)  # opened indices of these versions are brought up to SCHEMA_VERSION
VECTOR_FIELD = "vector"
KEYWORDS_FIELD = "keywords"
# pre-tokenised by MemoryScope: split on spaces only, nothing lower-cased or stemmed again
KEYWORDS_MAPPING = {"type": "text", "analyzer": "whitespace"}
RANK_TERMS_FIELD = "rank_terms"
# read back with the memory, never searched: kept in `_source` only (a disabled field takes a string)
RANK_TERMS_MAPPING = {"type": "object", "enabled": False}
MAX_RESULT_WINDOW = 10_000  # the index.max_result_window default: `from + size` may not exceed it
MAX_NUM_CANDIDATES = 10_000  # the knn option's upper bound for num_candidates

KEYWORD_FIELDS = (
    "memory_id",
    "user_name",
    "target_name",
    "workspace",
    "memory_type",
    "status",
    "superseded_by",
    "key",
    "source_message_ids",
)
NANOSECOND_DATE_FIELDS = ("created_at", "updated_at")
DATE_FIELDS = ("event_time", "message_time", "last_accessed_at")
TIME_RANGE_FIELDS = ("event_time", "message_time", "created_at", "updated_at")
SOURCE_SHOWN = {"excludes": [VECTOR_FIELD, KEYWORDS_FIELD, META_INDEX_FIELD]}  # what reads return of `_source`


def index_body(*, embedding_model: str, dimension: int, analyzer: str) -> dict[str, Any]:
    """The `PUT /<index>` body: an explicit, strict mapping and the `_meta` that names the model."""
    properties: dict[str, Any] = {name: {"type": "keyword"} for name in KEYWORD_FIELDS}
    # `key` (observation keywords, insight attribute) as text too, for queries of your own
    properties["key"] = {"type": "keyword", "fields": {"text": {"type": "text", "analyzer": analyzer}}}
    properties.update(
        {
            "content": {"type": "text", "analyzer": analyzer},
            "value": {"type": "text", "analyzer": analyzer},
            KEYWORDS_FIELD: dict(KEYWORDS_MAPPING),
            RANK_TERMS_FIELD: dict(RANK_TERMS_MAPPING),
            "reflected": {"type": "boolean"},
            "updated": {"type": "boolean"},
            "access_count": {"type": "integer"},
            **{name: {"type": "date_nanos"} for name in NANOSECOND_DATE_FIELDS},
            **{name: {"type": "date"} for name in DATE_FIELDS},
            "meta": {"type": "object", "enabled": False},  # kept in _source, never indexed
            META_INDEX_FIELD: copy.deepcopy(META_INDEX_MAPPING),  # what metadata filters read
            # float HNSW, not the int8 quantisation 8.14+ picks by default: scores stay exact cosines
            VECTOR_FIELD: {
                "type": "dense_vector",
                "dims": dimension,
                "index": True,
                "similarity": "cosine",
                "index_options": {"type": "hnsw"},
            },
        }
    )
    meta = index_meta(
        embedding_model=embedding_model, dimension=dimension, keywords_filled=True, metadata_filled=True, rank_terms_filled=True
    )
    # strict: a document with a field the mapping does not know is rejected, not silently mapped
    return {"mappings": {"dynamic": "strict", "_meta": meta, "properties": properties}}


def index_meta(
    *, embedding_model: str, dimension: int, keywords_filled: bool, metadata_filled: bool, rank_terms_filled: bool = False
) -> dict[str, Any]:
    """The index's `_meta`; `keywords_filled`: every document has the current `keywords`;
    `metadata_filled`: every document has its `meta_index` objects; `rank_terms_filled`: every
    document has the current `rank_terms`."""
    meta: dict[str, Any] = {"embedding_model": embedding_model, "dimension": dimension, "schema_version": SCHEMA_VERSION}
    if keywords_filled:
        meta["keyword_text_version"] = KEYWORD_TEXT_VERSION
    if metadata_filled:
        meta["metadata_index_version"] = METADATA_INDEX_VERSION
    if rank_terms_filled:
        meta["rank_terms_version"] = KEYWORD_TEXT_VERSION  # `rank_terms` parses as `keyword_text` does
    return meta


def _time(value: datetime) -> str:
    if value.tzinfo is None:
        raise StoreError(f"time range bounds must be timezone-aware, got naive {value!r}")
    return value.isoformat()


def filter_clauses(memory_filter: MemoryFilter) -> list[dict[str, Any]]:
    """Filter clauses for a bool query; the first is always the user's term."""
    clauses: list[dict[str, Any]] = [{"term": {"user_name": memory_filter.user_name}}]
    if memory_filter.target_name is not None:
        clauses.append({"term": {"target_name": memory_filter.target_name}})
    if memory_filter.workspace is not None:
        clauses.append({"term": {"workspace": memory_filter.workspace}})
    if memory_filter.memory_types is not None:
        clauses.append({"terms": {"memory_type": [kind.value for kind in memory_filter.memory_types]}})
    if memory_filter.status is not None:
        clauses.append({"term": {"status": memory_filter.status.value}})
    if memory_filter.reflected is not None:
        clauses.append({"term": {"reflected": memory_filter.reflected}})
    if memory_filter.updated is not None:
        clauses.append({"term": {"updated": memory_filter.updated}})
    if memory_filter.memory_ids is not None:
        clauses.append({"terms": {"memory_id": list(memory_filter.memory_ids)}})
    time_range = memory_filter.time_range
    if time_range is not None:
        if time_range.field not in TIME_RANGE_FIELDS:
            raise StoreError(f"cannot filter on time field {time_range.field!r}; known: {', '.join(TIME_RANGE_FIELDS)}")
        bounds: dict[str, str] = {}
        if time_range.start is not None:
            bounds["gte"] = _time(time_range.start)
        if time_range.end is not None:
            bounds["lt"] = _time(time_range.end)
        # open at both ends: any node that has this time (as in SQLite, a missing time never matches)
        clauses.append({"range": {time_range.field: bounds}} if bounds else {"exists": {"field": time_range.field}})
    if memory_filter.metadata:  # only then: a filter without conditions is the same query as before
        clauses += metadata_clauses(memory_filter.metadata)
    return clauses


def filter_query(memory_filter: MemoryFilter) -> dict[str, Any]:
    """A query matching exactly the memories the filter allows (no scoring)."""
    return {"bool": {"filter": filter_clauses(memory_filter)}}


def knn_search_body(memory_filter: MemoryFilter, vector: Sequence[float], *, top_k: int, num_candidates: int) -> dict[str, Any]:
    """Approximate kNN (the `knn` search option), pre-filtered so only the user's memories compete."""
    candidates = min(max(num_candidates, top_k), MAX_NUM_CANDIDATES)
    return {
        "knn": {
            "field": VECTOR_FIELD,
            "query_vector": [float(value) for value in vector],
            "k": top_k,
            "num_candidates": candidates,
            "filter": filter_query(memory_filter),
        },
        "size": top_k,
        "_source": SOURCE_SHOWN,
    }


def match_search_body(memory_filter: MemoryFilter, terms: str, *, top_k: int) -> dict[str, Any]:
    """BM25 over `keywords` for `terms` (`keyword_query` of the query: any of them may match),
    restricted by the same filter."""
    match = {"match": {KEYWORDS_FIELD: {"query": terms, "operator": "or"}}}
    return {
        "query": {"bool": {"must": [match], "filter": filter_clauses(memory_filter)}},
        "size": top_k,
        "_source": SOURCE_SHOWN,
    }


def scan_body(
    memory_filter: MemoryFilter,
    *,
    size: int,
    offset: int = 0,
    newest_first: bool = True,
    search_after: Sequence[Any] | None = None,
    with_source: bool = True,
) -> dict[str, Any]:
    """One page ordered by `created_at`, then `memory_id` (unique, so pages never overlap).

    `from + size` may not pass 10,000 (`index.max_result_window`); deeper pages continue with
    `search_after` (the previous page's last `sort` values) and `offset` 0.
    """
    order = "desc" if newest_first else "asc"
    body: dict[str, Any] = {
        "query": filter_query(memory_filter),
        "sort": [{"created_at": {"order": order}}, {"memory_id": {"order": order}}],
        "size": size,
        "track_total_hits": False,
        "_source": SOURCE_SHOWN if with_source else False,
    }
    if offset:
        body["from"] = offset
    if search_after is not None:
        body["search_after"] = list(search_after)
    return body


def count_body(memory_filter: MemoryFilter) -> dict[str, Any]:
    return {"query": filter_query(memory_filter)}


def iter_body(*, size: int, user_name: str | None = None, after_id: str | None = None) -> dict[str, Any]:
    """One page of every memory (or one user's) by ascending `memory_id`, after `after_id`.

    The one read not scoped to a user: export, migration and re-embedding walk the whole index.
    """
    query: dict[str, Any] = {"match_all": {}} if user_name is None else {"bool": {"filter": [{"term": {"user_name": user_name}}]}}
    body: dict[str, Any] = {
        "query": query,
        "sort": [{"memory_id": {"order": "asc"}}],
        "size": size,
        "track_total_hits": False,
        "_source": SOURCE_SHOWN,
    }
    if after_id is not None:
        body["search_after"] = [after_id]
    return body


def user_counts_body(*, size: int, after_user: str | None = None) -> dict[str, Any]:
    """A `composite` aggregation of memories per `user_name`, one page of `size` users after `after_user`."""
    composite: dict[str, Any] = {"size": size, "sources": [{"user_name": {"terms": {"field": "user_name"}}}]}
    if after_user is not None:
        composite["after"] = {"user_name": after_user}
    return {"size": 0, "track_total_hits": False, "aggs": {"users": {"composite": composite}}}


def alias_swap_body(*, alias: str, old_index: str, new_index: str) -> dict[str, Any]:
    """`POST /_aliases`: delete `old_index` and point `alias` at `new_index`, in one atomic step.

    Works whether `alias` is already an alias of `old_index` (deleting the index drops its
    aliases) or is the name of `old_index` itself: Elasticsearch runs `remove_index` before the
    other actions, so the name is free when the alias is added.
    """
    return {"actions": [{"remove_index": {"index": old_index}}, {"add": {"index": new_index, "alias": alias}}]}


def delete_by_query_body(memory_filter: MemoryFilter) -> dict[str, Any]:
    return {"query": filter_query(memory_filter)}


def update_body(changed: Mapping[str, Any]) -> dict[str, Any]:
    """A partial-document update: only the changed fields (already serialised) are sent."""
    return {"doc": dict(changed)}


def node_to_document(node: MemoryNode, vector: Sequence[float] | None = None) -> dict[str, Any]:
    """The `_source` of a node: its fields (times as ISO 8601 with zone), its `keywords`
    (`keyword_text`) and `rank_terms`, plus `vector` when given."""
    document = node.to_dict()
    document.pop("score", None)  # a search result, not a stored field
    try:
        json.dumps(document["meta"])
    except (TypeError, ValueError) as error:
        raise StoreError(f"memory {node.memory_id!r}: meta must be JSON-serialisable: {error}") from None
    document[KEYWORDS_FIELD] = keyword_text(node)
    document[RANK_TERMS_FIELD] = rank_terms(node)
    entries = meta_index_entries(node.meta)
    if entries:  # most memories have none: no empty list in every document
        document[META_INDEX_FIELD] = entries
    if vector is not None:
        document[VECTOR_FIELD] = [float(value) for value in vector]
    return document


def document_to_node(source: Mapping[str, Any], score: float | None = None) -> MemoryNode:
    """The node of a document's `_source`, carrying its `rank_terms` when the document has them
    (as text); a StoreError naming the memory and the field when a value is of the wrong kind
    (another program wrote it), instead of a TypeError later."""
    fields = dict(source)
    terms = fields.pop(RANK_TERMS_FIELD, None)
    fields.pop(VECTOR_FIELD, None)
    fields.pop(KEYWORDS_FIELD, None)
    fields.pop(META_INDEX_FIELD, None)
    fields["score"] = score
    try:
        node = MemoryNode.from_dict(fields)
        wrong = next((name for name, kind in _FIELD_KINDS.items() if type(getattr(node, name)) is not kind), None)
    except (TypeError, ValueError, KeyError) as error:
        wrong, problem = next(((name, str(error)) for name in _CHECKED if _fails(name, fields.get(name))), ("?", str(error)))
    else:
        if wrong is None:
            if type(terms) is str:  # else (none yet, or not text): the ranker parses the memory
                object.__setattr__(node, "rank_terms", terms)  # not a field: see `MemoryNode`
            return node
        problem = f"not {_FIELD_KINDS[wrong].__name__}"
    shown = repr(fields.get(wrong))[:80]
    raise StoreError(f"memory {fields.get('memory_id')!r} is damaged: field {wrong} holds {shown}, {problem}")


_FIELD_KINDS: dict[str, type] = {
    **dict.fromkeys(("memory_id", "user_name", "target_name", "workspace", "content", "key", "value", "superseded_by"), str),
    **{"access_count": int, "reflected": bool, "updated": bool, "meta": dict},
}
_CHECKED = ("memory_type", "status", *NANOSECOND_DATE_FIELDS, *DATE_FIELDS)


def _fails(name: str, value: Any) -> bool:
    """Whether `MemoryNode.from_dict` would fail on this value of the enum or time field `name`."""
    try:
        MemoryNode.from_dict({"user_name": "", "content": "", name: value})
    except (TypeError, ValueError):
        return True
    return False


def bulk_index_lines(documents: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`_bulk` NDJSON lines: an `index` action (create or replace, `_id` = memory_id) per document."""
    lines: list[dict[str, Any]] = []
    for document in documents:
        lines.append({"index": {"_id": document["memory_id"]}})
        lines.append(dict(document))
    return lines


def bulk_delete_lines(memory_ids: Sequence[str]) -> list[dict[str, Any]]:
    return [{"delete": {"_id": memory_id}} for memory_id in memory_ids]


def validate_filter(memory_filter: MemoryFilter) -> None:
    """StoreError for a filter no request could honour (wrong types, unknown time field, naive times)."""
    if not isinstance(memory_filter, MemoryFilter):
        raise StoreError(f"expected a MemoryFilter, got {type(memory_filter).__name__}")
    if not isinstance(memory_filter.user_name, str):
        raise StoreError(f"MemoryFilter.user_name must be a string, got {memory_filter.user_name!r}")
    time_range = memory_filter.time_range
    if time_range is not None and not isinstance(time_range, TimeRange):
        raise StoreError(f"MemoryFilter.time_range must be a TimeRange, got {type(time_range).__name__}")
    filter_clauses(memory_filter)  # raises StoreError on an unknown time field or a naive bound


def stored_vector(row: np.ndarray) -> list[float] | None:
    """The vector to index, or None for an all-zero row (cosine fields reject zero vectors; such a
    memory is stored without one and found by keyword search and scans only)."""
    return row.astype(float).tolist() if row.any() else None


def drop_empty_vector(document: dict[str, Any]) -> dict[str, Any]:
    """`document` without a `vector: None` (a whole-document write simply leaves the field out)."""
    return {name: value for name, value in document.items() if not (name == VECTOR_FIELD and value is None)}
