"""FTS5's own BM25 ranking of a large user's keyword search, computed with numpy.

Matching a query in FTS5 is cheap (~0.6 ms at 100k memories); scoring every match with
`bm25()` is not (~10 ms p50, ~25 ms p95: one call into the auxiliary-function API per row). So
for a user with many memories the user's posting lists are kept in memory (`UserWords` of
`_sqlite_bm25_lists`, built from the words FTS5 holds for the user) and the same formula is
computed over them:

    score = sum over the query's phrases, in order, of
            idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl))

with k1 = 1.2, b = 0.75, f a phrase's count in the row's `words`, D the row's tokens in all
columns, avgdl and the row count N from FTS5's own totals (read on every search: other users'
writes change them), idf = log((N - n + 0.5) / (n + 0.5)) (1e-6 when not positive), n the rows
holding the phrase. The operations are FTS5's (`fts5_aux.c`), in its order, in float64, so the
scores are the same numbers, and ties go to the lower row id as in SQL.

A search asks for the best ~170 of a user's rows, and a query's words can be in a fifth of them.
So `UserWords.ranked` computes the length norm once per distinct length (not per row), scores
first the rows holding the query's rarest words, and skips the rows that cannot reach the best
`limit` (MaxScore, `_sqlite_bm25_top`); what is left is selected, not sorted whole. One user of
synthetic memories (`benchmarks.scale`'s texts), 200 queries, limit 166, CPU time p50 / p95,
the old and the new ranking in turn on a loaded machine: at 1M 14.0-14.9 / 25-26 ms before,
2.6-2.7 / 6.4-7.0 ms after; at 100k 0.85 / 1.5 against 0.46-0.47 / 0.75-0.77 ms.

Only where the result is certainly FTS5's: words of plain tokens (ASCII letters and digits, or
CJK ideographs: one token each for FTS5's `unicode61` tokenizer, kept as they are), one-token
phrases, the current keyword index version with no re-index under way, and no change to the
user since the posting lists were made (the change log says). Anything else: None, and the
caller asks FTS5.

Lists are made on a background thread, and FTS5 answers until they are:
- **built** from every row of the user, after `BUILD_AFTER` searches of a user the process has no
  lists for (a one-off search, as from a command line, builds nothing);
- **updated** at the first search that finds them stale: only the rows the change log names since
  they were made are read, and the lists come out as a build would make them. At 10k memories an
  update of one row takes ~8 ms, where a build takes ~0.15 s; at 100k, ~80 ms against ~0.8 s.
  When the log no longer reaches back that far (pruned) or more than a fifth of the rows
  changed, they are built again.

Making lists is partly Python, and a thread running Python keeps the interpreter's lock from
every search of the process, up to 5 ms at a time. So it works in slices of `_SLICE_S` and
sleeps `_REST_S` after each (`Pacer`), which hands the lock to the searches waiting for it; a
build takes ~3x as long. Another user's retrieves, one due every 4 ms, while a 10k-memory user
is written to (`benchmarks.rebuild_stall`): p95 48-69 ms with whole unpaced builds, 13-14 ms
with paced builds, 3.8-4.0 ms with updates (3.7-4.0 ms with no write at all).
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

from memoryscope.stores._sqlite_bm25_lists import _PLAIN, _ROWS_PER_CHECK, BuildStopped, Pacer, UserWords, _Rows
from memoryscope.stores._sqlite_schema import KEYWORD_INDEX_VERSION, PRUNED_THROUGH_SQL, ROWID_SPAN

if TYPE_CHECKING:  # a type only: `_sqlite_connections` imports modules that import this one
    from memoryscope.stores._sqlite_connections import SqliteConnections

__all__ = ["BUILD_AFTER", "BuildStopped", "MemoryWords", "Pacer", "UserWords", "phrases_of"]

BUILD_AFTER = 3  # searches of a user answered by FTS5 before its lists are built
_PHRASE = re.compile(r'"((?:[^"]|"")*)"')
# what must hold for posting lists built at `seq` to still be the user's words
_STATE_SQL = """
SELECT (SELECT max(seq) FROM memory_changes WHERE user_name = ?),
       (SELECT CAST(value AS INTEGER) FROM store_meta WHERE key = 'changes_pruned_through'),
       (SELECT value FROM store_meta WHERE key = 'keyword_index_version'),
       (SELECT count(*) FROM store_meta WHERE key = 'keyword_reindex')
