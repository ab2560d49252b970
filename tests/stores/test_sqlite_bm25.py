"""Keyword ranking from posting lists in memory (`_sqlite_bm25`): it must give FTS5's own results,
ids and scores, on a seeded random case, with filters, after writes, and fall back to FTS5
where it cannot be sure."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from memoryscope.memory import MemoryType
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores._sqlite_bm25 import (
    _ROWS_PER_CHECK,
    BUILD_AFTER,
    BuildStopped,
    Pacer,
    UserWords,
    _read_user,
    phrases_of,
)
from memoryscope.stores._sqlite_schema import ROWID_SPAN
from memoryscope.stores.base import MemoryFilter, SearchMode
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.store_contract import make_node, unit_vectors

_WORDS = [f"word{index}" for index in range(40)]


def _random_store(path: Path, model: LocalEmbedding, seed: int = 0) -> list[str]:
    """Two users of random sentences over a small vocabulary (many ties); the queries to ask."""
    rng = np.random.default_rng(seed)
    with SqliteMemoryStore(path=path, embedding_model=model) as store:
        nodes = []
        for index in range(160):
            # a Zipf-like pick: some words in most memories, some in few
            words = [_WORDS[min(int(rng.zipf(1.3)), 40) - 1] for _ in range(int(rng.integers(2, 12)))]
            kind = list(MemoryType)[index % 3]
            nodes.append(make_node(" ".join(words), user_name=("ann", "bob")[index % 4 == 0], memory_type=kind))
        store.upsert(nodes, vectors=unit_vectors(len(nodes), store.dimension, seed=seed))
    return [" ".join(rng.choice(_WORDS[:12], size=int(rng.integers(1, 5)))) for _ in range(25)]


def _stores(path: Path, model: LocalEmbedding) -> tuple[SqliteMemoryStore, SqliteMemoryStore]:
    in_memory = SqliteMemoryStore(path=path, embedding_model=model, keyword_in_memory_from=10)
    by_fts = SqliteMemoryStore(path=path, embedding_model=model, keyword_in_memory_from=10**9)
    return in_memory, by_fts


def _warm(store: SqliteMemoryStore, user: str = "ann") -> None:
    """Load the user's matrix (its size decides) and let the posting lists be built (they are
    asked for after `BUILD_AFTER` searches)."""
    for _ in range(BUILD_AFTER):
        store.search(MemoryFilter(user), query="word1", vector=unit_vectors(1, store.dimension, seed=1)[0], top_k=5)
    store.wait_for_background()


def _keyword(store: SqliteMemoryStore, query: str, memory_filter: MemoryFilter | None = None) -> list[tuple[str, float]]:
    hits = store.search(memory_filter or MemoryFilter("ann"), query=query, mode=SearchMode.KEYWORD, top_k=50)
    return [(hit.memory_id, float(hit.score or 0.0)) for hit in hits]


def test_the_same_ids_and_scores_as_fts5_on_a_seeded_random_case(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    queries = [*_random_store(path, embedding_model), "word1 word1 word2", "word39 nothing"]
    in_memory, by_fts = _stores(path, embedding_model)
    with in_memory, by_fts:
        _warm(in_memory)
        assert "ann" in in_memory._searcher._memory_words._users  # type: ignore[union-attr]
        kinds = MemoryFilter("ann", memory_types=[MemoryType.OBSERVATION, MemoryType.INSIGHT])
        for query in queries:
            assert _keyword(in_memory, query) == _keyword(by_fts, query)
            assert _keyword(in_memory, query, kinds) == _keyword(by_fts, query, kinds)
            vector = unit_vectors(1, in_memory.dimension, seed=len(query))[0]
            hybrid = [n.memory_id for n in in_memory.search(kinds, query=query, vector=vector, top_k=30)]
            assert hybrid == [n.memory_id for n in by_fts.search(kinds, query=query, vector=vector, top_k=30)]
        assert _keyword(in_memory, "word1") != []


def test_after_a_write_fts5_answers_until_the_lists_are_rebuilt(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    _random_store(path, embedding_model)
    in_memory, by_fts = _stores(path, embedding_model)
    with in_memory, by_fts:
        _warm(in_memory)
        built = in_memory._searcher._memory_words._users["ann"]  # type: ignore[union-attr]
        by_fts.upsert([make_node("word1 word1 word1 fresh", memory_id="new")], vectors=unit_vectors(1, 384, seed=4))
        first = _keyword(in_memory, "word1 fresh")
        assert first[0][0] == "new"
        assert first == _keyword(by_fts, "word1 fresh")
        in_memory.wait_for_background()
        in_memory._searcher._memory_words._not_before.clear()  # type: ignore[union-attr]
        for _ in range(BUILD_AFTER - 1):  # with the search above: asks for a rebuild
            _keyword(in_memory, "word1")
        in_memory.wait_for_background()
        assert in_memory._searcher._memory_words._users["ann"] is not built  # type: ignore[union-attr]
        assert _keyword(in_memory, "word1 fresh") == first


def test_a_one_off_search_builds_nothing(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    """A command line searching once must not pay for lists it will never use."""
    path = tmp_path / "m.db"
    _random_store(path, embedding_model)
    with SqliteMemoryStore(path=path, embedding_model=embedding_model, keyword_in_memory_from=10) as store:
        vector = unit_vectors(1, store.dimension, seed=1)[0]
        for _ in range(BUILD_AFTER - 1):
            store.search(MemoryFilter("ann"), query="word1", vector=vector, top_k=5)
        store.wait_for_background()
        assert store._searcher._memory_words._users == {}  # type: ignore[union-attr]


def test_words_that_are_not_plain_tokens_leave_the_ranking_to_fts5(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    """`keyword_text` only makes plain tokens; a row another program wrote may hold others."""
    path = tmp_path / "m.db"
    _random_store(path, embedding_model)
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE memory_words SET words = words || ' Ωmega-x' WHERE rowid = (SELECT max(rowid) FROM memory_words)")
    raw.close()
    in_memory, by_fts = _stores(path, embedding_model)
    with in_memory, by_fts:
        _warm(in_memory)
        assert "ann" not in in_memory._searcher._memory_words._users  # type: ignore[union-attr]
        assert _keyword(in_memory, "word1 word2") == _keyword(by_fts, "word1 word2") != []


def test_only_single_plain_token_phrases_are_ranked_in_memory() -> None:
    assert phrases_of('words : ("3xtea" OR "3xgreen")') == ["3xtea", "3xgreen"]
    assert phrases_of('words : ("3xdon 3xt")') is None  # an apostrophe's two tokens: a real phrase
    assert phrases_of('words : ("3xcafé")') is None


def test_a_pacer_rests_once_its_slice_is_used_up() -> None:
    resting = Pacer(slice_s=0.0, rest_s=0.0)
    never = Pacer(slice_s=3600.0, rest_s=60.0)  # a rest would hang the test for a minute
    for _ in range(5):
        resting.step()
        never.step()
    assert (resting.rests, never.rests) == (5, 0)


def _lists(words: UserWords) -> tuple[object, ...]:
    arrays = (words.row_ids, words._docs, words._counts, words._starts, words._lengths)
    return (words.seq, words._vocabulary, *(array.tolist() for array in arrays))


def test_a_paced_build_makes_the_same_lists_as_one_without_rests(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    """A build rests between its slices (so searches get the interpreter's lock); resting after
    every chunk of rows must not change a single posting."""
    path = tmp_path / "m.db"
    _random_store(path, embedding_model)
    with sqlite3.connect(path, isolation_level=None) as connection:
        slot = connection.execute("SELECT slot FROM keyword_scopes WHERE user_name = 'ann'").fetchone()[0]
        rows = connection.execute(
            "SELECT count(*) FROM memory_words WHERE rowid BETWEEN ? AND ?", (slot * ROWID_SPAN, (slot + 1) * ROWID_SPAN - 1)
        ).fetchone()[0]
        resting = Pacer(slice_s=0.0, rest_s=0.0)
        paced = _read_user(connection, slot, resting)
        unpaced = _read_user(connection, slot, Pacer(slice_s=3600.0))
    connection.close()
    assert paced is not None and unpaced is not None
    assert _lists(paced) == _lists(unpaced)
    assert paced.row_ids.size == rows > 100
    assert resting.rests >= 2 * (rows // _ROWS_PER_CHECK)  # a rest after each chunk read and each chunk counted


def test_a_stopped_pacer_raises_at_its_next_step() -> None:
    stop = threading.Event()
    pacer = Pacer(slice_s=3600.0, stop=stop)
    pacer.step()
    stop.set()
    with pytest.raises(BuildStopped):
        pacer.step()


def test_closing_a_store_stops_a_build_under_way(
    tmp_path: Path, embedding_model: LocalEmbedding, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A paced build of a large user takes a while; closing the store must not wait for all of it."""
    path = tmp_path / "m.db"
    _random_store(path, embedding_model)
    monkeypatch.setattr(Pacer.__init__, "__defaults__", (0.0, 0.2, None))  # a rest of 0.2 s at every step: ~4 s in all
    store = SqliteMemoryStore(path=path, embedding_model=embedding_model, keyword_in_memory_from=10)
    vector = unit_vectors(1, store.dimension, seed=1)[0]
    for _ in range(BUILD_AFTER):
        store.search(MemoryFilter("ann"), query="word1", vector=vector, top_k=5)
    memory_words = store._searcher._memory_words
    assert memory_words is not None
    deadline = time.monotonic() + 5
    while not memory_words._building and time.monotonic() < deadline:
        time.sleep(0.01)
    assert memory_words._building == {"ann"}  # under way
    started = time.monotonic()
    store.close()
    assert time.monotonic() - started < 2.0  # the next step stopped it: not the ~4 s it would take
    assert memory_words._users == {} and memory_words._building == set()


def _ranking_of_every_word(words: UserWords) -> dict[str, list[tuple[int, float]]]:
    return {word: words.ranked([word], 1000, 9000, None) for word in words._vocabulary}


def test_lists_gone_stale_are_updated_from_the_changed_rows_alone(
    tmp_path: Path, embedding_model: LocalEmbedding, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inserts, rewrites, deletes and a memory moved to another user, written by another store on
    the file: the lists are brought up to date from the change log's rows, never read whole again,
    and rank as FTS5 does and as lists built from scratch do."""
    import memoryscope.stores._sqlite_bm25 as bm25

    path = tmp_path / "m.db"
    queries = [*_random_store(path, embedding_model, seed=3), "word1 fresh", "word39 moved"]
    in_memory, by_fts = _stores(path, embedding_model)
    with in_memory, by_fts:
        _warm(in_memory)
        memory_words = in_memory._searcher._memory_words
        assert memory_words is not None
        before = memory_words._users["ann"]
        ann = by_fts.scan(MemoryFilter("ann", memory_types=[MemoryType.OBSERVATION]))
        new = [make_node(f"word1 fresh word{index} word{index}", memory_id=f"new-{index}") for index in range(5)]
        rewritten = [ann[0].replace(content="word2 word2 rewritten"), ann[1].replace(content="word39 word1")]
        moved = ann[2].replace(user_name="bob", content="word39 moved")
        by_fts.upsert([*new, *rewritten, moved], vectors=unit_vectors(8, by_fts.dimension, seed=5))
        by_fts.delete([ann[3].memory_id, ann[4].memory_id])

        def read_whole(*_: object) -> None:
            raise AssertionError("the lists were read whole again")

        monkeypatch.setattr(bm25, "_read_user", read_whole)
        memory_words._not_before.clear()
        assert _keyword(in_memory, "word1") == _keyword(by_fts, "word1")  # stale: FTS5 answers, asks for the update
        in_memory.wait_for_background()
        updated = memory_words._users["ann"]
        assert updated is not before and updated.seq > before.seq
        assert updated.row_ids.size == before.row_ids.size + 5 - 1 - 2  # 5 new; 1 moved away, 2 deleted
        kinds = MemoryFilter("ann", memory_types=[MemoryType.OBSERVATION, MemoryType.INSIGHT])
        for query in queries:
            assert _keyword(in_memory, query) == _keyword(by_fts, query)
            assert _keyword(in_memory, query, kinds) == _keyword(by_fts, query, kinds)
        assert memory_words._users["ann"] is updated  # every search above was answered from the lists
        monkeypatch.undo()
        with sqlite3.connect(path, isolation_level=None) as connection:
            slot = connection.execute("SELECT slot FROM keyword_scopes WHERE user_name = 'ann'").fetchone()[0]
            built = _read_user(connection, slot, Pacer(slice_s=3600.0))
        connection.close()
        assert built is not None
        assert updated.row_ids.tolist() == built.row_ids.tolist() and updated._lengths.tolist() == built._lengths.tolist()
        assert {w: r for w, r in _ranking_of_every_word(updated).items() if r} == _ranking_of_every_word(built)
