"""`sqlite_memory_store` search internals that the store contract cannot see: per-user keyword
rowid ranges (and the migration of files made before them), keyword filters checked against the
in-memory arrays, and hybrid search on two threads. Each must give the same answers as the plain
path."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryscope.memory import MemoryStatus, MemoryType
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores import _sqlite_search
from memoryscope.stores._sqlite_schema import SCHEMA_VERSION
from memoryscope.stores.base import MemoryFilter, SearchMode
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.store_contract import make_node, unit_vectors

_V1_TRIGGERS = """
CREATE TRIGGER memories_updated AFTER UPDATE ON memories BEGIN
    INSERT INTO memory_changes (user_name, row_id) VALUES (new.user_name, new.row_id);
    INSERT INTO memory_changes (user_name, row_id)
        SELECT old.user_name, old.row_id WHERE old.user_name IS NOT new.user_name;
END;
CREATE TRIGGER memories_deleted AFTER DELETE ON memories BEGIN
    DELETE FROM memory_vectors WHERE row_id = old.row_id;
    DELETE FROM memory_words WHERE rowid = old.row_id;
    INSERT INTO memory_changes (user_name, row_id) VALUES (old.user_name, old.row_id);
END;
"""


@pytest.fixture
def store(tmp_path: Path, embedding_model: LocalEmbedding) -> Iterator[SqliteMemoryStore]:
    with SqliteMemoryStore(path=tmp_path / "m.db", embedding_model=embedding_model) as opened:
        yield opened


def _fill(store: SqliteMemoryStore) -> None:
    """Two users; insights and conversation messages share words, so filters matter."""
    nodes = []
    for user in ("ann", "bob"):
        for index in range(40):
            kind = MemoryType.INSIGHT if index % 10 == 0 else MemoryType.CONVERSATION
            status = MemoryStatus.EXPIRED if index % 7 == 0 else MemoryStatus.VALID
            text = f"{user} talks about green tea and hiking trip number {index} " + "kyoto " * (index % 3)
            nodes.append(make_node(text, user_name=user, memory_id=f"{user}-{index}", memory_type=kind, status=status))
    store.upsert(nodes, vectors=unit_vectors(len(nodes), store.dimension, seed=3))


def _searches(store: SqliteMemoryStore) -> list[list[tuple[str, float | None]]]:
    vector = unit_vectors(1, store.dimension, seed=9)[0]
    filters = [
        MemoryFilter("ann"),
        MemoryFilter("ann", memory_types=(MemoryType.INSIGHT,)),
        MemoryFilter("bob", status=MemoryStatus.VALID, memory_types=tuple(MemoryType)),
    ]
    out = []
    for memory_filter in filters:
        for mode in SearchMode:
            hits = store.search(memory_filter, query="green tea in kyoto", vector=vector, mode=mode, top_k=6)
            out.append([(hit.memory_id, hit.score) for hit in hits])
    return out


def _as_version_1(path: Path) -> None:
    """Rewrite the file as a MemoryScope with schema version 1 left it: keyword rows at
    rowid = row_id, no slots, the old triggers."""
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TRIGGER memories_updated")
        raw.execute("DROP TRIGGER memories_deleted")
        raw.executescript("BEGIN;" + _V1_TRIGGERS + "COMMIT;")
        raw.execute("CREATE TEMP TABLE w AS SELECT rowid % 4294967296 AS row_id, scope, words FROM memory_words")
        raw.execute("DELETE FROM memory_words")
        raw.execute("INSERT INTO memory_words (rowid, scope, words) SELECT row_id, scope, words FROM temp.w")
        raw.execute("DROP TABLE keyword_scopes")
        raw.execute("DROP TRIGGER memories_meta_deleted")  # the metadata index came with version 3
        raw.execute("DROP TABLE memory_meta")
        raw.execute("ALTER TABLE memories DROP COLUMN rank_terms")  # came with version 4
        raw.execute("DELETE FROM store_meta WHERE key = 'metadata_index_version'")
        raw.execute("UPDATE store_meta SET value = '1' WHERE key = 'schema_version'")
    raw.close()


def test_a_version_1_file_is_migrated_with_the_same_answers(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "old.db"
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as first:
        _fill(first)
        before = _searches(first)
    _as_version_1(path)
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as second:
        assert _searches(second) == before
        assert second.count(MemoryFilter("ann")) == 40
        assert second.delete(["ann-1"]) == 1  # the new delete trigger finds the moved keyword row
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("SELECT count(*) FROM memory_words").fetchone() == (79,)
    raw.close()


def test_a_newer_schema_is_refused(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "new.db"
    SqliteMemoryStore(path=path, embedding_model=embedding_model).close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE store_meta SET value = '9' WHERE key = 'schema_version'")
    raw.close()
    with pytest.raises(Exception, match="schema version 9"):
        SqliteMemoryStore(path=path, embedding_model=embedding_model)


def test_keyword_rows_follow_a_memory_to_another_user(store: SqliteMemoryStore) -> None:
    moved = make_node("zebra crossing", memory_id="m1")
    store.upsert([moved])
    store.upsert([make_node("zebra crossing", user_name="bob", memory_id="m1")])
    assert store.search(MemoryFilter("ann"), query="zebra", mode=SearchMode.KEYWORD) == []
    assert [hit.memory_id for hit in store.search(MemoryFilter("bob"), query="zebra", mode=SearchMode.KEYWORD)] == ["m1"]
    store.delete(["m1"])
    assert store.search(MemoryFilter("bob"), query="zebra", mode=SearchMode.KEYWORD) == []


def test_keyword_filters_checked_in_memory_match_sql(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    """A keyword search after a dense one checks filters on the loaded arrays; a fresh store
    checks them in SQL."""
    path = tmp_path / "k.db"
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as first:
        _fill(first)
    few = MemoryFilter("ann", memory_types=(MemoryType.INSIGHT,), status=MemoryStatus.VALID)
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as by_sql:
        expected = by_sql.search(few, query="tea kyoto", mode=SearchMode.KEYWORD, top_k=3)
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as in_memory:
        in_memory.search(few, vector=unit_vectors(1, in_memory.dimension)[0], mode=SearchMode.DENSE)  # loads ann's arrays
        assert in_memory.search(few, query="tea kyoto", mode=SearchMode.KEYWORD, top_k=3) == expected
    assert sorted(hit.memory_id for hit in expected) == ["ann-10", "ann-20", "ann-30"]  # ann-0 expired


def test_hybrid_on_two_threads_answers_as_on_one(store: SqliteMemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(store)
    one_thread = _searches(store)
    monkeypatch.setattr(_sqlite_search, "PARALLEL_FROM_ROWS", 1)
    assert _searches(store) == one_thread


def _keyword_scores(store: SqliteMemoryStore, user: str, query: str) -> dict[str, float | None]:
    return {hit.memory_id: hit.score for hit in store.search(MemoryFilter(user), query=query, mode=SearchMode.KEYWORD)}


def test_a_word_weighs_by_how_common_it_is_in_the_users_own_memories(store: SqliteMemoryStore) -> None:
    """Bob writing "tea" a hundred times does not make it a weak word for Ann, nor rank his rows."""
    store.upsert([make_node("green tea", memory_id="tea"), make_node("black coffee", memory_id="coffee")])
    alone = _keyword_scores(store, "ann", "tea coffee")
    assert alone["tea"] == pytest.approx(alone["coffee"])
    store.upsert([make_node(f"tea number {index}", user_name="bob", memory_id=f"bob-{index}") for index in range(100)])
    crowded = _keyword_scores(store, "ann", "tea coffee")
    assert set(crowded) == {"tea", "coffee"}
    assert crowded["tea"] == pytest.approx(crowded["coffee"])


def test_words_split_by_an_apostrophe_stay_the_users_own(store: SqliteMemoryStore) -> None:
    store.upsert([make_node("I don't know", memory_id="ann-1"), make_node("t don", user_name="bob", memory_id="bob-1")])
    assert list(_keyword_scores(store, "ann", "don't")) == ["ann-1"]
    assert list(_keyword_scores(store, "bob", "don't")) == []  # his words, but not in that order
    with sqlite3.connect(store.path) as raw:
        words = dict(raw.execute("SELECT rowid % 4294967296, words FROM memory_words").fetchall())
    raw.close()
    assert all(token[0].isdigit() and "x" in token for text in words.values() for token in text.split())


def test_an_unscoped_keyword_index_is_rebuilt_on_open_with_a_notice(
    tmp_path: Path, embedding_model: LocalEmbedding, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A file of keyword index version 2 (words shared by every user) is re-indexed when opened."""
    path = tmp_path / "v2.db"
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as first:
        _fill(first)
        before = _searches(first)
    with sqlite3.connect(path) as raw:  # as version 2 wrote it: the same words without the slot
        raw.execute(
            "UPDATE memory_words SET words = (SELECT group_concat(substr(value, instr(value, 'x') + 1), ' ') "
            "FROM json_each('[\"' || replace(words, ' ', '\",\"') || '\"]'))"
        )
        raw.execute("UPDATE store_meta SET value = '2' WHERE key = 'keyword_index_version'")
        assert raw.execute("SELECT words FROM memory_words LIMIT 1").fetchone()[0].startswith("ann talk")
    raw.close()
    monkeypatch.setattr("memoryscope.stores._sqlite_reindex.REINDEX_NOTICE_FROM", 10)
    with caplog.at_level("WARNING", logger="memoryscope.stores.sqlite"):
        second = SqliteMemoryStore(path=path, embedding_model=embedding_model)
    with second:
        assert _searches(second) == before
        assert second.count(MemoryFilter("ann")) == 40
    assert "re-indexing the keywords of 80 memories" in caplog.text


def test_a_filters_mask_is_kept_until_the_rows_change(store: SqliteMemoryStore) -> None:
    store.upsert([make_node(f"note {index}", user_name="ann", memory_type=MemoryType.OBSERVATION) for index in range(20)])
    wanted = MemoryFilter("ann", memory_types=(MemoryType.OBSERVATION,), status=MemoryStatus.VALID)
    assert len(store.search(wanted, query="note", mode=SearchMode.DENSE, top_k=50)) == 20
    matrix = store._cache.matrix("ann")  # the one look inside: which mask object a search uses
    with matrix.lock:
        first = matrix.mask(wanted, None)
        assert first is not None and matrix.mask(wanted, None) is first and not first.flags.writeable
    store.upsert(
        [
            make_node("an insight", user_name="ann", memory_type=MemoryType.INSIGHT),
            make_node("one more note", user_name="ann", memory_type=MemoryType.OBSERVATION),
        ]
    )
    assert len(store.search(wanted, query="note", mode=SearchMode.DENSE, top_k=50)) == 21  # the new rows are seen
    with matrix.lock:
        second = matrix.mask(wanted, None)
        assert second is not first and int(second.sum()) == 21 and second.size == matrix.size == 22
