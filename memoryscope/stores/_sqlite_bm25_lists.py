"""A user's posting lists in memory (`UserWords`) and how they are made: FTS5's `bm25()` of
`_sqlite_bm25` computed from them, the rows read for them (`_Rows`), and the pacing of the
background thread that makes them (`Pacer`). `_sqlite_bm25` says when and why."""

from __future__ import annotations

import math
import re
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from memoryscope.stores._sqlite_bm25_top import reachable

__all__ = ["BuildStopped", "Pacer", "UserWords"]

_SLICE_S = 0.0005  # a build's work between two rests ...
_REST_S = 0.001  # ... and each rest, when the lock passes to searches that wait for it
_ROWS_PER_CHECK = 16  # rows a build handles between two looks at the clock
_K1 = 1.2
_B = 0.75
_PLAIN = re.compile(r"[0-9a-z\u4e00-\u9fff ]*")  # tokens unicode61 keeps whole and unchanged
_SCRATCH_KEPT = 2  # arrays of a user's size kept for searches at the same time (`UserWords._every`)


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


def _small(values: np.ndarray) -> type[np.unsignedinteger]:
    """The smallest of uint16 and uint32 that holds every one of `values` (whole, not negative)."""
    return np.uint16 if values.size == 0 or values.max() < 1 << 16 else np.uint32
