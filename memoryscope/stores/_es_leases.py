"""Leases in Elasticsearch (see `memoryscope.leases`): one document per lease in the index
`<index_name>-leases`, taken with optimistic concurrency (a `create` for a new lease, an
`update` guarded by the version read for a renewal or an expired one), so two processes never
both hold one. Refresh does not matter: `mget` and guarded writes see the latest version."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memoryscope.stores._es_index import version_guard

if TYPE_CHECKING:
    from memoryscope.stores._es_index import EsIndex

__all__ = ["acquire", "holder", "release", "LEASE_MAPPINGS"]

LEASE_MAPPINGS = {"dynamic": "strict", "properties": {"holder": {"type": "keyword"}, "expires_at": {"type": "double"}}}


def acquire(index: EsIndex, name: str, holder: str, ttl_s: float, stale: Callable[[str], bool] | None = None) -> bool:
    """Take or renew the lease (a version-guarded write: two takers never both win); False while
    another's stands, unless `stale` says its holder is gone."""
    _ensure_index(index)
    now = time.time()
    current = _read(index, name)
    lease = {"holder": holder, "expires_at": now + ttl_s}
    if current is None:
        action: dict[str, Any] = {"create": {"_id": name}}
        line: dict[str, Any] = lease
    else:
        other = str(current["_source"].get("holder", ""))
        standing = other != holder and float(current["_source"].get("expires_at", 0)) > now
        if standing and not (stale is not None and stale(other)):
            return False
        action = {"update": {"_id": name, **version_guard(current)}}
        line = {"doc": lease}
    return "error" not in _one(index, name, [action, line], "taking a lease")


def holder(index: EsIndex, name: str) -> tuple[str, float] | None:
    """The holder of a standing lease and when it ends; None when there is none."""
    _ensure_index(index)
    current = _read(index, name)
    if current is None:
        return None
    expires = float(current["_source"].get("expires_at", 0))
    return (str(current["_source"].get("holder", "")), expires) if expires > time.time() else None


def release(index: EsIndex, name: str, holder: str) -> None:
    current = _read(index, name)
    if current is None or current["_source"].get("holder") != holder:
        return
    _one(index, name, [{"delete": {"_id": name, **version_guard(current)}}], "giving up a lease")


def _read(index: EsIndex, name: str) -> dict[str, Any] | None:
    [doc] = index.mget([name], "reading a lease", target=index.leases_name)
    return dict(doc) if doc.get("found") else None


def _one(index: EsIndex, name: str, lines: list[dict[str, Any]], action: str) -> dict[str, Any]:
    """The result of a one-item bulk; a version conflict or a missing document is an answer, not an error."""
    [(_, result)] = index.bulk_results([name], lines, action, target=index.leases_name, refresh="false")
    return result


def _ensure_index(index: EsIndex) -> None:
    index.ensure_companion(index.leases_name, LEASE_MAPPINGS, "leases")
