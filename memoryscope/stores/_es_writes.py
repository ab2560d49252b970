"""The write paths of `elasticsearch_memory_store`: bulk upsert and delete, one-document update.

Functions of the store (`ElasticsearchMemoryStore` calls them with itself and its `EsIndex`);
they reach the server through the index and use the store's public API. Bulk writes are not
atomic: a partly failed batch raises `BulkWriteError` naming what failed and what was written.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from memoryscope.errors import StoreError
from memoryscope.history import ChangeSource, changes_of_delete, changes_of_write
from memoryscope.memory import MemoryNode, embedding_text, utc_now
from memoryscope.stores import _es_history as es_history
from memoryscope.stores import _es_queries as queries
from memoryscope.stores._es_index import EsIndex, version_guard
from memoryscope.stores._es_metadata import META_INDEX_FIELD, require_filled
from memoryscope.stores.base import MemoryFilter, conflict_error, conflicting, required_ids, unmet_requirements

if TYPE_CHECKING:
    from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore

__all__ = ["BULK_BATCH", "UPDATABLE", "BulkWriteError", "delete", "delete_by_filter", "update", "upsert"]

BULK_BATCH = 500  # documents per _bulk request (~2 MB with 384-d vectors)
UPDATABLE = frozenset(MemoryNode.__dataclass_fields__) - {"memory_id", "score"}


class BulkWriteError(StoreError):
    """Some items of a bulk write failed; the others were written (Elasticsearch bulk is not atomic)."""

    def __init__(self, message: str, failed: dict[str, str], written: list[str]):
        self.failed = failed  # memory_id -> "error_type: reason"
        self.written = written  # memory ids that did land
        super().__init__(message)


def upsert(
    store: ElasticsearchMemoryStore,
    index: EsIndex,
    nodes: Sequence[MemoryNode],
    vectors: np.ndarray | None,
    requires: Mapping[str, Collection[str]] | None = None,
    change: ChangeSource | None = None,
    expected: Mapping[str, datetime | None] | None = None,
) -> list[str]:
    """Index the nodes (create or replace). Not atomic: see `BulkWriteError`.

    With `requires`, the required memories are read before the write and again after it: a node
    whose requirements are gone before is not sent, and one whose requirements went while it
    was written is deleted again (Elasticsearch has no transaction to hold both in one step).

    With `expected`, each node it names is written only as it was read: the stored `updated_at`
    is compared first (a mismatch writes nothing), and the write itself is guarded by the version
    read (`if_seq_no`; a `create` for a memory expected absent), so a change in between fails
    that node with a conflict (`StoreConflict`).
    """
    nodes = list(nodes)
    for node in nodes:
        if not isinstance(node, MemoryNode):
            raise StoreError(f"upsert takes MemoryNode objects, got {type(node).__name__}")
    given = None if vectors is None else index.unit_rows(vectors, len(nodes), "upsert vectors")
    # a memory_id repeated in one batch: the last one wins, as if upserted one after another
    keep = sorted({node.memory_id: index for index, node in enumerate(nodes)}.values())
    nodes = [nodes[index] for index in keep]
    if not nodes:
        return []
    store.ensure_index()
    index.require_current_model("upsert")
    rows = given[keep] if given is not None else stored_or_fresh_vectors(store, index, nodes)
    dropped = unmet_requirements(requires, present_ids(index, required_ids(requires))) if requires else set()
    documents = [
        queries.node_to_document(node, queries.stored_vector(row))
        for node, row in zip(nodes, rows, strict=True)
        if node.memory_id not in dropped
    ]
    written = [node for node in nodes if node.memory_id not in dropped]
    before = {node.memory_id: node for node in store.get([node.memory_id for node in written])}
    if expected:
        _guarded_index(index, documents, expected)
    else:
        _bulk_index(index, documents)
    es_history.record(index, changes_of_write(before, written, change))
    if requires:
        late = unmet_requirements(requires, present_ids(index, required_ids(requires))) - dropped
        if late:
            delete(store, index, sorted(late))
            dropped |= late
    return [node.memory_id for node in nodes if node.memory_id in dropped]


def _guarded_index(index: EsIndex, documents: list[dict[str, Any]], expected: Mapping[str, datetime | None]) -> None:
    """Index `documents` as compare-and-set writes (one bulk: compare-and-set is for a few memories)."""
    ids = list(dict.fromkeys([*(document["memory_id"] for document in documents), *expected]))
    docs = {doc["_id"]: doc for doc in index.mget(ids, "reading the memories to compare") if doc.get("found")}
    stored = {memory_id: queries.document_to_node(doc["_source"]) for memory_id, doc in docs.items()}
    wrong = conflicting(expected, stored)
    if wrong:
        raise conflict_error(wrong, index.where("compare-and-set"))
    lines: list[dict[str, Any]] = []
    for document in documents:
        memory_id = document["memory_id"]
        current = docs.get(memory_id)
        guard = {"_id": memory_id, **version_guard(current)} if current is not None else {"_id": memory_id}
        lines += [{"index": guard} if current is not None else {"create": guard}, dict(document)]
    results = index.bulk_results([document["memory_id"] for document in documents], lines, "compare-and-set upsert")
    failed = index.failures(results)
    if failed:
        raise conflict_error(sorted(failed), index.where("compare-and-set"))


def present_ids(index: EsIndex, memory_ids: Sequence[str]) -> set[str]:
    """Which of `memory_ids` exist now."""
    if not memory_ids:
        return set()
    docs = index.mget(memory_ids, "checking which memories exist", source=False)
    return {doc["_id"] for doc in docs if doc.get("found")}


def _bulk_index(index: EsIndex, documents: list[dict[str, Any]]) -> None:
    failed: dict[str, str] = {}
    written: list[str] = []
    for start in range(0, len(documents), BULK_BATCH):
        batch = documents[start : start + BULK_BATCH]
        ids = [document["memory_id"] for document in batch]
        try:
            results = index.bulk_results(ids, queries.bulk_index_lines(batch), "bulk upsert")
        except StoreError as error:
            if not written:
                raise
            raise StoreError(f"{error}; {len(written)} memories of earlier bulk requests were written") from None
        failed_now = index.failures(results)
        failed.update(failed_now)
        written += [memory_id for memory_id in ids if memory_id not in failed_now]
    if failed:
        raise bulk_error(index, "bulk upsert", failed, written)


def stored_or_fresh_vectors(store: ElasticsearchMemoryStore, index: EsIndex, nodes: Sequence[MemoryNode]) -> np.ndarray:
    """The stored vector where the stored content is the same, else a fresh passage vector."""
    ids = [node.memory_id for node in nodes]
    docs = index.mget(ids, "reading stored vectors", source_includes=["content", queries.VECTOR_FIELD])
    stored = {doc["_id"]: doc["_source"] for doc in docs if doc.get("found")}
    rows = np.zeros((len(nodes), store.dimension), dtype=np.float32)
    missing: list[int] = []
    for position, node in enumerate(nodes):
        source = stored.get(node.memory_id)
        vector = None if source is None or source.get("content") != node.content else source.get(queries.VECTOR_FIELD)
        if vector is not None and len(vector) == store.dimension:
            rows[position] = np.asarray(vector, dtype=np.float32)
        else:
            missing.append(position)
    if missing:
        texts = [embedding_text(nodes[position]) for position in missing]
        rows[missing] = index.unit_rows(store.embedding_model.embed_passages(texts), len(missing), "embedding model output")
    return rows


def bulk_error(index: EsIndex, action: str, failed: dict[str, str], written: list[str]) -> BulkWriteError:
    shown = "; ".join(f"{memory_id}: {reason}" for memory_id, reason in list(failed.items())[:20])
    more = f"; and {len(failed) - 20} more" if len(failed) > 20 else ""
    message = index.where(
        f"{action}: {len(failed)} of {len(failed) + len(written)} memories failed and the other {len(written)} "
        f"were written (Elasticsearch bulk writes are not atomic); failed: {shown}{more}"
    )
    return BulkWriteError(message, failed, written)


def update(
    store: ElasticsearchMemoryStore, index: EsIndex, memory_id: str, changes: dict[str, Any], change: ChangeSource | None = None
) -> MemoryNode:
    """Change fields of one node; `updated_at` becomes now unless given.

    Only the changed fields are sent (the `update` API with `doc`), guarded by the version
    read, so a concurrent change makes this fail instead of being overwritten. A change to
    `meta` rewrites the whole document instead: `update` merges objects key by key and could
    not drop a key.
    """
    unknown = sorted(set(changes) - UPDATABLE)
    if unknown:
        known = ", ".join(sorted(UPDATABLE))
        raise StoreError(f"cannot update {', '.join(unknown)} of memory {memory_id!r}; updatable fields: {known}")
    store.ensure_index()
    index.require_current_model("update")
    [doc] = index.mget([memory_id], "reading the memory to update")
    if not doc.get("found"):
        raise StoreError(index.where(f"no memory {memory_id!r}"))
    old = queries.document_to_node(doc["_source"])
    try:
        new = old.replace(**{"updated_at": utc_now(), **changes})
    except (TypeError, ValueError) as error:
        raise StoreError(f"cannot update memory {memory_id!r}: {error}") from None
    old_document = queries.node_to_document(old)
    document = queries.node_to_document(new, doc["_source"].get(queries.VECTOR_FIELD))
    if new.content != old.content:
        row = index.unit_rows(store.embedding_model.embed_passages([embedding_text(new)]), 1, "embedding model output")[0]
        document[queries.VECTOR_FIELD] = queries.stored_vector(row)
    # optimistic concurrency: the write fails (409) if the document changed since it was read
    target = {"index": index.name, "id": memory_id, "refresh": index.refresh, **version_guard(doc)}
    with index.calling(f"updating memory {memory_id!r}"):
        try:
            if document["meta"] != old_document["meta"]:
                index.client.index(document=queries.drop_empty_vector(document), **target)
            else:
                changed = {name: value for name, value in document.items() if old_document.get(name, value) != value}
                # against what is stored: a memory written before the field existed gets it now
                if doc["_source"].get(queries.KEYWORDS_FIELD) != document[queries.KEYWORDS_FIELD]:
                    changed[queries.KEYWORDS_FIELD] = document[queries.KEYWORDS_FIELD]
                if (doc["_source"].get(META_INDEX_FIELD) or []) != document.get(META_INDEX_FIELD, []):
                    changed[META_INDEX_FIELD] = document.get(META_INDEX_FIELD, [])
                if doc["_source"].get(queries.RANK_TERMS_FIELD) != document[queries.RANK_TERMS_FIELD]:
                    changed[queries.RANK_TERMS_FIELD] = document[queries.RANK_TERMS_FIELD]
                if queries.VECTOR_FIELD in document and new.content != old.content:
                    changed[queries.VECTOR_FIELD] = document[queries.VECTOR_FIELD]
                index.client.update(body=queries.update_body(changed), **target)
        except index.api_error as error:
            if getattr(error, "status_code", None) == 409:
                raise StoreError(index.where(f"memory {memory_id!r} changed while it was being updated; retry")) from None
            if getattr(error, "status_code", None) == 404:
                raise StoreError(index.where(f"no memory {memory_id!r} (deleted while it was being updated)")) from None
            raise
    es_history.record(index, changes_of_write({memory_id: old}, [new], change))
    return new


def delete(store: ElasticsearchMemoryStore, index: EsIndex, memory_ids: Sequence[str], change: ChangeSource | None = None) -> int:
    ids = list(dict.fromkeys(memory_ids))
    if not ids:
        return 0
    store.ensure_index()
    doomed = store.get(ids)
    deleted: list[str] = []
    failed: dict[str, str] = {}
    for start in range(0, len(ids), BULK_BATCH):
        batch = ids[start : start + BULK_BATCH]
        results = index.bulk_results(batch, queries.bulk_delete_lines(batch), "bulk delete")
        failed.update(index.failures(results))
        deleted += [memory_id for memory_id, result in results if "error" not in result and result.get("result") == "deleted"]
    _record_deletes(store, index, [node for node in doomed if node.memory_id in set(deleted)], change)
    if failed:
        raise bulk_error(index, "bulk delete", failed, deleted)
    return len(deleted)


def _record_deletes(
    store: ElasticsearchMemoryStore, index: EsIndex, deleted: Sequence[MemoryNode], change: ChangeSource | None
) -> None:
    keep = store.params.history_keep_deleted_content
    if not keep:
        es_history.forget_content(index, [node.memory_id for node in deleted])
    es_history.record(index, changes_of_delete(deleted, change, keep_content=keep))


def delete_by_filter(
    store: ElasticsearchMemoryStore, index: EsIndex, memory_filter: MemoryFilter, change: ChangeSource | None = None
) -> int:
    """`_delete_by_query`, refreshed unless `refresh` is "false" (it takes no `wait_for`).

    It deletes what a search would find at the time, so writes made with refresh "false"
    and not yet refreshed may survive it."""
    queries.validate_filter(memory_filter)
    if memory_filter.memory_ids == ():
        return 0
    store.ensure_index()
    require_filled(index, memory_filter)
    doomed = _all_matching(store, memory_filter)
    with index.calling("delete by filter"):
        response = index.client.delete_by_query(
            index=index.name, body=queries.delete_by_query_body(memory_filter), refresh=index.refresh != "false"
        )
    failures = response.get("failures") or []
    if failures:
        reasons = "; ".join(str((item.get("cause") or {}).get("reason", item)) for item in failures[:5])
        deleted = response.get("deleted", 0)
        raise StoreError(index.where(f"delete by filter removed {deleted} memories, then failed: {reasons}"))
    gone = {node.memory_id for node in store.get([node.memory_id for node in doomed])}
    _record_deletes(store, index, [node for node in doomed if node.memory_id not in gone], change)
    return int(response.get("deleted", 0))


def _all_matching(store: ElasticsearchMemoryStore, memory_filter: MemoryFilter) -> list[MemoryNode]:
    found: list[MemoryNode] = []
    while page := store.scan(memory_filter, limit=1000, offset=len(found)):
        found.extend(page)
    return found
