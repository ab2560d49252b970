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
    from memoryscope.stores._es_index import EsIndex

__all__ = ["record", "forget_content", "query", "HISTORY_MAPPINGS"]

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


def record(index: EsIndex, changes: Iterable[MemoryChange]) -> None:
    documents = [{**change.to_dict(), "seq": time.time_ns() + position} for position, change in enumerate(changes)]
    if not documents:
        return
    _ensure_index(index)
    lines: list[dict[str, Any]] = []
    for document in documents:
        lines += [{"index": {"_id": f"{document['seq']}:{document['memory_id']}"}}, document]
    index.bulk(lines, "recording history", target=index.history_name)


def forget_content(index: EsIndex, memory_ids: Sequence[str]) -> None:
    """Deleted memories: their earlier changes keep what happened and when, not what they said."""
    if not memory_ids:
        return
    _ensure_index(index)
    hits = _search(index, {"bool": {"filter": [{"terms": {"memory_id": list(memory_ids)}}]}}, size=10_000)
    lines: list[dict[str, Any]] = []
    for hit in hits:
        lines += [{"update": {"_id": hit["_id"]}}, {"doc": {"before": None, "after": None}}]
    if lines:
        index.bulk(lines, "forgetting deleted content", target=index.history_name)


def query(index: EsIndex, *, memory_id: str | None, user_name: str | None, run_id: str | None, limit: int) -> list[MemoryChange]:
    _ensure_index(index)
    terms = [{"term": {name: value}} for name, value in (("memory_id", memory_id), ("user_name", user_name), ("run_id", run_id))
             if value is not None]  # fmt: skip
    hits = _search(index, {"bool": {"filter": terms}} if terms else {"match_all": {}}, size=limit)
    return [_change(hit["_source"]) for hit in hits]


def _search(index: EsIndex, query: dict[str, Any], size: int) -> list[dict[str, Any]]:
    body = {"query": query, "sort": [{"seq": "asc"}], "size": size}
    return index.search(body, "reading history", target=index.history_name)


def _ensure_index(index: EsIndex) -> None:
    index.ensure_companion(index.history_name, HISTORY_MAPPINGS, "history")


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
