"""Read paths of `elasticsearch_memory_store`: search, scan and the stored vectors.

Functions of the store (`ElasticsearchMemoryStore` calls them with itself and its `EsIndex`);
they reach the server through the index and use the store's public API. Dense search uses the
`knn` option, keyword search BM25 `match` on `keywords` (the query as `keyword_query` words),
and hybrid search fuses both lists in the client by reciprocal rank fusion. A document that does
not decode (another program wrote a value of the wrong kind) is left out of what a read
returns, with a warning naming it (`decoded`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memoryscope.errors import StoreError
from memoryscope.memory import MemoryNode
from memoryscope.stores import _es_queries as queries
from memoryscope.stores._es_index import EsIndex
from memoryscope.stores._es_metadata import require_filled
from memoryscope.stores.base import MemoryFilter, SearchMode
from memoryscope.stores.fusion import fuse
from memoryscope.text import keyword_query

if TYPE_CHECKING:
    from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore

__all__ = ["count", "decoded", "dense", "keyword", "scan", "search", "stored_vectors"]

_log = logging.getLogger(__name__)


def decoded(
    hits: Sequence[dict[str, Any]], score: Callable[[dict[str, Any]], float] | None = None
) -> list[tuple[MemoryNode, float]]:
    """`(node, score(hit))` of each hit (score 0.0 without `score`); a document that does not
    decode is left out with a warning, so one bad document never makes a user's memories unreadable."""
    nodes = []
    for hit in hits:
        try:
            nodes.append((queries.document_to_node(hit["_source"]), score(hit) if score else 0.0))
        except StoreError as error:
            _log.warning("%s; it is left out of what is read (document %r)", error, hit.get("_id"))
    return nodes


def search(
    store: ElasticsearchMemoryStore,
    index: EsIndex,
    memory_filter: MemoryFilter,
    query: str | None,
    vector: np.ndarray | None,
    mode: SearchMode | str | None,
    top_k: int,
) -> list[MemoryNode]:
    """Dense scores are cosines, keyword scores BM25 (higher is better), hybrid scores fused ranks.

    `mode` None: the `retrieve_mode` setting, else hybrid. Hybrid without a query (only
    `vector`) is dense ranking with fused scores.
    """
    queries.validate_filter(memory_filter)
    chosen = mode if mode is not None else (store.params.retrieve_mode or SearchMode.HYBRID)
    try:
        chosen = SearchMode(chosen)
    except ValueError:
        raise StoreError(f"unknown search mode {mode!r}; use one of {', '.join(m.value for m in SearchMode)}") from None
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise StoreError(f"search: top_k must be a positive integer, got {top_k!r}")
    if top_k > queries.MAX_RESULT_WINDOW:
        raise StoreError(f"search: top_k may be at most {queries.MAX_RESULT_WINDOW} with Elasticsearch, got {top_k}")
    if chosen is SearchMode.KEYWORD and not query:
        raise StoreError("keyword search needs a query text")
    if query is None and vector is None:
        raise StoreError(f"{chosen.value} search needs a query text or a query vector")
    if memory_filter.memory_ids == ():
        return []
    store.ensure_index()
    index.require_current_model("search")
    require_filled(index, memory_filter)
    if chosen is SearchMode.DENSE:
        return [node.with_score(score) for node, score in dense(store, index, memory_filter, query, vector, top_k)]
    if chosen is SearchMode.KEYWORD:
        return [node.with_score(score) for node, score in keyword(index, memory_filter, query or "", top_k)]
    depth = min(max(top_k, store.params.hybrid_candidates), queries.MAX_RESULT_WINDOW)
    found: dict[str, MemoryNode] = {}
    ranked_lists = [dense(store, index, memory_filter, query, vector, depth)]
    weights = [1.0]
    if query:
        ranked_lists.append(keyword(index, memory_filter, query, depth))
        weights.append(store.params.hybrid_keyword_weight)
    for ranked in ranked_lists:
        found.update((node.memory_id, node) for node, _ in ranked)
    lists = [[(node.memory_id, score) for node, score in ranked] for ranked in ranked_lists]
    fused = fuse(store.params.hybrid_fusion, lists, weights)
    return [found[memory_id].with_score(score) for memory_id, score in fused[:top_k]]


