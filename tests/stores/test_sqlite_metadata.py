"""The metadata index of `sqlite_memory_store` (`memory_meta`) beyond what the store contract sees:
its rows follow every write path in the same transaction, a file from before it (schema version
2) gets it when opened, a file indexed under other rules is indexed again, and a filter without
metadata conditions never reads it (the fast path benchmarks measure)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryscope.errors import StoreError
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores._sqlite_schema import SCHEMA_VERSION
from memoryscope.stores.base import MemoryFilter, SearchMode, TimeRange
from memoryscope.stores.metadata import METADATA_INDEX_VERSION, indexed_values, metadata_conditions
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing._store_metadata_cases import METADATA_CASES, metadata_population
from memoryscope.testing.store_contract import BASE_TIME, make_node, unit_vectors


@pytest.fixture
def store(tmp_path: Path, embedding_model: LocalEmbedding) -> Iterator[SqliteMemoryStore]:
    with SqliteMemoryStore(path=tmp_path / "m.db", embedding_model=embedding_model) as opened:
        yield opened


def _upsert(store: SqliteMemoryStore, nodes: list[MemoryNode], seed: int = 0) -> None:
    store.upsert(nodes, vectors=unit_vectors(len(nodes), store.dimension, seed=seed))


def _index_rows(path: Path) -> list[tuple[Any, ...]]:
    """`memory_meta` as (memory_id, user, key, text, number, time), sorted; fails on rows of no memory."""
    with sqlite3.connect(path) as raw:
        rows = raw.execute(
            'SELECT m.memory_id, x.user_name, x."key", x.text, x.number, x.time '
            "FROM memory_meta AS x JOIN memories AS m ON m.row_id = x.row_id"
        ).fetchall()
        total = raw.execute("SELECT count(*) FROM memory_meta").fetchone()[0]
    raw.close()
    assert total == len(rows), "index rows of no memory"
    return sorted(rows, key=repr)


def _expected_rows(store: SqliteMemoryStore) -> list[tuple[Any, ...]]:
    """What `memory_meta` must hold for the memories stored now."""
    rows = []
    for batch in store.iter_all():
        for node in batch:
            rows += [(node.memory_id, node.user_name, *row) for row in indexed_values(node.meta)]
    return sorted(rows, key=repr)


def _answers(store: SqliteMemoryStore) -> list[set[str]]:
    """What every metadata case selects by scan and by each search mode."""
    vector = unit_vectors(1, store.dimension, seed=5)[0]
    answers = []
    for case in METADATA_CASES:
        answers.append({node.memory_id for node in store.scan(case.memory_filter, limit=1000)})
        for mode in SearchMode:
            answers.append(
                {node.memory_id for node in store.search(case.memory_filter, query="memo", vector=vector, mode=mode, top_k=100)}
            )
    return answers


def test_index_rows_follow_every_write_path(store: SqliteMemoryStore) -> None:
    _upsert(store, metadata_population())
    assert _index_rows(store.path) == _expected_rows(store) != []
    store.update("m00", meta={"category": "sport", "tags": ["x"]})
    store.update("m01", content="memo reworded")  # meta unchanged: its rows stay
    _upsert(store, [make_node("memo moved", user_name="bob", memory_id="m02", meta={"category": "moved"})], seed=1)
    store.delete(["m03"])
    store.delete_by_filter(MemoryFilter("ann", metadata=metadata_conditions({"category": "food"})))
    assert store.get(["m04"]) == []
    assert _index_rows(store.path) == _expected_rows(store)
    rows = {row[:3] for row in _index_rows(store.path)}
    assert ("m02", "bob", "category") in rows and ("m00", "ann", "tags") in rows
    assert not {row for row in rows if row[0] in ("m03", "m04")}


def test_a_failed_batch_leaves_the_index_as_it_was(store: SqliteMemoryStore) -> None:
    _upsert(store, [make_node("memo", memory_id="a", meta={"category": "music"})])
    before = _index_rows(store.path)
    # the first two rows (and their index rows) are written before the third breaks a NOT NULL constraint
    batch = [
        make_node("memo", memory_id="a", meta={"category": "sport"}),
        make_node("memo", meta={"category": "fresh"}),
        make_node("memo", memory_id=None, meta={"category": "broken"}),
    ]
    with pytest.raises(StoreError, match="memory_id"):
        _upsert(store, batch)
    assert _index_rows(store.path) == before


def _as_schema_2(path: Path) -> None:
    """Rewrite the file as a MemoryScope with schema version 2 left it: no metadata index."""
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TRIGGER memories_meta_deleted")
        raw.execute("DROP TABLE memory_meta")
        raw.execute("ALTER TABLE memories DROP COLUMN rank_terms")  # came with version 4
        raw.execute("DELETE FROM store_meta WHERE key = 'metadata_index_version'")
        raw.execute("UPDATE store_meta SET value = '2' WHERE key = 'schema_version'")
    raw.close()


def test_a_file_from_before_the_index_gets_it_when_opened(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "old.db"
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as first:
        _upsert(first, metadata_population())
        expected = _answers(first)
    _as_schema_2(path)
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as second:
        assert _answers(second) == expected
        assert _index_rows(path) == _expected_rows(second)
        second.delete(["m00"])  # the delete trigger is in place
        assert _index_rows(path) == _expected_rows(second)
    with sqlite3.connect(path) as raw:
        recorded = dict(raw.execute("SELECT key, value FROM store_meta").fetchall())
    raw.close()
    assert (
        (recorded["schema_version"], recorded["metadata_index_version"]) == (SCHEMA_VERSION, METADATA_INDEX_VERSION) == ("4", "1")
    )


def test_an_index_built_under_other_rules_is_built_again(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as first:
        _upsert(first, metadata_population())
        expected = _answers(first)
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE memory_meta SET text = 'stale' WHERE text IS NOT NULL")
        raw.execute("UPDATE store_meta SET value = '0' WHERE key = 'metadata_index_version'")
    raw.close()
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as second:
        assert _answers(second) == expected
        assert _index_rows(path) == _expected_rows(second)


def test_a_damaged_meta_is_left_out_of_the_index_not_fatal(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as first:
        _upsert(first, [make_node("memo", memory_id="ok", meta={"k": 1}), make_node("memo", memory_id="bad", meta={"k": 1})])
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE memories SET meta = 'not json' WHERE memory_id = 'bad'")
        raw.execute("UPDATE store_meta SET value = '0' WHERE key = 'metadata_index_version'")
    raw.close()
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as second:
        assert [node.memory_id for node in second.scan(MemoryFilter("ann", metadata=metadata_conditions({"k": 1})))] == ["ok"]


@pytest.mark.parametrize(
    "memory_filter",
    [
        MemoryFilter("ann"),
        MemoryFilter("ann", memory_types=(MemoryType.INSIGHT,), time_range=TimeRange("created_at", start=BASE_TIME)),
        MemoryFilter("ann", memory_ids=("m00", "m01"), metadata=()),
    ],
    ids=["user", "fields", "ids"],
)
def test_a_filter_without_metadata_conditions_never_reads_the_index(
    store: SqliteMemoryStore, memory_filter: MemoryFilter
) -> None:
    _upsert(store, metadata_population())
    statements: list[str] = []
    store._connections.connection().set_trace_callback(statements.append)
    vector = unit_vectors(1, store.dimension, seed=5)[0]
    for _ in range(2):  # the first search loads the user's matrix, the second uses it
        store.scan(memory_filter)
        store.count(memory_filter)
        for mode in (SearchMode.KEYWORD, SearchMode.DENSE, SearchMode.KEYWORD, SearchMode.HYBRID):
            store.search(memory_filter, query="memo", vector=vector, mode=mode)
    assert statements and not [sql for sql in statements if "memory_meta" in sql]
    statements.clear()
    store.search(MemoryFilter("ann", metadata=metadata_conditions({"category": "music"})), vector=vector, mode=SearchMode.DENSE)
    assert any("memory_meta" in sql for sql in statements)  # the trace sees the index when it is asked for
    store._connections.connection().set_trace_callback(None)


def test_many_values_in_one_of_and_many_memories(store: SqliteMemoryStore) -> None:
    nodes = [make_node(f"memo {index}", memory_id=f"n{index:04d}", meta={"n": index, "t": f"v{index}"}) for index in range(1200)]
    _upsert(store, nodes)
    wanted = list(range(0, 1200, 3))
    memory_filter = MemoryFilter(
        "ann", metadata=metadata_conditions({"n": {"in": wanted}, "t": {"in": [f"v{i}" for i in range(600)]}})
    )
    expected = {f"n{index:04d}" for index in wanted if index < 600}
    assert {node.memory_id for node in store.scan(memory_filter, limit=2000)} == expected
    vector = unit_vectors(1, store.dimension, seed=5)[0]
    found = store.search(memory_filter, query="memo", vector=vector, mode=SearchMode.HYBRID, top_k=1000)
    assert {node.memory_id for node in found} == expected
