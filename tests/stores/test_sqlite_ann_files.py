"""Saved approximate indexes (`_sqlite_ann_files`): a graph built on the background thread is
saved beside the store file, the next process loads it and catches it up with the change log,
and a damaged, outdated or privacy-unsafe one is never used."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from memoryscope.memory import MemoryNode
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores._sqlite_ann_files import GraphFiles
from memoryscope.stores.base import MemoryFilter, SearchMode
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.store_contract import clustered_vectors as clustered
from memoryscope.testing.store_contract import make_node

pytestmark = pytest.mark.slow  # graphs of 5,000 vectors built and saved; `-m "not slow"` leaves it out

USER = MemoryFilter("big")
COUNT = 5000  # past the size a search builds inline: built on the background thread, and saved


def population(count: int) -> list[MemoryNode]:
    return [make_node(f"memory {index}", user_name="big") for index in range(count)]


def opened(path: Path, embedding_model: LocalEmbedding, ann: int = 1) -> SqliteMemoryStore:
    return SqliteMemoryStore(path=path, embedding_model=embedding_model, ann_min_memories=ann)


def ids(store: SqliteMemoryStore, vector: np.ndarray, top_k: int = 20) -> list[str]:
    return [node.memory_id for node in store.search(USER, vector=vector, mode=SearchMode.DENSE, top_k=top_k)]


def indexed(store: SqliteMemoryStore, vector: np.ndarray) -> tuple[int | None, str]:
    """Search, wait for the graph, and say its size and where it came from (the one look inside)."""
    ids(store, vector)
    store.wait_for_background()
    ids(store, vector)
    matrix = store._cache.matrix("big")
    return (None if matrix.graph is None else len(matrix.graph)), matrix.graph_source


def saved_files(path: Path) -> list[str]:
    folder = Path(f"{path}-snapshots")
    return sorted(file.name.split("-")[0] + file.suffix for file in folder.glob("ann-*")) if folder.is_dir() else []


@pytest.fixture
def filled(tmp_path: Path, embedding_model: LocalEmbedding) -> tuple[Path, np.ndarray, list[MemoryNode]]:
    """A file whose one large user's graph was built and saved by a first store."""
    path = tmp_path / "memories.db"
    nodes = population(COUNT)
    with opened(path, embedding_model) as store:
        vectors = clustered(COUNT, store.dimension, seed=1)
        store.upsert(nodes, vectors=vectors)
        assert indexed(store, vectors[0]) == (COUNT, "built")
    assert saved_files(path) == ["ann.json", "ann.usearch"]
    return path, vectors, nodes


def test_the_next_process_loads_the_saved_graph_instead_of_building_it(
    filled: tuple[Path, np.ndarray, list[MemoryNode]], embedding_model: LocalEmbedding
) -> None:
    path, vectors, _ = filled
    queries = clustered(10, vectors.shape[1], seed=2)
    with opened(path, embedding_model) as store, opened(path, embedding_model, ann=0) as exact:
        assert indexed(store, queries[0]) == (COUNT, "loaded")
        for query in queries:
            assert ids(store, query) == ids(exact, query)
        assert store.check(full=False)["approximate index"] == []


def test_a_loaded_graph_catches_up_with_what_was_written_since(
    filled: tuple[Path, np.ndarray, list[MemoryNode]], embedding_model: LocalEmbedding
) -> None:
    path, vectors, nodes = filled
    dimension = vectors.shape[1]
    new = make_node("written after the save", user_name="big")
    with opened(path, embedding_model, ann=0) as writer:  # another process, without the index
        writer.upsert([new], vectors=-vectors[5:6])
        writer.upsert([nodes[9].replace(content="moved")], vectors=-vectors[30:31])  # a new vector for a memory
    with opened(path, embedding_model) as store, opened(path, embedding_model, ann=0) as exact:
        assert indexed(store, vectors[0]) == (COUNT + 1, "loaded")
        assert ids(store, -vectors[5])[0] == new.memory_id
        assert ids(store, -vectors[30])[0] == nodes[9].memory_id
        assert nodes[9].memory_id not in ids(store, vectors[9], top_k=3)
        for query in clustered(10, dimension, seed=3):
            assert ids(store, query) == ids(exact, query)


