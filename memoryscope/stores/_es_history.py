"""Memory history in Elasticsearch (see `memoryscope.history`): one document per change in the
index `<index_name>-history`, written by the bulk request right after the change (Elasticsearch
has no transaction to hold both), ordered by `seq` (nanoseconds, then position in the batch)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memoryscope.history import MemoryChange

if TYPE_CHECKING:
    from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore

__all__ = ["record", "forget_content", "query", "history_index"]

_KEYWORDS = ("memory_id", "user_name", "target_name", "workspace", "action", "operation", "run_id")
HISTORY_MAPPINGS: dict[str, Any] = {
    "dynamic": "strict",
    "properties": {
        "seq": {"type": "long"},
        "at": {"type": "date"},
        **{name: {"type": "keyword"} for name in _KEYWORDS},
        "before": {"type": "object", "enabled": False},  # kept, never searched
        "after": {"type": "object", "enabled": False},
    },
}


def history_index(store: ElasticsearchMemoryStore) -> str:
    return f"{store.index_name}-history"


def record(store: ElasticsearchMemoryStore, changes: Iterable[MemoryChange]) -> None:
    documents = [{**change.to_dict(), "seq": time.time_ns() + position} for position, change in enumerate(changes)]
    if not documents:
        return
    _ensure_index(store)
    lines: list[dict[str, Any]] = []
    for document in documents:
        lines += [{"index": {"_id": f"{document['seq']}:{document['memory_id']}"}}, document]
    store._bulk(lines, "recording history", index=history_index(store))


def forget_content(store: ElasticsearchMemoryStore, memory_ids: Sequence[str]) -> None:
    """Deleted memories: their earlier changes keep what happened and when, not what they said."""
    if not memory_ids:
        return
    _ensure_index(store)
    hits = _search(store, {"bool": {"filter": [{"terms": {"memory_id": list(memory_ids)}}]}}, size=10_000)
    lines: list[dict[str, Any]] = []
    for hit in hits:
        lines += [{"update": {"_id": hit["_id"]}}, {"doc": {"before": None, "after": None}}]
    if lines:
        store._bulk(lines, "forgetting deleted content", index=history_index(store))


def query(
    store: ElasticsearchMemoryStore, *, memory_id: str | None, user_name: str | None, run_id: str | None, limit: int
) -> list[MemoryChange]:
    _ensure_index(store)
    terms = [{"term": {name: value}} for name, value in (("memory_id", memory_id), ("user_name", user_name), ("run_id", run_id))
             if value is not None]  # fmt: skip
    hits = _search(store, {"bool": {"filter": terms}} if terms else {"match_all": {}}, size=limit)
    return [_change(hit["_source"]) for hit in hits]


def _search(store: ElasticsearchMemoryStore, query: dict[str, Any], size: int) -> list[dict[str, Any]]:
    with store._calling("reading history"):
        response = store._client.search(index=history_index(store), query=query, sort=[{"seq": "asc"}], size=size)
    hits: list[dict[str, Any]] = response["hits"]["hits"]
    return hits


def _ensure_index(store: ElasticsearchMemoryStore) -> None:
    store.ensure_side_index(history_index(store), HISTORY_MAPPINGS, "history")


def _change(source: dict[str, Any]) -> MemoryChange:
    return MemoryChange(
        memory_id=source["memory_id"],
        user_name=source["user_name"],
        target_name=source.get("target_name", ""),
        workspace=source.get("workspace", ""),
        action=source["action"],
        at=datetime.fromisoformat(source["at"]),
        operation=source.get("operation", ""),
        run_id=source.get("run_id", ""),
        before=source.get("before"),
        after=source.get("after"),
        seq=int(source["seq"]),
    )
