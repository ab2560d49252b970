"""Leases in Elasticsearch (see `memoryscope.leases`): one document per lease in the index
`<index_name>-leases`, taken with optimistic concurrency (a `create` for a new lease, an
`update` guarded by the version read for a renewal or an expired one), so two processes never
both hold one. Refresh does not matter: `mget` and guarded writes see the latest version."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore

__all__ = ["acquire", "release", "leases_index"]

LEASE_MAPPINGS = {"dynamic": "strict", "properties": {"holder": {"type": "keyword"}, "expires_at": {"type": "double"}}}


def leases_index(store: ElasticsearchMemoryStore) -> str:
    return f"{store.index_name}-leases"


def acquire(store: ElasticsearchMemoryStore, name: str, holder: str, ttl_s: float) -> bool:
    _ensure_index(store)
    now = time.time()
    current = _read(store, name)
    lease = {"holder": holder, "expires_at": now + ttl_s}
    if current is None:
        action: dict[str, Any] = {"create": {"_id": name}}
        line: dict[str, Any] = lease
    else:
        if current["_source"].get("holder") != holder and float(current["_source"].get("expires_at", 0)) > now:
            return False
        action = {"update": {"_id": name, "if_seq_no": current["_seq_no"], "if_primary_term": current["_primary_term"]}}
        line = {"doc": lease}
    return "error" not in _one(store, [action, line], "taking a lease")


def release(store: ElasticsearchMemoryStore, name: str, holder: str) -> None:
    current = _read(store, name)
    if current is None or current["_source"].get("holder") != holder:
        return
    guard = {"if_seq_no": current["_seq_no"], "if_primary_term": current["_primary_term"]}
    _one(store, [{"delete": {"_id": name, **guard}}], "giving up a lease")


def _read(store: ElasticsearchMemoryStore, name: str) -> dict[str, Any] | None:
    with store._calling("reading a lease"):
        response = store._client.mget(index=leases_index(store), ids=[name])
    [doc] = response["docs"]
    return dict(doc) if doc.get("found") else None


def _one(store: ElasticsearchMemoryStore, lines: list[dict[str, Any]], action: str) -> dict[str, Any]:
    """The result of a one-item bulk; a version conflict or a missing document is an answer, not an error."""
    [item] = store._bulk(lines, action, index=leases_index(store), refresh="false")
    result: dict[str, Any] = next(iter(item.values()))
    return result


def _ensure_index(store: ElasticsearchMemoryStore) -> None:
    store.ensure_side_index(leases_index(store), LEASE_MAPPINGS, "leases")
