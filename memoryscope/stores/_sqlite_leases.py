"""Leases in the SQLite file (see `memoryscope.leases`): one row per lease, taken and given up
inside a write transaction, so two processes never both hold one."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

__all__ = ["acquire", "holder", "release"]

# Made on first use: files written before leases existed get the table then, nothing else changes.
_TABLE = "CREATE TABLE IF NOT EXISTS store_leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at REAL NOT NULL)"


def acquire(
    connection: sqlite3.Connection, name: str, holder: str, ttl_s: float, stale: Callable[[str], bool] | None = None
) -> bool:
    """Take or renew the lease inside the caller's write transaction; False while another's
    stands, unless `stale` says its holder is gone."""
    connection.execute(_TABLE)
    now = time.time()
    row = connection.execute("SELECT holder, expires_at FROM store_leases WHERE name = ?", (name,)).fetchone()
    if row is not None and row[0] != holder and row[1] > now and not (stale is not None and stale(row[0])):
        return False
    connection.execute(
        "INSERT INTO store_leases (name, holder, expires_at) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at",
        (name, holder, now + ttl_s),
    )
    return True


def release(connection: sqlite3.Connection, name: str, holder: str) -> None:
    connection.execute(_TABLE)
    connection.execute("DELETE FROM store_leases WHERE name = ? AND holder = ?", (name, holder))


def holder(connection: sqlite3.Connection, name: str) -> tuple[str, float] | None:
    """The holder of a standing lease and when it ends; None when there is none."""
    connection.execute(_TABLE)
    row = connection.execute("SELECT holder, expires_at FROM store_leases WHERE name = ?", (name,)).fetchone()
    return (str(row[0]), float(row[1])) if row is not None and row[1] > time.time() else None
