"""Memory history in the SQLite file (see `memoryscope.history`): one row per change, written
inside the same write transaction as the change itself."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from memoryscope.history import MemoryChange

__all__ = ["ensure", "record", "forget_content", "query"]

_IDS_PARAM = "(SELECT j.value FROM json_each(?) AS j)"
_COLUMNS = "seq, memory_id, user_name, target_name, workspace, action, at, operation, run_id, before, after"
# Made on first write: files written before history existed get the table then, nothing else changes.
_TABLES = (
    "CREATE TABLE IF NOT EXISTS memory_history (seq INTEGER PRIMARY KEY AUTOINCREMENT, memory_id TEXT NOT NULL, "
    "user_name TEXT NOT NULL, target_name TEXT NOT NULL, workspace TEXT NOT NULL, action TEXT NOT NULL, at TEXT NOT NULL, "
    "operation TEXT NOT NULL, run_id TEXT NOT NULL, before TEXT, after TEXT)",
    "CREATE INDEX IF NOT EXISTS memory_history_memory ON memory_history (memory_id, seq)",
    "CREATE INDEX IF NOT EXISTS memory_history_user ON memory_history (user_name, seq)",
    "CREATE INDEX IF NOT EXISTS memory_history_run ON memory_history (run_id, seq)",
)


def ensure(connection: sqlite3.Connection) -> None:
    for statement in _TABLES:
        connection.execute(statement)


def record(connection: sqlite3.Connection, changes: Iterable[MemoryChange]) -> None:
    rows = [
        (
            change.memory_id,
            change.user_name,
            change.target_name,
            change.workspace,
            change.action,
            change.at.isoformat(),
            change.operation,
            change.run_id,
            _json(change.before),
            _json(change.after),
        )
        for change in changes
    ]
    if rows:
        ensure(connection)
        connection.executemany(
            "INSERT INTO memory_history (memory_id, user_name, target_name, workspace, action, at, operation, run_id, "
            "before, after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


def forget_content(connection: sqlite3.Connection, memory_ids: Sequence[str]) -> None:
    """Deleted memories: their earlier changes keep what happened and when, not what they said."""
    if memory_ids:
        ensure(connection)
        connection.execute(
            f"UPDATE memory_history SET before = NULL, after = NULL WHERE memory_id IN {_IDS_PARAM}",
            (json.dumps(list(memory_ids)),),
        )


def query(
    connection: sqlite3.Connection,
    *,
    memory_id: str | None,
    user_name: str | None,
    run_id: str | None,
    limit: int,
    newest_first: bool = False,
) -> list[MemoryChange]:
    ensure(connection)
    clauses, params = [], []
    for column, value in (("memory_id", memory_id), ("user_name", user_name), ("run_id", run_id)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    where = " AND ".join(clauses) or "1 = 1"
    order = "seq DESC" if newest_first else "seq"
    rows = connection.execute(f"SELECT {_COLUMNS} FROM memory_history WHERE {where} ORDER BY {order} LIMIT ?", (*params, limit))
    return [_change(row) for row in rows.fetchall()]


def _json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _change(row: Sequence[Any]) -> MemoryChange:
    seq, memory_id, user_name, target_name, workspace, action, at, operation, run_id, before, after = row
    return MemoryChange(
        memory_id=memory_id,
        user_name=user_name,
        target_name=target_name,
        workspace=workspace,
        action=action,
        at=datetime.fromisoformat(at),
        operation=operation,
        run_id=run_id,
        before=None if before is None else json.loads(before),
        after=None if after is None else json.loads(after),
        seq=seq,
    )
