"""The metadata index of `sqlite_memory_store`: what answers `MemoryFilter.metadata`.

`memory_meta` holds one row per value `metadata.indexed_values` takes from a memory's `meta`:
`(row_id, user_name, key, text, number, time)`, time as UTC epoch seconds (float64, exact to the
microsecond as `metadata.matches` compares). Each value column has its partial index led by the
user and the key (`(user_name, key, text, row_id)`, ...), so a condition reads just the user's
rows of that key and value, whatever the size of the store; `(row_id)` serves the rewrites.

Kept in step inside each write transaction: `write_metadata` replaces a memory's rows on every
upsert and update (a memory moved to another user moves its rows with it), and a trigger deletes
them with the memory (`delete`, `delete_by_filter`, any other `DELETE`). A file from before the
index (schema version 2) gets it when opened, as does a file indexed under other rules
(`METADATA_INDEX_VERSION`): `update_metadata_index`.

The conditions on one key are one `row_id IN (SELECT row_id FROM memory_meta WHERE user_name = ?
AND "key" = ? AND <value tests>)` clause (they hold for one value together, as `metadata.matches`
says), so SQLite can start from the few matching rows (one index range) or check each row of
the user against them, whichever it judges cheaper; dense search masks its in-memory arrays with
the row ids the index alone gives (`metadata_row_ids_sql`). A filter without conditions never
reads the table. The value tests mirror `metadata.matches`: texts and booleans ("true"/"false")
by `text`, numbers by `number`, times by `time`, a one-of by any of them.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memoryscope.stores.metadata import (
    METADATA_INDEX_VERSION,
    MetadataCondition,
    checked_conditions,
    conditions_by_key,
    indexed_values,
)

__all__ = [
    "METADATA_SCRIPT",
    "metadata_row_ids_sql",
    "metadata_sql",
    "rebuild_metadata_index",
    "update_metadata_index",
    "write_metadata",
]

logger = logging.getLogger("memoryscope.stores.sqlite")

METADATA_SCRIPT = """
CREATE TABLE IF NOT EXISTS memory_meta (
    row_id INTEGER NOT NULL,
    user_name TEXT NOT NULL,
    "key" TEXT NOT NULL,
    text TEXT,
    number REAL,
    time REAL
);
CREATE INDEX IF NOT EXISTS memory_meta_row ON memory_meta (row_id);
CREATE INDEX IF NOT EXISTS memory_meta_text ON memory_meta (user_name, "key", text, row_id) WHERE text IS NOT NULL;
CREATE INDEX IF NOT EXISTS memory_meta_number ON memory_meta (user_name, "key", number, row_id) WHERE number IS NOT NULL;
CREATE INDEX IF NOT EXISTS memory_meta_time ON memory_meta (user_name, "key", time, row_id) WHERE time IS NOT NULL;
CREATE TRIGGER IF NOT EXISTS memories_meta_deleted AFTER DELETE ON memories BEGIN
    DELETE FROM memory_meta WHERE row_id = old.row_id;
END;
"""

_INSERT = 'INSERT INTO memory_meta (row_id, user_name, "key", text, number, time) VALUES (?, ?, ?, ?, ?, ?)'
_REBUILD_CHUNK = 10_000
_REBUILD_NOTICE_FROM = 20_000
_RANGE_SQL = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_JSON_LIST = "(SELECT j.value FROM json_each(?) AS j)"


def write_metadata(connection: sqlite3.Connection, row_id: int, user_name: str, meta: dict[str, Any]) -> None:
    """Replace the index rows of memory `row_id`, inside the caller's write transaction."""
    connection.execute("DELETE FROM memory_meta WHERE row_id = ?", (row_id,))
    if meta:
        connection.executemany(_INSERT, [(row_id, user_name, *row) for row in indexed_values(meta)])


def metadata_sql(user_name: str, conditions: Sequence[MetadataCondition], table: str) -> tuple[list[str], list[Any]]:
    """WHERE clauses (to AND) and their parameters for `conditions` on the user's rows of `table`."""
    clauses: list[str] = []
    params: list[Any] = []
    for select, select_params in _matching_rows(user_name, conditions):
        clauses.append(f"{table}.row_id IN ({select})")
        params += select_params
    return clauses, params


