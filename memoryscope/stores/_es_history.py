"""Memory history in Elasticsearch (see `memoryscope.history`): one document per change in the
index `<index_name>-history`, written by the bulk request right after the change (Elasticsearch
has no transaction to hold both), ordered by `seq` (nanoseconds, then position in the batch)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memoryscope.history import MemoryChange

if TYPE_CHECKING:
    from memoryscope.stores._es_index import EsIndex

__all__ = ["record", "forget_content", "query", "HISTORY_MAPPINGS"]

_SORT = [{"seq": "asc"}, {"memory_id": "asc"}]
_NEWEST_FIRST = [{"seq": "desc"}, {"memory_id": "desc"}]
_TERMS_PER_QUERY = 10_000  # memory ids in one `terms` query; Elasticsearch allows 65,536 by default
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
    """Deleted memories: their earlier changes keep what happened and when, not what they said.
    Every change of every id, however many: the ids go `_TERMS_PER_QUERY` to a query (under
    `index.max_terms_count`), the changes a page at a time."""
    if not memory_ids:
        return
    _ensure_index(index)
    for start in range(0, len(memory_ids), _TERMS_PER_QUERY):
        chosen = list(memory_ids[start : start + _TERMS_PER_QUERY])
        for page in _pages(index, {"bool": {"filter": [{"terms": {"memory_id": chosen}}]}}, limit=None, source=False):
            lines: list[dict[str, Any]] = []
            for hit in page:
                lines += [{"update": {"_id": hit["_id"]}}, {"doc": {"before": None, "after": None}}]
            index.bulk(lines, "forgetting deleted content", target=index.history_name)


def query(
    index: EsIndex, *, memory_id: str | None, user_name: str | None, run_id: str | None, limit: int, newest_first: bool = False
) -> list[MemoryChange]:
    _ensure_index(index)
    terms = [{"term": {name: value}} for name, value in (("memory_id", memory_id), ("user_name", user_name), ("run_id", run_id))
             if value is not None]  # fmt: skip
    query = {"bool": {"filter": terms}} if terms else {"match_all": {}}
    pages = _pages(index, query, limit=limit, sort=_NEWEST_FIRST if newest_first else _SORT)
    return [_change(hit["_source"]) for page in pages for hit in page]


def _pages(
    index: EsIndex, query: dict[str, Any], *, limit: int | None, source: bool = True, sort: list[dict[str, str]] = _SORT
) -> Iterator[list[dict[str, Any]]]:
    """The changes `query` finds, oldest first (or in `sort`), a page at a time (`EsIndex.pages`;
    with `memory_id` beside `seq` in the sort no two changes tie, so no page skips one)."""

    def body_of(size: int, after: list[Any] | None) -> dict[str, Any]:
        body: dict[str, Any] = {"query": query, "sort": sort, "size": size}
        if not source:
            body["_source"] = False
        if after is not None:
            body["search_after"] = after
        return body

    return index.pages(body_of, limit, "reading history", target=index.history_name)


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