"""
_HEAD_SQL = "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'memory_changes'), 0)"
_TOTALS_SQL = "SELECT block FROM memory_words_data WHERE id = 1"  # FTS5's row count and token totals
_CHANGED_SQL = "SELECT DISTINCT row_id FROM memory_changes WHERE user_name = ? AND seq > ? LIMIT ?"
_WORDS_OF_SQL = (
    "SELECT rowid, scope, words FROM memory_words WHERE rowid IN (SELECT j.value FROM json_each(?) AS j) ORDER BY rowid"
)
_UPDATE_UP_TO = 0.2  # changed rows, as a share of the user's, that an update applies; more: every row is read again
_UPDATE_AT_LEAST = 256  # ... whatever the user's size


def phrases_of(match: str) -> list[str] | None:
    """The phrases of a `match_expression`, in order; None if one is not a single plain token."""
    phrases = [phrase.replace('""', '"') for phrase in _PHRASE.findall(match)]
    if not phrases or any(" " in phrase or not _PLAIN.fullmatch(phrase) for phrase in phrases):
        return None
    return phrases


class MemoryWords:
    """The posting lists of recently searched users with at least `from_rows` memories, made on
    a background thread (its own connection): built, or updated once the user changes."""

    def __init__(self, connections: SqliteConnections, from_rows: int, max_users: int) -> None:
        self.from_rows = from_rows
        self._connections = connections
        self._max_users = max_users
        self._users: OrderedDict[str, UserWords] = OrderedDict()
        self._not_before: dict[str, float] = {}  # no rebuild before then: a user being written to
        self._misses: dict[str, int] = {}  # searches FTS5 answered since the last build was asked for
        self._lock = threading.Lock()
        self._building: set[str] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._closing = threading.Event()  # set by `close`: a build under way stops at its next step

    def ranked(
        self, connection: sqlite3.Connection, user_name: str, slot: int, match: str, limit: int | None, user_rows: int
    ) -> list[tuple[int, float]] | None:
        """FTS5's ranking of `match` for the user, from memory; None when FTS5 must answer."""
        if user_rows < self.from_rows:
            return None
        phrases = phrases_of(match)
        if phrases is None:
            return None
        user_last, pruned_through, version, reindexing = connection.execute(_STATE_SQL, (user_name,)).fetchone()
        if version != KEYWORD_INDEX_VERSION or reindexing:
            return None
        with self._lock:
            words = self._users.get(user_name)
            if words is not None:
                self._users.move_to_end(user_name)
        # changed since the build, or the log no longer tells (pruned past the build)
        if words is None or (user_last or 0) > words.seq or pruned_through > words.seq:
            self._build_later(user_name, slot)
            return None
        totals = connection.execute(_TOTALS_SQL).fetchone()
        if totals is None:
            return None
        rows, *columns = _varints(totals[0])
        return words.ranked(phrases, rows, sum(columns), limit) if rows > 0 else None

    def _build_later(self, user_name: str, slot: int) -> None:
        """Build the user's lists on the background thread once FTS5 has answered `BUILD_AFTER`
        searches: a one-off search (a command line) never pays for lists it would not use. Lists
        this process has, gone stale, are brought up to date at the first search that finds them so."""
        with self._lock:
            misses = self._misses[user_name] = self._misses.get(user_name, 0) + 1
            needed = 1 if user_name in self._users else BUILD_AFTER
            if misses < needed or user_name in self._building or time.monotonic() < self._not_before.get(user_name, 0.0):
                return
            self._misses.pop(user_name, None)
            self._building.add(user_name)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memoryscope-words")
            self._executor.submit(self._build, user_name, slot)

    def _build(self, user_name: str, slot: int) -> None:
        """The user's lists, updated from the changed rows when the stale ones allow it, else built."""
        started = time.thread_time()  # the build's own work: not its rests, nor waits for the lock
        try:
            connection = self._connections.connection()
            pacer = Pacer(stop=self._closing)
            with self._lock:
                stale = self._users.get(user_name)
            words = _updated_user(connection, user_name, slot, stale, pacer) if stale is not None else None
            if words is None:
                words = _read_user(connection, slot, pacer)
            with self._lock:
                if words is None:
                    self._users.pop(user_name, None)
                else:
                    self._users[user_name] = words
                    while len(self._users) > self._max_users:
                        self._users.popitem(last=False)
        except sqlite3.Error:
            pass  # FTS5 keeps answering; the next search tries again
        except BuildStopped:
            pass  # closing: the lists are dropped anyway
        finally:
            spent = time.thread_time() - started
            with self._lock:
                self._building.discard(user_name)
                # a user written to all the time would be rebuilt all the time: at most ~10% of a core
                self._not_before[user_name] = time.monotonic() + 10 * spent

    def wait(self) -> None:
        """Until every build started is done (for benchmarks, tests and `close`)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def close(self) -> None:
        """Drop the lists; builds not started are cancelled, one under way stops at its next step."""
        self._closing.set()
        with self._lock:
            executor, self._executor = self._executor, None
            self._users.clear()
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)


def _read_user(connection: sqlite3.Connection, slot: int, pacer: Pacer) -> UserWords | None:
    """The user's posting lists from what FTS5 holds, in one read transaction with the log's
    head; None when a word is not a plain token (FTS5 must rank that user)."""
    base = slot * ROWID_SPAN
    rows = _Rows()
    connection.execute("BEGIN")
    try:
        head = connection.execute(_HEAD_SQL).fetchone()[0]
        cursor = connection.execute(
            "SELECT rowid, scope, words FROM memory_words WHERE rowid BETWEEN ? AND ?", (base, base + ROWID_SPAN - 1)
        )
        while batch := cursor.fetchmany(_ROWS_PER_CHECK):
            if not rows.add_plain(batch):
                return None
            pacer.step()
    finally:
        connection.execute("COMMIT")
    return UserWords.built(head, rows, base, pacer)


def _updated_user(
    connection: sqlite3.Connection, user_name: str, slot: int, stale: UserWords, pacer: Pacer
) -> UserWords | None:
    """`stale` with the user's rows changed since it was built applied, in one read transaction
    with the log's head; None when that is not the way: the log no longer reaches back to
    `stale` (pruned), too many rows changed, or a changed row holds a word that is not a plain
    token (`_read_user` says what to do then)."""
    base = slot * ROWID_SPAN
    most = max(_UPDATE_AT_LEAST, int(stale.row_ids.size * _UPDATE_UP_TO))
    connection.execute("BEGIN")
    try:
        head = connection.execute(_HEAD_SQL).fetchone()[0]
        if connection.execute(PRUNED_THROUGH_SQL).fetchone()[0] > stale.seq:
            return None
        changed = [row[0] for row in connection.execute(_CHANGED_SQL, (user_name, stale.seq, most + 1))]
        if len(changed) > most:
            return None
        found = connection.execute(_WORDS_OF_SQL, (json.dumps([base + row_id for row_id in changed]),)).fetchall()
    finally:
        connection.execute("COMMIT")
    rows = _Rows()
    if not rows.add_plain(found):
        return None
    return stale.updated(head, np.asarray(changed, dtype=np.int64), rows, base, pacer)


def _varints(blob: bytes) -> list[int]:
    """SQLite varints (FTS5's totals record: row count, then tokens of each column)."""
    values, index = [], 0
    while index < len(blob):
        value = 0
        for step in range(9):
            byte = blob[index]
            index += 1
            if step == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        values.append(value)
    return values
