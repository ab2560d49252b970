"""State records in the SQLite file (see `memoryscope.stores.state`): the table `state_records`,
one row per kept version, keyed by the record's five parts and its version. A record's latest
version is its highest; an unversioned write deletes the ones below it in the same transaction.
Writes run inside the caller's write transaction, so a compare-and-set sees every writer of
every process."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from memoryscope.errors import StoreError
from memoryscope.history import ChangeSource
from memoryscope.memory import utc_now
from memoryscope.stores.base import conflict_error
from memoryscope.stores.state import StateKey, StateOwner, StateRecord, state_value_json

__all__ = ["STATE_TABLE_SCRIPT", "read", "list_kind", "write", "versions", "delete", "iterate", "import_records"]

STATE_TABLE_SCRIPT = """
CREATE TABLE IF NOT EXISTS state_records (
    user_name TEXT NOT NULL,
    target_name TEXT NOT NULL,
    workspace TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    value TEXT NOT NULL,
    updated_at REAL NOT NULL,
    operation TEXT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (user_name, target_name, workspace, kind, name, version)
) WITHOUT ROWID;
"""

_COLUMNS = "user_name, target_name, workspace, kind, name, version, value, updated_at, operation, run_id"
_KEY = "user_name = ? AND target_name = ? AND workspace = ? AND kind = ? AND name = ?"
_SORT = "user_name, target_name, workspace, kind, name, version"


def read(connection: sqlite3.Connection, keys: Sequence[StateKey]) -> list[StateRecord]:
    found = []
    for key in keys:
        row = connection.execute(
            f"SELECT {_COLUMNS} FROM state_records WHERE {_KEY} ORDER BY version DESC LIMIT 1", key.parts()
        ).fetchone()
        if row is not None:
            found.append(_record(row))
    return found


def list_kind(connection: sqlite3.Connection, owner: StateOwner, kind: str) -> list[StateRecord]:
    # SQLite takes the other columns from the row holding MAX(version)
    rows = connection.execute(
        "SELECT user_name, target_name, workspace, kind, name, MAX(version), value, updated_at, operation, run_id "
        "FROM state_records WHERE user_name = ? AND target_name = ? AND workspace = ? AND kind = ? GROUP BY name ORDER BY name",
        (owner.user_name, owner.target_name, owner.workspace, kind),
    ).fetchall()
    return [_record(row) for row in rows]


def write(
    connection: sqlite3.Connection,
    values: Mapping[StateKey, Mapping[str, Any]],
    expected: Mapping[StateKey, int] | None,
    versioned: bool,
    change: ChangeSource | None,
    where: str,
) -> list[StateRecord]:
    """Inside a write transaction: check `expected`, then write each value as its next version."""
    texts = {key: state_value_json(value, key) for key, value in values.items()}  # all checked before any write
    current = {key: _latest_version(connection, key) for key in {*values, *(expected or {})}}
    if expected:
        wrong = [key for key, version in expected.items() if current[key] != version]
        if wrong:
            raise conflict_error([f"{key.kind}/{key.name}" for key in wrong], where)
    source = change or ChangeSource()
    now = utc_now()
    written = []
    for key, text in texts.items():
        version = current[key] + 1
        connection.execute(
            f"INSERT INTO state_records ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*key.parts(), version, text, now.timestamp(), source.operation, source.run_id),
        )
        if not versioned:
            connection.execute(f"DELETE FROM state_records WHERE {_KEY} AND version < ?", (*key.parts(), version))
        written.append(StateRecord(key, json.loads(text), version, now, source.operation, source.run_id))
    return written


def versions(connection: sqlite3.Connection, key: StateKey, limit: int) -> list[StateRecord]:
    rows = connection.execute(
        f"SELECT {_COLUMNS} FROM state_records WHERE {_KEY} ORDER BY version DESC LIMIT ?", (*key.parts(), max(0, limit))
    ).fetchall()
    return [_record(row) for row in reversed(rows)]


def delete(connection: sqlite3.Connection, user_name: str, target_name: str | None, workspace: str | None) -> int:
    where, params = "user_name = ?", [user_name]
    for column, value in (("target_name", target_name), ("workspace", workspace)):
        if value is not None:
            where += f" AND {column} = ?"
            params.append(value)
    (count,) = connection.execute(
        f"SELECT COUNT(*) FROM (SELECT DISTINCT target_name, workspace, kind, name FROM state_records WHERE {where})", params
    ).fetchone()
    connection.execute(f"DELETE FROM state_records WHERE {where}", params)
    return int(count)


def iterate(connection: sqlite3.Connection, user_name: str | None, batch_size: int) -> Iterator[list[StateRecord]]:
    """Pages in key order, each starting after the last row of the one before (a deep page costs
    what the first does)."""
    after: tuple[Any, ...] | None = None
    while True:
        conditions, params = [], []
        if user_name is not None:
            conditions.append("user_name = ?")
            params.append(user_name)
        if after is not None:
            conditions.append(f"({_SORT}) > (?, ?, ?, ?, ?, ?)")
            params.extend(after)
        where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
        rows = connection.execute(
            f"SELECT {_COLUMNS} FROM state_records {where} ORDER BY {_SORT} LIMIT ?", (*params, batch_size)
        ).fetchall()
        if not rows:
            return
        yield [_record(row) for row in rows]
        after = tuple(rows[-1][:6])
        if len(rows) < batch_size:
            return


def import_records(connection: sqlite3.Connection, records: Sequence[StateRecord]) -> int:
    rows = [
        (*record.key.parts(), record.version, state_value_json(record.value, record.key), *_source(record)) for record in records
    ]
    connection.executemany(f"INSERT OR REPLACE INTO state_records ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return len(rows)


def _source(record: StateRecord) -> tuple[float, str, str]:
    return record.updated_at.timestamp(), record.operation, record.run_id


def _latest_version(connection: sqlite3.Connection, key: StateKey) -> int:
    (version,) = connection.execute(f"SELECT COALESCE(MAX(version), 0) FROM state_records WHERE {_KEY}", key.parts()).fetchone()
    return int(version)


def _record(row: Sequence[Any]) -> StateRecord:
    user_name, target_name, workspace, kind, name, version, value, updated_at, operation, run_id = row
    key = StateKey(StateOwner(user_name, target_name, workspace), kind, name)
    try:
        decoded = json.loads(value)
    except (TypeError, ValueError):
        decoded = None
    if not isinstance(decoded, dict):
        raise StoreError(
            f"state record {kind} {name!r} of user {user_name!r} (version {version}) is damaged: its value is not a JSON object"
        )
    return StateRecord(key, decoded, int(version), datetime.fromtimestamp(float(updated_at), timezone.utc), operation, run_id)
