"""Re-indexing the keywords of a file an older MemoryScope wrote, without blocking other writers.

When `KEYWORD_INDEX_VERSION` changes, every memory's words (and its ranker terms,
`memories.rank_terms`) must be made again. Done in one
transaction, a 1M-memory file held the write lock for ~80 s. Here it goes in chunks of rows (by
`row_id`), each in its own short write transaction that also saves how far it got
(`keyword_reindex` in `store_meta`: the target version, the phase and the last id done; after
the words, entries of no memory are swept the same way), so:
- other writers (threads, processes) wait at most one chunk;
- a crash or kill loses at most one chunk: the next open carries on from the saved position;
- two processes opening the file at once share the work (each chunk reads the position in its
  own transaction).
Meanwhile searches see old words for rows not done yet and new words for the rest: results
mix the two, but each user's search stays in the user's rowid range. Every write indexes with
the current version (`KeywordIndex.write`), so a memory written during the re-index ends up
with the new words whichever side of the position it is. The version is recorded as current
in the transaction of the last chunk.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryscope.progress import Progress, StderrProgress
from memoryscope.stores._sqlite_schema import (
    KEYWORD_INDEX_VERSION,
    NODE_COLUMNS,
    ROWID_SPAN,
    DamagedRowError,
    assign_keyword_slots,
    node_from_row,
    scope_token,
    scoped_words,
    words_rowid,
)
from memoryscope.text import keyword_text, rank_terms

if TYPE_CHECKING:  # a type only: `_sqlite_connections` calls this module
    from memoryscope.stores._sqlite_connections import SqliteConnections

__all__ = ["REINDEX_CHUNK_ROWS", "REINDEX_NOTICE_FROM", "ReindexReport", "continue_keyword_reindex", "start_keyword_reindex"]

logger = logging.getLogger("memoryscope.stores.sqlite")
# re-indexing this many memories takes seconds: say so, and how far it got (on stderr too)
REINDEX_NOTICE_FROM = 20_000
# rows a chunk: ~0.3-0.6 s of work on one core, so another writer never waits long
REINDEX_CHUNK_ROWS = 4_000

_ROWS_AFTER = (
    f"SELECT s.slot, m.row_id, {', '.join(f'm.{name}' for name in NODE_COLUMNS)} "
    "FROM memories AS m JOIN keyword_scopes AS s ON s.user_name = m.user_name "
    "WHERE m.row_id > ? ORDER BY m.row_id LIMIT ?"
)
_WORDS_AFTER = "SELECT rowid FROM memory_words WHERE rowid > ? ORDER BY rowid LIMIT ?"
_DELETE_ORPHANS = f"""
DELETE FROM memory_words WHERE rowid IN (
    SELECT j.value FROM json_each(?) AS j WHERE NOT EXISTS (
        SELECT 1 FROM memories AS m JOIN keyword_scopes AS s ON s.user_name = m.user_name
        WHERE m.row_id = j.value % {ROWID_SPAN} AND s.slot = j.value / {ROWID_SPAN}))
"""


class ReindexReport:
    """What `continue_keyword_reindex` did: rows re-indexed, chunks, the longest chunk's seconds."""

    def __init__(self) -> None:
        self.rows = 0
        self.chunks = 0
        self.longest_chunk_s = 0.0
        self.finished = False


def start_keyword_reindex(connection: sqlite3.Connection) -> bool:
    """Inside the caller's write transaction: True when the keyword index is not of the current
    version, after recording a re-index to it (kept as it is when one is already under way)."""
    found = connection.execute("SELECT value FROM store_meta WHERE key = 'keyword_index_version'").fetchone()
    if found is not None and found[0] == KEYWORD_INDEX_VERSION:
        return False
    state = _state(connection)
    if state is None or state["version"] != KEYWORD_INDEX_VERSION:
        _save_state(connection, -1)
    assign_keyword_slots(connection)
    return True


