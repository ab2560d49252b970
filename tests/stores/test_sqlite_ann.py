"""`sqlite_memory_store` with its approximate vector index (`_sqlite_ann`) forced on: the whole
store contract, then what only the index has (filters applied exactly to its candidates, writes
keeping it current, the background build, the doctor's check)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from memoryscope.errors import StoreError
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.models.base import EmbeddingModel
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores.base import MemoryFilter, MemoryStore, SearchMode, TimeRange
from memoryscope.stores.metadata import MetadataCondition
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.store_contract import BASE_TIME, StoreContract, make_node
from memoryscope.testing.store_contract import clustered_vectors as clustered

pytestmark = pytest.mark.slow  # approximate indexes built, the store contract again; `-m "not slow"` leaves it out


@pytest.fixture
def store(tmp_path: Path, embedding_model: LocalEmbedding) -> Iterator[SqliteMemoryStore]:
    with SqliteMemoryStore(path=tmp_path / "memories.db", embedding_model=embedding_model, ann_min_memories=1) as opened:
        yield opened


class TestSqliteStoreContractWithIndex(StoreContract):
    """Every user gets the approximate index (`ann_min_memories=1`), so every dense search goes through it."""

    def reopen(self, store: MemoryStore, embedding_model: LocalEmbedding) -> MemoryStore:  # type: ignore[override]
        assert isinstance(store, SqliteMemoryStore)
        return SqliteMemoryStore(path=store.path, embedding_model=embedding_model, ann_min_memories=1)

    def reopen_to_reembed(self, store: MemoryStore, embedding_model: EmbeddingModel) -> MemoryStore:
        assert isinstance(store, SqliteMemoryStore)
        return SqliteMemoryStore(path=store.path, embedding_model=embedding_model, allow_model_change=True, ann_min_memories=1)


# ---- what only the index has --------------------------------------------------------------

USER = MemoryFilter("ann")
_TYPES = (MemoryType.OBSERVATION, MemoryType.INSIGHT, MemoryType.CONVERSATION)


def population(count: int) -> list[MemoryNode]:
    return [
        make_node(
            f"memory {index}",
            memory_type=_TYPES[index % 3],
            created_at=BASE_TIME + timedelta(hours=index),
            meta={"kind": "even" if index % 2 == 0 else "odd"},
        )
        for index in range(count)
    ]


@pytest.fixture
def pair(tmp_path: Path, embedding_model: LocalEmbedding) -> Iterator[tuple[SqliteMemoryStore, SqliteMemoryStore]]:
    """The same file opened with the index on for every user and with it off."""
    path = tmp_path / "pair.db"
    with (
        SqliteMemoryStore(path=path, embedding_model=embedding_model, ann_min_memories=1) as indexed,
        SqliteMemoryStore(path=path, embedding_model=embedding_model, ann_min_memories=0) as exact,
    ):
        yield indexed, exact


def _ids(store: SqliteMemoryStore, vector: np.ndarray, memory_filter: MemoryFilter = USER, top_k: int = 10) -> list[str]:
    return [node.memory_id for node in store.search(memory_filter, vector=vector, mode=SearchMode.DENSE, top_k=top_k)]


def _graph_size(store: SqliteMemoryStore, user_name: str = "ann") -> int | None:
    graph = store._cache.matrix(user_name).graph  # the one look inside: that the index exists and holds every row
    return None if graph is None else len(graph)


def test_the_index_finds_what_exact_search_finds(pair: tuple[SqliteMemoryStore, SqliteMemoryStore]) -> None:
    indexed, exact = pair
    indexed.upsert(population(800), vectors=clustered(800, indexed.dimension, seed=1))
    queries = clustered(20, indexed.dimension, seed=2)
    assert _ids(indexed, queries[0]) == _ids(exact, queries[0])
    assert _graph_size(indexed) == 800 and _graph_size(exact) is None
    for query in queries[1:]:
        assert _ids(indexed, query, top_k=50) == _ids(exact, query, top_k=50)


@pytest.mark.parametrize(
    "memory_filter",
    [
        MemoryFilter("ann", memory_types=(MemoryType.INSIGHT,)),
        MemoryFilter(
            "ann", time_range=TimeRange("created_at", BASE_TIME + timedelta(hours=100), BASE_TIME + timedelta(hours=500))
        ),
        MemoryFilter("ann", metadata=(MetadataCondition("kind", "eq", "odd"),)),
        MemoryFilter("ann", memory_types=(MemoryType.OBSERVATION,), metadata=(MetadataCondition("kind", "eq", "even"),)),
    ],
    ids=["type", "time", "metadata", "type-and-metadata"],
)
def test_filters_apply_exactly_to_the_index_candidates(
    pair: tuple[SqliteMemoryStore, SqliteMemoryStore], memory_filter: MemoryFilter
) -> None:
    indexed, exact = pair
    nodes = population(900)
    indexed.upsert(nodes, vectors=clustered(900, indexed.dimension, seed=3))
    kept = {node.memory_id for node in indexed.scan(memory_filter, limit=1000)}
    assert 0 < len(kept) < 900
    for query in clustered(10, indexed.dimension, seed=4):
        hits = indexed.search(memory_filter, vector=query, mode=SearchMode.DENSE, top_k=20)
        found = [node.memory_id for node in hits]
        assert set(found) <= kept and len(found) == 20
        # approximate: nearly all of the exact top 20, each scored exactly, best first
        assert len(set(found) & set(_ids(exact, query, memory_filter, top_k=20))) >= 18
        stored = indexed.get_vectors(found)
        scores = [float(node.score or 0.0) for node in hits]
        assert scores == pytest.approx([float(stored[i] @ query) for i in found], abs=1e-5)
        assert scores == sorted(scores, reverse=True)


def test_a_filter_keeping_fewer_rows_than_the_graph_returns_falls_back_to_exact(
    pair: tuple[SqliteMemoryStore, SqliteMemoryStore],
) -> None:
    indexed, exact = pair
    nodes = population(600)
    indexed.upsert(nodes, vectors=clustered(600, indexed.dimension, seed=5))
    few = MemoryFilter("ann", memory_ids=tuple(node.memory_id for node in nodes[::97]))  # 7 rows, anywhere in the graph
    query = clustered(1, indexed.dimension, seed=6)[0]
    found = _ids(indexed, query, few, top_k=10)
    assert sorted(found) == sorted(node.memory_id for node in nodes[::97])
    assert found == _ids(exact, query, few, top_k=10)


def test_inserts_updates_and_deletes_keep_the_index_current(pair: tuple[SqliteMemoryStore, SqliteMemoryStore]) -> None:
    indexed, exact = pair
    nodes = population(500)
    vectors = clustered(500, indexed.dimension, seed=7)
    indexed.upsert(nodes, vectors=vectors)
    _ids(indexed, vectors[0])  # builds the graph
    # a delete: gone from the graph and from the results
    top = _ids(indexed, vectors[10])[0]
    assert top == nodes[10].memory_id
    indexed.delete([top])
    assert top not in _ids(indexed, vectors[10]) and _graph_size(indexed) == 499
    # an insert: found first for its own vector
    new = make_node("a new memory")
    fresh = clustered(1, indexed.dimension, seed=8)
    indexed.upsert([new], vectors=fresh)
    assert _ids(indexed, fresh[0])[0] == new.memory_id and _graph_size(indexed) == 500
    # a new vector for a memory (re-embedded content): found where its new vector is, not its old one
    moved = nodes[20].replace(content="moved somewhere else")
    indexed.upsert([moved], vectors=vectors[30:31] * -1)
    assert _ids(indexed, -vectors[30])[0] == moved.memory_id
    assert moved.memory_id not in _ids(indexed, vectors[20], top_k=3)
    # through `update`, which embeds the new content itself
    updated = indexed.update(nodes[40].memory_id, content="I keep bees on the roof")
    bees = indexed.embedding_model.embed_query("I keep bees on the roof")
    assert _ids(indexed, np.asarray(bees))[0] == updated.memory_id
    for query in clustered(10, indexed.dimension, seed=9):
        assert _ids(indexed, query, top_k=30) == _ids(exact, query, top_k=30)


def test_writes_by_another_store_on_the_file_reach_the_index(pair: tuple[SqliteMemoryStore, SqliteMemoryStore]) -> None:
    indexed, exact = pair
    vectors = clustered(300, indexed.dimension, seed=10)
    nodes = population(300)
    indexed.upsert(nodes, vectors=vectors)
    _ids(indexed, vectors[0])
    other = make_node("written elsewhere")
    exact.upsert([other], vectors=-vectors[5:6])
    exact.delete([nodes[7].memory_id])
    assert _ids(indexed, -vectors[5])[0] == other.memory_id
    assert nodes[7].memory_id not in _ids(indexed, vectors[7])
    assert _graph_size(indexed) == 300


def test_a_large_user_is_indexed_on_a_background_thread_exact_search_answering_meanwhile(
    pair: tuple[SqliteMemoryStore, SqliteMemoryStore],
) -> None:
    indexed, exact = pair
    count = 5000  # past the size built by the search itself
    vectors = clustered(count, indexed.dimension, seed=11)
    indexed.upsert(population(count), vectors=vectors)
    query = clustered(1, indexed.dimension, seed=12)[0]
    assert _ids(indexed, query, top_k=50) == _ids(exact, query, top_k=50)  # exact, or the graph if already built
    indexed.delete([indexed.scan(USER, limit=1)[0].memory_id])  # during the build: must not survive in the graph
    indexed.wait_for_background()
    assert _ids(indexed, query, top_k=50) == _ids(exact, query, top_k=50)
    assert _graph_size(indexed) == count - 1


def test_off_below_the_threshold_and_checked_by_doctor(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    with SqliteMemoryStore(path=tmp_path / "m.db", embedding_model=embedding_model, ann_min_memories=400) as store:
        vectors = clustered(399, store.dimension, seed=13)
        store.upsert(population(399), vectors=vectors)
        _ids(store, vectors[0])
        assert _graph_size(store) is None  # below the threshold: exact search only
        store.upsert([make_node("one more")], vectors=clustered(1, store.dimension, seed=14))
        _ids(store, vectors[0])
        assert _graph_size(store) == 400
        assert store.check(full=False)["approximate index"] == []
    with SqliteMemoryStore(path=tmp_path / "m.db", embedding_model=embedding_model, ann_min_memories=0) as off:
        _ids(off, vectors[0])
        assert _graph_size(off) is None and "approximate index" not in off.check(full=False)
    with pytest.raises(StoreError, match="ann_min_memories"):
        SqliteMemoryStore(path=tmp_path / "m.db", embedding_model=embedding_model, ann_min_memories=-1)
