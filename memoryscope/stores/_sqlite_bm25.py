"""FTS5's own BM25 ranking of a large user's keyword search, computed with numpy.

Matching a query in FTS5 is cheap (~0.6 ms at 100k memories); scoring every match with
`bm25()` is not (~10 ms p50, ~25 ms p95: one call into the auxiliary-function API per row). So
for a user with many memories the user's posting lists are kept in memory (`UserWords`, built
from the words FTS5 holds for the user) and the same formula is computed over them:

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
import math
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from memoryscope.stores._sqlite_bm25_top import reachable
from memoryscope.stores._sqlite_schema import KEYWORD_INDEX_VERSION, PRUNED_THROUGH_SQL, ROWID_SPAN

if TYPE_CHECKING:  # a type only: `_sqlite_connections` imports modules that import this one
    from memoryscope.stores._sqlite_connections import SqliteConnections

__all__ = ["BUILD_AFTER", "BuildStopped", "MemoryWords", "Pacer", "UserWords", "phrases_of"]

BUILD_AFTER = 3  # searches of a user answered by FTS5 before its lists are built
_SLICE_S = 0.0005  # a build's work between two rests ...
_REST_S = 0.001  # ... and each rest, when the lock passes to searches that wait for it
_ROWS_PER_CHECK = 16  # rows a build handles between two looks at the clock
_K1 = 1.2
_B = 0.75
_PLAIN = re.compile(r"[0-9a-z\u4e00-\u9fff ]*")  # tokens unicode61 keeps whole and unchanged
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
_SCRATCH_KEPT = 2  # arrays of a user's size kept for searches at the same time (`UserWords._every`)


def phrases_of(match: str) -> list[str] | None:
    """The phrases of a `match_expression`, in order; None if one is not a single plain token."""
    phrases = [phrase.replace('""', '"') for phrase in _PHRASE.findall(match)]
    if not phrases or any(" " in phrase or not _PLAIN.fullmatch(phrase) for phrase in phrases):
        return None
    return phrases


class BuildStopped(Exception):
    """A paced build was asked to stop (its store is closing)."""


class Pacer:
    """Rests a background thread `rest_s` after each `slice_s` (see the module's docstring). A
    slice is wall time, waits for the lock included: a thread that had to wait long for the lock
    after its rest has had its turn, and rests again soon. Once `stop` is set, the next step
    raises `BuildStopped`: a paced build is slow, and closing a store must not wait for it."""

    def __init__(self, slice_s: float = _SLICE_S, rest_s: float = _REST_S, stop: threading.Event | None = None) -> None:
        self.slice_s = slice_s
        self.rest_s = rest_s
        self.rests = 0
        self._stop = stop
        self._slice_ends = time.perf_counter() + slice_s

    def step(self) -> None:
        """Call between small pieces of work: rests when the current slice is used up."""
        if self._stop is not None and self._stop.is_set():
            raise BuildStopped
        if time.perf_counter() >= self._slice_ends:
            time.sleep(self.rest_s)
            self.rests += 1
            self._slice_ends = time.perf_counter() + self.slice_s


@dataclass
class _Rows:
    """A user's `memory_words` rows, column by column: plain ints and strings, which the garbage
    collector does not track (a build keeping thousands of row tuples set off full collections
    of the whole process, 25-50 ms with every search stopped)."""

    rowids: list[int] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)
    words: list[str] = field(default_factory=list)

    def add_plain(self, batch: list[tuple[int, str, str]]) -> bool:
        """Add `(rowid, scope, words)` rows; False, adding none, if a word among them is not a
        plain token (FTS5 must rank that user)."""
        if not batch:
            return True
        # one match for the batch: its scopes and words joined by spaces are plain exactly when each one is
        if not _PLAIN.fullmatch(" ".join(f"{scope} {words}" for _, scope, words in batch)):
            return False
        rowids, scopes, words = zip(*batch, strict=True)
        self.rowids += rowids
        self.scopes += scopes
        self.words += words
        return True


@dataclass
class _Postings:
    """Rows' postings: one entry per (word, row) pair, in any order; `lengths` per row."""

    terms: np.ndarray  # int64 word numbers
    rows: np.ndarray  # int64 positions of the rows
    counts: np.ndarray  # float64 occurrences of the word in the row
    lengths: np.ndarray  # float64 tokens of each row, every column's


def _postings(rows: _Rows, vocabulary: dict[str, int], pacer: Pacer) -> _Postings:
    """The postings of `rows` (positions in their order), numbering new words into `vocabulary`
    in order of appearance."""
    count = len(rows.words)
    lengths = np.empty(count, dtype=np.float64)
    terms: list[np.ndarray] = []  # each chunk's token numbers (one array a chunk: no long conversion at the end)
    per_row = np.empty(count, dtype=np.int64)  # each row's tokens in `words`
    for start in range(0, count, _ROWS_PER_CHECK):
        stop = start + _ROWS_PER_CHECK
        tokens_of = [words.split() for words in rows.words[start:stop]]
        for position, (tokens, scope) in enumerate(zip(tokens_of, rows.scopes[start:stop], strict=True), start):
            per_row[position] = len(tokens)
            lengths[position] = len(tokens) + len(scope.split())  # D counts every column's tokens
        tokens = [token for row_tokens in tokens_of for token in row_tokens]
        for token in dict.fromkeys(tokens):
            if token not in vocabulary:
                vocabulary[token] = len(vocabulary)
        terms.append(np.fromiter(map(vocabulary.__getitem__, tokens), dtype=np.int64, count=len(tokens)))
        pacer.step()
    positions = np.repeat(np.arange(count, dtype=np.int64), per_row)
    span = max(count, 1)
    numbers = np.concatenate(terms) if terms else np.empty(0, dtype=np.int64)
    pairs, counts = np.unique(numbers * span + positions, return_counts=True)
    return _Postings(pairs // span, pairs % span, counts.astype(np.float64), lengths)


class UserWords:
    """One user's posting lists as of change-log position `seq`: for each word the rows holding
    it (positions into `row_ids`, which ascend) and how often. Made by `built` (every row of the
    user) or `updated` (only the rows changed since)."""

    def __init__(self, seq: int, row_ids: np.ndarray, vocabulary: dict[str, int], postings: _Postings) -> None:
        self.seq = seq
        self.row_ids = row_ids
        span = max(row_ids.size, 1)
        order = np.argsort(postings.terms * span + postings.rows, kind="stable")
        self._vocabulary = vocabulary  # never changed once made: searches read it from other threads
        self._docs = postings.rows[order].astype(np.int32)
        # counts are small whole numbers: 2 bytes a posting instead of 8 (a million memories hold
        # ~14 million postings), and the same float64 numbers once a search's arithmetic widens them
        self._counts = postings.counts[order].astype(_small(postings.counts))
        self._starts = np.searchsorted(postings.terms[order], np.arange(len(vocabulary) + 1))
        self._lengths = postings.lengths
        # a row's length as a number into its user's few distinct lengths, kept per posting: a
        # search computes the length norm once per distinct length, never once per row
        self._length_values, codes = np.unique(postings.lengths, return_inverse=True)
        self._posting_lengths = codes.astype(_small(codes))[self._docs]
        self._scratch: list[tuple[np.ndarray, np.ndarray]] = []  # zeroed arrays for `_every`, one per search at a time

    @classmethod
    def built(cls, seq: int, rows: _Rows, base: int, pacer: Pacer) -> UserWords:
        """The lists of every row of the user (`rows`, by ascending rowid; `base` the user's first rowid)."""
        vocabulary: dict[str, int] = {}
        postings = _postings(rows, vocabulary, pacer)
        return cls(seq, np.asarray(rows.rowids, dtype=np.int64) - base, vocabulary, postings)

    def updated(self, seq: int, changed: np.ndarray, rows: _Rows, base: int, pacer: Pacer) -> UserWords:
        """These lists with the rows `changed` since (row ids) replaced by `rows`, what those
        of them still of the user hold now (the rest were deleted or moved away): the same
        lists as `built` would make, from a fraction of the work."""
        vocabulary = dict(self._vocabulary)
        fresh = _postings(rows, vocabulary, pacer)
        kept = ~np.isin(self.row_ids, changed)
        kept_postings = kept[self._docs]
        row_ids = np.concatenate([self.row_ids[kept], np.asarray(rows.rowids, dtype=np.int64) - base])
        order = np.argsort(row_ids, kind="stable")
        position = np.empty(order.size, dtype=np.int64)
        position[order] = np.arange(order.size)  # a row's place among the rows after the update
        kept_index = np.cumsum(kept) - 1  # an old position's place among the kept rows
        old_terms = np.repeat(np.arange(self._starts.size - 1), np.diff(self._starts))
        postings = _Postings(
            terms=np.concatenate([old_terms[kept_postings], fresh.terms]),
            rows=np.concatenate([position[kept_index[self._docs[kept_postings]]], position[int(kept.sum()) + fresh.rows]]),
            counts=np.concatenate([self._counts[kept_postings], fresh.counts]),
            lengths=np.concatenate([self._lengths[kept], fresh.lengths])[order],
        )
        return UserWords(seq, row_ids[order], vocabulary, postings)

    def ranked(self, phrases: list[str], rows: int, tokens: int, limit: int | None) -> list[tuple[int, float]]:
        """`(row_id, score)` best first (ties: lower row id), as FTS5 ranks them with `bm25()`;
        `rows` and `tokens` are FTS5's totals for the whole table.

        The length norm is computed once per distinct length, not once per row; the scores
        only of the rows that can reach the best `limit` (`_sqlite_bm25_top`); and only the rows at or
        above the limit-th best score are sorted."""
        if limit is not None and limit <= 0:
            return []
        parts = self._parts(phrases, rows, tokens)
        if not parts:
            return []
        candidates, score, floor = reachable(parts, limit, lambda: self._every(parts))
        if floor > 0.0:  # a lower bound of the limit-th best score: the rows below it are out
            kept = np.flatnonzero(score >= floor)
            candidates, score = candidates[kept], score[kept]
        if limit is not None and candidates.size > limit:
            # the limit-th best score: every row below it is out, every row at it may still be in (ties)
            least = np.partition(score, candidates.size - limit)[candidates.size - limit]
            kept = np.flatnonzero(score >= least)
            candidates, score = candidates[kept], score[kept]
        order = np.lexsort((candidates, -score))[:limit]  # positions ascend as row ids do
        return list(zip(self.row_ids[candidates[order]].tolist(), score[order].tolist(), strict=True))

    def _every(self, parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        """Every row holding a phrase (positions, ascending) and its score, summed phrase by
        phrase, in order, from 0.0, as FTS5 sums them. Summed into arrays of the user's size,
        which are kept and handed back zeroed: fresh ones cost a page fault every 4 KiB (two
        thousand for the scores of a million rows), more than the sums themselves."""
        try:
            score, held = self._scratch.pop()
        except IndexError:
            score, held = np.zeros(self.row_ids.size), np.zeros(self.row_ids.size, dtype=bool)
        for docs, terms in parts:
            np.add.at(score, docs, terms)  # `score[docs] += terms` (a phrase's rows are distinct), ~1/3 faster
            held[docs] = True
        candidates = np.flatnonzero(held)
        found = score[candidates]
        score[candidates] = 0.0
        held[candidates] = False
        if len(self._scratch) < _SCRATCH_KEPT:
            self._scratch.append((score, held))
        return candidates, found

    def _parts(self, phrases: list[str], rows: int, tokens: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each phrase the user has, in order: the positions of its rows (ascending) and its
        term of each row's score, by FTS5's formula and in its order of operations."""
        norm = _K1 * ((1 - _B) + (_B * self._length_values) / (tokens / rows))
        parts: list[tuple[np.ndarray, np.ndarray]] = []
        for phrase in phrases:
            term = self._vocabulary.get(phrase)
            hits = 0 if term is None else int(self._starts[term + 1] - self._starts[term])
            idf = math.log((rows - hits + 0.5) / (hits + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            if term is None:
                continue
            span = slice(self._starts[term], self._starts[term + 1])
            frequency = self._counts[span]
            parts.append((self._docs[span], idf * ((frequency * (_K1 + 1.0)) / (frequency + norm[self._posting_lengths[span]]))))
        return parts


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


def _small(values: np.ndarray) -> type[np.unsignedinteger]:
    """The smallest of uint16 and uint32 that holds every one of `values` (whole, not negative)."""
    return np.uint16 if values.size == 0 or values.max() < 1 << 16 else np.uint32


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
