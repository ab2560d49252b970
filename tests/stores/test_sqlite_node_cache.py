"""Decoded nodes kept between searches (`_sqlite_nodes.NodeCache`): what a search returns must be
what the file holds, whatever another store object on the same file changed in between."""

from __future__ import annotations

from pathlib import Path

from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores.base import MemoryFilter, SearchMode
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.store_contract import make_node, unit_vectors

ANN = MemoryFilter("ann")


def _contents(store: SqliteMemoryStore) -> dict[str, str]:
    hits = store.search(ANN, query="tea", mode=SearchMode.KEYWORD, top_k=50)
    return {hit.memory_id: hit.content for hit in hits}


def _fill(store: SqliteMemoryStore, count: int, start: int = 0) -> None:
    nodes = [make_node(f"green tea {index}", memory_id=f"m{index}") for index in range(start, start + count)]
    store.upsert(nodes, vectors=unit_vectors(count, store.dimension, seed=start))


def test_changes_by_another_store_object_are_seen(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as reader:
        _fill(reader, 6)
        assert len(_contents(reader)) == 6
        assert len(reader._nodes._nodes) == 6  # decoded once, kept
        with SqliteMemoryStore(path=path, embedding_model=embedding_model) as writer:
            writer.update("m1", content="black tea now")
            writer.delete(["m2"])
        after = _contents(reader)
        assert after["m1"] == "black tea now"
        assert "m2" not in after
        assert len(after) == 5


def test_scores_are_each_searchs_own(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    with SqliteMemoryStore(path=tmp_path / "m.db", embedding_model=embedding_model) as store:
        _fill(store, 4)
        vectors = unit_vectors(2, store.dimension, seed=9)
        first = [(n.memory_id, n.score) for n in store.search(ANN, vector=vectors[0], mode=SearchMode.DENSE, top_k=4)]
        second = [(n.memory_id, n.score) for n in store.search(ANN, vector=vectors[1], mode=SearchMode.DENSE, top_k=4)]
        assert first != second
        again = [(n.memory_id, n.score) for n in store.search(ANN, vector=vectors[0], mode=SearchMode.DENSE, top_k=4)]
        assert again == first


def test_a_log_pruned_past_the_cache_drops_it_all(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as reader:
        _fill(reader, 3)
        _contents(reader)
        with SqliteMemoryStore(path=path, embedding_model=embedding_model, change_log_retain=2) as writer:
            writer.update("m0", content="oolong tea")
            _fill(writer, 10, start=100)  # prunes the log past the reader's position
        assert _contents(reader)["m0"] == "oolong tea"


def test_a_cache_of_size_zero_keeps_nothing(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    with SqliteMemoryStore(path=tmp_path / "m.db", embedding_model=embedding_model, node_cache_size=0) as store:
        _fill(store, 3)
        assert len(_contents(store)) == 3
        assert store._nodes._nodes == {}