def test_a_delete_removes_the_saved_graph_and_the_next_one_is_built_from_the_rows(
    filled: tuple[Path, np.ndarray, list[MemoryNode]], embedding_model: LocalEmbedding
) -> None:
    path, vectors, nodes = filled
    with opened(path, embedding_model, ann=0) as writer:
        writer.delete([nodes[3].memory_id])
    assert saved_files(path) == []  # a deleted memory's vector lives on in no saved graph
    with opened(path, embedding_model) as store:
        assert indexed(store, vectors[3]) == (COUNT - 1, "built")
        assert nodes[3].memory_id not in ids(store, vectors[3])
    assert saved_files(path) == ["ann.json", "ann.usearch"]


def test_no_graph_is_saved_for_a_position_a_row_has_left_since(
    filled: tuple[Path, np.ndarray, list[MemoryNode]], embedding_model: LocalEmbedding
) -> None:
    path, vectors, nodes = filled
    with opened(path, embedding_model) as store:
        indexed(store, vectors[0])
        matrix = store._cache.matrix("big")
        graph, seq = matrix.graph, matrix.seq
        assert graph is not None
        store.delete([nodes[0].memory_id])
        files = GraphFiles(store._connections)
        assert files.save("big", graph, seq, vectors.shape[1]) is False
        assert saved_files(path) == []


@pytest.mark.parametrize("damage", ["flipped", "cut short", "description"])
def test_a_damaged_saved_graph_is_reported_by_doctor_and_built_again(
    filled: tuple[Path, np.ndarray, list[MemoryNode]],
    embedding_model: LocalEmbedding,
    damage: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    path, vectors, _ = filled
    folder = Path(f"{path}-snapshots")
    graph_file = next(folder.glob("ann-*.usearch"))
    if damage == "flipped":
        data = bytearray(graph_file.read_bytes())
        data[len(data) // 2] ^= 0xFF
        graph_file.write_bytes(bytes(data))
    elif damage == "cut short":
        graph_file.write_bytes(graph_file.read_bytes()[:-100])
    else:
        next(folder.glob("ann-*.json")).write_text("{not json", encoding="utf-8")
    with opened(path, embedding_model) as store, opened(path, embedding_model, ann=0) as exact:
        problems = store.check(full=False)["approximate index"]
        assert len(problems) == 1 and ("big" in problems[0] or "cannot be read" in problems[0])
        with caplog.at_level(logging.WARNING, logger="memoryscope.stores._sqlite_ann_files"):
            assert indexed(store, vectors[0]) == (COUNT, "built")
        assert "not usable" in caplog.text
        for query in clustered(5, vectors.shape[1], seed=4):
            assert ids(store, query) == ids(exact, query)
        assert store.check(full=False)["approximate index"] == []  # saved again, whole
    assert saved_files(path) == ["ann.json", "ann.usearch"]


def test_re_embedding_removes_the_saved_graphs(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "small.db"
    with SqliteMemoryStore(path=path, embedding_model=embedding_model, allow_model_change=True, ann_min_memories=1) as store:
        vectors = clustered(50, store.dimension, seed=5)
        store.upsert(population(50), vectors=vectors)
        ids(store, vectors[0])  # a graph this small is built by the search itself, and not saved ...
        matrix = store._cache.matrix("big")
        assert matrix.graph is not None and saved_files(path) == []
        assert GraphFiles(store._connections).save("big", matrix.graph, matrix.seq, store.dimension)  # ... so save it here
        assert saved_files(path) == ["ann.json", "ann.usearch"]
        store.reembed()
    assert saved_files(path) == []  # they held the former vectors