def dense(
    store: ElasticsearchMemoryStore,
    index: EsIndex,
    memory_filter: MemoryFilter,
    query: str | None,
    vector: np.ndarray | None,
    top_k: int,
) -> list[tuple[MemoryNode, float]]:
    if vector is not None:
        query_vector = index.unit_rows(vector, 1, "search vector")[0]
    else:
        query_vector = index.unit_rows(store.embedding_model.embed_queries([query or ""]), 1, "embedding model output")[0]
    if not query_vector.any():
        raise StoreError("dense search: the query vector is all zeros, which has no cosine similarity")
    candidates = store.params.num_candidates
    body = queries.knn_search_body(memory_filter, query_vector.tolist(), top_k=top_k, num_candidates=candidates)
    hits = index.search(body, "dense search")
    # the knn _score of cosine similarity is (1 + cosine) / 2; give back the cosine
    return decoded(hits, lambda hit: 2.0 * float(hit["_score"]) - 1.0)


def keyword(index: EsIndex, memory_filter: MemoryFilter, query: str, top_k: int) -> list[tuple[MemoryNode, float]]:
    terms = keyword_query(query)
    if not terms:
        return []  # no word to look for (only punctuation), as in the SQLite store
    body = queries.match_search_body(memory_filter, terms, top_k=top_k)
    return decoded(index.search(body, "keyword search"), lambda hit: float(hit["_score"]))


def scan(
    store: ElasticsearchMemoryStore, index: EsIndex, memory_filter: MemoryFilter, limit: int, offset: int, newest_first: bool
) -> list[MemoryNode]:
    """A page by `from`/`size` while `offset + limit` stays within 10,000 (the default
    `index.max_result_window`); deeper pages walk there with `search_after`, page by page
    (not a point-in-time snapshot: writes meanwhile may shift them)."""
    queries.validate_filter(memory_filter)
    if limit < 0 or offset < 0:
        raise StoreError(f"scan: limit and offset must not be negative, got limit={limit}, offset={offset}")
    if limit == 0 or memory_filter.memory_ids == ():
        return []
    store.ensure_index()
    require_filled(index, memory_filter)
    if offset + limit <= queries.MAX_RESULT_WINDOW:
        body = queries.scan_body(memory_filter, size=limit, offset=offset, newest_first=newest_first)
        return [node for node, _ in decoded(index.search(body, "scan"))]

    def skipped_page(size: int, last: list[Any] | None) -> dict[str, Any]:  # only the sort values are needed
        return queries.scan_body(memory_filter, size=size, newest_first=newest_first, search_after=last, with_source=False)

    def page(size: int, last: list[Any] | None) -> dict[str, Any]:
        return queries.scan_body(memory_filter, size=size, newest_first=newest_first, search_after=last)

    after: list[Any] | None = None
    skipped = 0
    for hits in index.pages(skipped_page, offset, "scan"):
        skipped += len(hits)
        after = list(hits[-1]["sort"])
    if skipped < offset:
        return []
    return [node for hits in index.pages(page, limit, "scan", after=after) for node, _ in decoded(hits)]


def count(store: ElasticsearchMemoryStore, index: EsIndex, memory_filter: MemoryFilter) -> int:
    queries.validate_filter(memory_filter)
    if memory_filter.memory_ids == ():
        return 0
    store.ensure_index()
    require_filled(index, memory_filter)
    return index.count("count", queries.count_body(memory_filter))


def stored_vectors(store: ElasticsearchMemoryStore, index: EsIndex, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
    """The stored vectors of the memories that have one, by memory id."""
    ids = list(dict.fromkeys(memory_ids))
    if not ids:
        return {}
    store.ensure_index()
    docs = index.mget(ids, "reading stored vectors", source_includes=[queries.VECTOR_FIELD])
    return {
        doc["_id"]: np.asarray(doc["_source"][queries.VECTOR_FIELD], dtype=np.float32)
        for doc in docs
        if doc.get("found") and doc.get("_source", {}).get(queries.VECTOR_FIELD) is not None
    }