def metadata_row_ids_sql(user_name: str, conditions: Sequence[MetadataCondition]) -> tuple[str, list[Any]]:
    """A SELECT of the row ids of the user's memories `conditions` keep, read from the index
    alone (what the in-memory arrays of dense search are masked with), and its parameters."""
    selects = _matching_rows(user_name, conditions)
    return " INTERSECT ".join(select for select, _ in selects), [param for _, params in selects for param in params]


def _matching_rows(user_name: str, conditions: Sequence[MetadataCondition]) -> list[tuple[str, list[Any]]]:
    """Per key, a SELECT of the row ids with an indexed value passing every condition on the key."""
    selects = []
    for key, on_key in conditions_by_key(checked_conditions(conditions)):
        tests, params = [], [user_name, key]
        for condition in on_key:
            test, values = _value_test(condition)
            tests.append(test)
            params += values
        where = " AND ".join(tests)
        selects.append((f'SELECT x.row_id FROM memory_meta AS x WHERE x.user_name = ? AND x."key" = ? AND {where}', params))
    return selects


def _value_test(condition: MetadataCondition) -> tuple[str, list[Any]]:
    """The test on `x`'s value columns for one condition, and its parameters."""
    if condition.op in _RANGE_SQL:
        column = "x.time" if isinstance(condition.value, datetime) else "x.number"
        return f"{column} {_RANGE_SQL[condition.op]} ?", [_indexed(condition.value)[1]]
    wanted = condition.value if condition.op == "in" else (condition.value,)
    by_column: dict[str, list[Any]] = {}
    for value in wanted:
        column, indexed = _indexed(value)
        by_column.setdefault(column, []).append(indexed)
    tests, params = [], []
    for column, values in by_column.items():
        if len(values) == 1:
            tests.append(f"{column} = ?")
            params.append(values[0])
        elif column == "x.text":  # json_each takes the whole list as one parameter
            tests.append(f"{column} IN {_JSON_LIST}")
            params.append(json.dumps(values, ensure_ascii=False))
        else:  # numbers and times bound as they are: a float through JSON text might not come back exact
            tests.append(f"{column} IN ({', '.join('?' for _ in values)})")
            params += values
    return (tests[0] if len(tests) == 1 else "(" + " OR ".join(tests) + ")"), params


def _indexed(value: Any) -> tuple[str, Any]:
    """The column a filter value is looked up in, and the value as that column holds it."""
    if isinstance(value, bool):
        return "x.text", "true" if value else "false"
    if isinstance(value, int | float):
        return "x.number", float(value)
    if isinstance(value, datetime):
        return "x.time", value.timestamp()
    return "x.text", value


def rebuild_metadata_index(connection: sqlite3.Connection, path: object = "") -> int:
    """Re-make every row of `memory_meta` from the stored `meta`; how many memories were read.
    In chunks; a big file is announced in the log. A `meta` that does not decode is skipped
    (reads leave that memory out, and `memoryscope doctor` names it)."""
    total = connection.execute("SELECT count(*) FROM memories").fetchone()[0]
    if total >= _REBUILD_NOTICE_FROM:
        logger.warning("indexing the metadata of %d memories in %s (once, after an upgrade)", total, path)
    connection.execute("DELETE FROM memory_meta")
    cursor = connection.execute("SELECT row_id, user_name, meta FROM memories WHERE meta != '{}'")
    done = 0
    try:
        while rows := cursor.fetchmany(_REBUILD_CHUNK):
            index_rows = []
            for row_id, user_name, meta in rows:
                try:
                    loaded = json.loads(meta)
                except (TypeError, ValueError):
                    continue
                if isinstance(loaded, dict):
                    index_rows += [(row_id, user_name, *row) for row in indexed_values(loaded)]
            connection.executemany(_INSERT, index_rows)
            done += len(rows)
    finally:
        cursor.close()
    if total >= _REBUILD_NOTICE_FROM:
        logger.warning("indexed the metadata of %d memories in %s", total, path)
    return done


def update_metadata_index(connection: sqlite3.Connection, path: object = "") -> None:
    """Build the index of a file from before it, or indexed under other rules (once, when opened,
    inside the opening write transaction)."""
    found = connection.execute("SELECT value FROM store_meta WHERE key = 'metadata_index_version'").fetchone()
    if found is not None and found[0] == METADATA_INDEX_VERSION:
        return
    rebuild_metadata_index(connection, path)
    connection.execute(
        "INSERT OR REPLACE INTO store_meta (key, value) VALUES ('metadata_index_version', ?)", (METADATA_INDEX_VERSION,)
    )
