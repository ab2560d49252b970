"""Re-embedding the file of `sqlite_memory_store` with another embedding model, resumably.

New vectors go to a side table, `reembed_vectors` (row id, the content they were made from,
vector), one short write transaction per batch, so readers carry on meanwhile and an
interrupted run resumes where it stopped: a row whose side vector was made from its current
content is not embedded again. The side table remembers the model it is filling for; another
model starts it over.

The switch is one transaction: rows added or edited since their batch are embedded then, the
side vectors replace `memory_vectors`, the new model and dimension are recorded, and the change
log is cut, so every process's in-memory matrices reload instead of replaying old rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence

import numpy as np

from memoryscope.memory import embedding_text_of
from memoryscope.progress import Progress
from memoryscope.stores._sqlite_connections import SqliteConnections

__all__ = ["reembed_file"]

_SIDE_TABLE = """
CREATE TABLE IF NOT EXISTS reembed_vectors (row_id INTEGER PRIMARY KEY, content TEXT NOT NULL, vector BLOB NOT NULL)
"""
# rows whose side vector is missing or was made from another content
_STALE = (
    "SELECT m.row_id, m.content, m.meta FROM memories AS m LEFT JOIN reembed_vectors AS r ON r.row_id = m.row_id "
    "WHERE (r.row_id IS NULL OR r.content IS NOT m.content)"
)
_INSERT_SIDE = "INSERT OR REPLACE INTO reembed_vectors (row_id, content, vector) VALUES (?, ?, ?)"

Embed = Callable[[Sequence[str]], np.ndarray]  # passage texts -> (n, dimension) unit float32 rows


def reembed_file(
    connections: SqliteConnections, model_name: str, dimension: int, embed: Embed, batch_size: int, progress: Progress
) -> int:
    """Re-embed every memory with `embed`, record `model_name`/`dimension`; returns how many memories."""
    with connections.write_transaction() as connection:
        connection.execute(_SIDE_TABLE)
        filling = dict(
            connection.execute("SELECT key, value FROM store_meta WHERE key IN ('reembed_model', 'reembed_dimension')")
        )
        if filling != {"reembed_model": model_name, "reembed_dimension": str(dimension)}:
            connection.execute("DELETE FROM reembed_vectors")  # made for another model: start over
            connection.executemany(
                "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)",
                [("reembed_model", model_name), ("reembed_dimension", str(dimension))],
            )
    connection = connections.connection()
    total = connection.execute("SELECT count(*) FROM memories").fetchone()[0]
    stale = connection.execute(f"SELECT count(*) FROM ({_STALE})").fetchone()[0]
    progress.start("re-embed", total)
    if total - stale:
        progress.note(f"resuming: {total - stale:,} of {total:,} memories were re-embedded by an earlier run")
        progress.advance(total - stale)
    last_row_id = -1
    while True:
        # keyset paging by row id: each batch reads on from the last, whatever the size of the file
        rows = connection.execute(f"{_STALE} AND m.row_id > ? ORDER BY m.row_id LIMIT ?", (last_row_id, batch_size)).fetchall()
        if not rows:
            break
        # embedded outside the write lock: other writers wait only for the insert
        vectors = embed(_texts(rows))
        with connections.write_transaction() as writing:
            _write_side(writing, rows, vectors)
        last_row_id = rows[-1][0]
        progress.advance(len(rows))
    with connections.write_transaction() as writing:
        count = _switch(writing, model_name, dimension, embed, batch_size)
    progress.finish()
    return count


def _texts(rows: Sequence[tuple[int, str, str]]) -> list[str]:
    """What each row's vector is made from (`memoryscope.memory.embedding_text`)."""
    return [embedding_text_of(content, json.loads(meta)) for _, content, meta in rows]


def _write_side(connection: sqlite3.Connection, rows: Sequence[tuple[int, str, str]], vectors: np.ndarray) -> None:
    connection.executemany(
        _INSERT_SIDE,
        [
            (row_id, content, vector.astype(np.float32).tobytes())
            for (row_id, content, _), vector in zip(rows, vectors, strict=True)
        ],
    )


def _switch(connection: sqlite3.Connection, model_name: str, dimension: int, embed: Embed, batch_size: int) -> int:
    """Inside one write transaction: catch up, swap the vectors, record the model, cut the change log."""
    # rows written by others since their batch (normally none: stop writers before re-embedding)
    stragglers = connection.execute(_STALE).fetchall()
    for start in range(0, len(stragglers), batch_size):
        batch = stragglers[start : start + batch_size]
        _write_side(connection, batch, embed(_texts(batch)))
    connection.execute("DELETE FROM memory_vectors")
    count = connection.execute(
        "INSERT INTO memory_vectors (row_id, vector) "
        "SELECT r.row_id, r.vector FROM reembed_vectors AS r JOIN memories AS m ON m.row_id = r.row_id"
    ).rowcount
    connection.executemany(
        "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)",
        [("embedding_model", model_name), ("embedding_dimension", str(dimension))],
    )
    connection.execute("DELETE FROM store_meta WHERE key IN ('reembed_model', 'reembed_dimension')")
    connection.execute("DROP TABLE reembed_vectors")
    # vectors changed without a change-log entry: move the log past every matrix's position and
    # declare it pruned there, so each matrix (in any process) reloads on its next search
    connection.execute("INSERT INTO memory_changes (user_name, row_id) VALUES ('', -1)")
    head = connection.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memory_changes'").fetchone()[0]
    connection.execute("DELETE FROM memory_changes")
    connection.execute("UPDATE store_meta SET value = ? WHERE key = 'changes_pruned_through'", (str(head),))
    return int(count)