def continue_keyword_reindex(
    connections: SqliteConnections,
    path: Path,
    *,
    chunk_rows: int | None = None,
    stop_after_chunks: int | None = None,
    progress: Progress | None = None,
) -> ReindexReport:
    """Re-index chunk by chunk from the saved position until done (or, for tests that simulate a
    kill, after `stop_after_chunks`). Each chunk is one write transaction."""
    chunk_rows = chunk_rows or REINDEX_CHUNK_ROWS
    report = ReindexReport()
    connection = connections.connection()
    total, done_before = _counts(connection)
    big = total >= REINDEX_NOTICE_FROM
    if big:
        logger.warning("re-indexing the keywords of %d memories in %s (once, after an upgrade; resumable)", total, path)
    progress = progress or (StderrProgress() if big else Progress())
    progress.start("re-index keywords", total)
    progress.advance(done_before)
    try:
        while stop_after_chunks is None or report.chunks < stop_after_chunks:
            started = time.perf_counter()
            with connections.write_transaction() as writing:
                count, finished = _one_chunk(writing, chunk_rows)
            report.longest_chunk_s = max(report.longest_chunk_s, time.perf_counter() - started)
            report.rows += count
            report.chunks += 1
            progress.advance(count)
            logger.info("re-indexed the keywords of %d of %d memories", done_before + report.rows, total)
            if finished:
                report.finished = True
                break
    finally:
        progress.finish()
    if big and report.finished:
        logger.warning("re-indexed the keywords of %d memories in %s", done_before + report.rows, path)
    return report


def _one_chunk(connection: sqlite3.Connection, chunk_rows: int) -> tuple[int, bool]:
    """The next chunk after the saved position; (memories re-indexed, finished). First every
    memory's words are made again (by `row_id`); then entries of no memory are swept (by FTS
    rowid), as the whole rebuild of before did by starting from an empty index."""
    state = _state(connection)
    if state is None or state["version"] != KEYWORD_INDEX_VERSION:
        return 0, True  # another process finished it (or a newer MemoryScope took over)
    if state.get("phase") == "sweep":
        return 0, _sweep_chunk(connection, int(state["after"]), chunk_rows)
    assign_keyword_slots(connection)  # users whose first memory came since
    rows = connection.execute(_ROWS_AFTER, (state["after"], chunk_rows)).fetchall()
    for row in rows:
        try:
            node = node_from_row(row[2:])
        except DamagedRowError as error:
            logger.warning("%s; its keyword entry is left as it was", error)
            continue
        words = keyword_text(node)
        # the ranker's terms follow the keyword words' version (no change-log entry: see the trigger)
        connection.execute("UPDATE memories SET rank_terms = ? WHERE row_id = ?", (rank_terms(node), row[1]))
        rowid = words_rowid(row[0], row[1])
        connection.execute("DELETE FROM memory_words WHERE rowid = ?", (rowid,))
        connection.execute(
            "INSERT INTO memory_words (rowid, scope, words) VALUES (?, ?, ?)",
            (rowid, scope_token(row[3]), scoped_words(row[0], words)),
        )
    if len(rows) < chunk_rows:
        _save_state(connection, -1, phase="sweep")
    else:
        _save_state(connection, rows[-1][1])
    return len(rows), False


def _sweep_chunk(connection: sqlite3.Connection, after: int, chunk_rows: int) -> bool:
    """Delete the entries among the next `chunk_rows` (by rowid) that belong to no memory; True
    when the sweep is through, and then the new version is recorded."""
    rowids = [rowid for (rowid,) in connection.execute(_WORDS_AFTER, (after, chunk_rows))]
    connection.execute(_DELETE_ORPHANS, (json.dumps(rowids),))
    if len(rowids) < chunk_rows:
        connection.execute("DELETE FROM store_meta WHERE key = 'keyword_reindex'")
        connection.execute(
            "INSERT OR REPLACE INTO store_meta (key, value) VALUES ('keyword_index_version', ?)", (KEYWORD_INDEX_VERSION,)
        )
        return True
    _save_state(connection, rowids[-1], phase="sweep")
    return False


def _state(connection: sqlite3.Connection) -> dict[str, Any] | None:
    found = connection.execute("SELECT value FROM store_meta WHERE key = 'keyword_reindex'").fetchone()
    return None if found is None else dict(json.loads(found[0]))


def _save_state(connection: sqlite3.Connection, after: int, phase: str = "words") -> None:
    connection.execute(
        "INSERT OR REPLACE INTO store_meta (key, value) VALUES ('keyword_reindex', ?)",
        (json.dumps({"version": KEYWORD_INDEX_VERSION, "after": after, "phase": phase}),),
    )


def _counts(connection: sqlite3.Connection) -> tuple[int, int]:
    """Memories in all, and those at or before the saved position (done by an earlier run)."""
    state = _state(connection) or {"after": -1}
    after = state["after"] if state.get("phase", "words") == "words" else 1 << 62  # sweeping: every row is done
    sql = "SELECT count(*), count(*) FILTER (WHERE row_id <= ?) FROM memories"
    total, done = connection.execute(sql, (after,)).fetchone()
    return int(total), int(done)
