"""`UserWords.ranked` against FTS5's own `bm25()` on a real SQLite file: every path of its
scoring (every matching row summed, the rarest words' rows first with the rest skipped, in one
round and in two) must give FTS5's ids, scores and tie order for every limit."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import memoryscope.stores._sqlite_bm25_lists as bm25_lists
import memoryscope.stores._sqlite_bm25_top as bm25_top
from memoryscope.stores._sqlite_bm25 import _varints
from memoryscope.stores._sqlite_bm25_lists import Pacer, UserWords, _Rows

_VOCABULARY = [f"w{index}" for index in range(300)]


def _texts(count: int, seed: int) -> list[str]:
    """Sentences with Zipf-like word frequencies (a few words in most rows, many in few) and
    lengths of 1-30 words, so norms, repeats and ties all occur."""
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(count):
        picks = np.minimum(rng.zipf(1.25, size=int(rng.integers(1, 31))), len(_VOCABULARY)) - 1
        texts.append(" ".join(_VOCABULARY[pick] for pick in picks))
    return texts


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[sqlite3.Connection, UserWords, int, int]]:
    """3,000 rows in an FTS5 table shaped as the store's (`scope`, `words`), their posting lists,
    and FTS5's totals (rows, tokens)."""
    path = tmp_path_factory.mktemp("fts") / "words.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE VIRTUAL TABLE memory_words USING fts5 (scope, words)")
    rows = [(index + 1, "s", text) for index, text in enumerate(_texts(3000, seed=11))]
    connection.executemany("INSERT INTO memory_words (rowid, scope, words) VALUES (?, ?, ?)", rows)
    connection.commit()
    total_rows, *columns = _varints(connection.execute("SELECT block FROM memory_words_data WHERE id = 1").fetchone()[0])
    columns_rows = _Rows()
    assert columns_rows.add_plain(rows)
    words = UserWords.built(1, columns_rows, 0, Pacer(slice_s=3600.0))
    yield connection, words, total_rows, sum(columns)
    connection.close()


def _fts5(connection: sqlite3.Connection, phrases: list[str], limit: int | None) -> list[tuple[int, float]]:
    match = "words : (" + " OR ".join(f'"{phrase}"' for phrase in phrases) + ")"
    sql = (
        "SELECT rowid, -bm25(memory_words, 0.0, 1.0) AS score FROM memory_words "
        "WHERE memory_words MATCH ? ORDER BY score DESC, rowid"
    )
    if limit is None:
        return connection.execute(sql, (match,)).fetchall()
    return connection.execute(sql + " LIMIT ?", (match, limit)).fetchall()


def _queries(seed: int) -> list[list[str]]:
    """Queries of 2-8 words: rare and common ones mixed, some repeated, some unknown."""
    rng = np.random.default_rng(seed)
    queries = [[_VOCABULARY[int(pick)] for pick in rng.integers(0, 120, size=int(rng.integers(2, 9)))] for _ in range(60)]
    return [*queries, ["w0", "w1", "w2", "w3"], ["w250", "w0"], ["w5", "w5", "w40"], ["nothing", "w7"], ["w0"]]


@pytest.mark.parametrize("limit", [1, 7, 50, 166, None])
def test_ranks_as_fts5_for_every_limit(indexed: tuple[sqlite3.Connection, UserWords, int, int], limit: int | None) -> None:
    connection, words, rows, tokens = indexed
    for phrases in _queries(seed=limit or 0):
        assert words.ranked(phrases, rows, tokens, limit) == _fts5(connection, phrases, limit), phrases


def test_every_path_is_taken_and_each_ranks_as_fts5(
    indexed: tuple[sqlite3.Connection, UserWords, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queries above reach each way `reachable` can end: the rarest words' rows alone (one
    round or two) and every matching row (with and without a bound from a first round)."""
    connection, words, rows, tokens = indexed
    ends: Counter[str] = Counter()
    reachable = bm25_top.reachable

    def counted(parts, limit, every):  # type: ignore[no-untyped-def]  # a spy: the real function, its outcome counted
        called = []

        def every_counted() -> tuple[np.ndarray, np.ndarray]:
            called.append(True)
            return every()

        candidates, score, floor = reachable(parts, limit, every_counted)
        if called:
            ends["every, bounded" if floor > 0.0 else "every"] += 1
        else:
            ends["rarest first"] += 1
            rows_held = len(set().union(*(docs.tolist() for docs, _ in parts)))
            if candidates.size < rows_held:
                ends["rows skipped"] += 1
        return candidates, score, floor

    monkeypatch.setattr(bm25_lists, "reachable", counted)
    for limit in (3, 20):
        for phrases in _queries(seed=100 + limit):
            assert words.ranked(phrases, rows, tokens, limit) == _fts5(connection, phrases, limit), phrases
    assert ends["rarest first"] > 0 and ends["rows skipped"] > 0 and ends["every"] > 0, ends
    assert ends["every, bounded"] > 0, ends


def test_a_search_leaves_its_scratch_arrays_zeroed(indexed: tuple[sqlite3.Connection, UserWords, int, int]) -> None:
    """The arrays `_every` sums into are kept for the next search: one left dirty would add its
    scores to the next search's."""
    connection, words, rows, tokens = indexed
    for phrases in (["w0", "w1", "w2"], ["w3", "w0"], ["w0", "w1", "w2"]):
        assert words.ranked(phrases, rows, tokens, None) == _fts5(connection, phrases, None)
    assert words._scratch, "the arrays were not kept"
    for score, held in words._scratch:
        assert not score.any() and not held.any()


def test_no_limit_and_a_zero_limit(indexed: tuple[sqlite3.Connection, UserWords, int, int], tmp_path: Path) -> None:
    connection, words, rows, tokens = indexed
    assert words.ranked(["w0", "w9"], rows, tokens, 0) == []
    assert words.ranked(["unknown"], rows, tokens, 10) == [] == _fts5(connection, ["unknown"], 10)
    everything = words.ranked(["w0", "w9"], rows, tokens, None)
    assert len(everything) == len(_fts5(connection, ["w0", "w9"], None)) > 1000
