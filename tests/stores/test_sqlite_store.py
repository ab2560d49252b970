"""`sqlite_memory_store`: the shared store contract on a real file, plus what only SQLite has
(WAL, threads and processes on one file, path errors, the change log behind the caches)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from memoryscope.errors import StoreError
from memoryscope.models.base import EmbeddingModel
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores.base import STORES, MemoryFilter, MemoryStore, SearchMode
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.store_contract import StoreContract, make_node, unit_vectors

ANN = MemoryFilter("ann")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memories.db"


@pytest.fixture
def store(db_path: Path, embedding_model: LocalEmbedding) -> Iterator[SqliteMemoryStore]:
    with SqliteMemoryStore(path=db_path, embedding_model=embedding_model) as opened:
        yield opened


class TestSqliteStoreContract(StoreContract):
    def reopen(self, store: MemoryStore, embedding_model: LocalEmbedding) -> MemoryStore:  # type: ignore[override]
        if not isinstance(store, SqliteMemoryStore):
            raise TypeError(f"expected a SqliteMemoryStore, got {type(store).__name__}")
        return SqliteMemoryStore(path=store.path, embedding_model=embedding_model)

    def reopen_to_reembed(self, store: MemoryStore, embedding_model: EmbeddingModel) -> MemoryStore:
        if not isinstance(store, SqliteMemoryStore):
            raise TypeError(f"expected a SqliteMemoryStore, got {type(store).__name__}")
        return SqliteMemoryStore(path=store.path, embedding_model=embedding_model, allow_model_change=True)


def _top(store: SqliteMemoryStore, vector: np.ndarray, memory_filter: MemoryFilter = ANN) -> tuple[str, float]:
    [best] = store.search(memory_filter, vector=vector, mode=SearchMode.DENSE, top_k=1)
    return best.memory_id, float(best.score or 0.0)


# ---- building, as the config layer does -----------------------------------------------------------


def test_is_registered_and_builds_from_validated_params(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    cls = STORES.get("sqlite_memory_store")
    assert cls is SqliteMemoryStore
    params = SqliteMemoryStore.Params.model_validate({"path": str(tmp_path / "a" / "m.db"), "cache_max_users": 4})
    with cls(**params.model_dump(exclude={"embedding_model"}), embedding_model=embedding_model) as built:
        assert built.path == tmp_path / "a" / "m.db" and built.path.exists()


def test_params_expand_home_reject_unknown_keys_and_describe_every_field() -> None:
    assert SqliteMemoryStore.Params().path == Path.home() / ".memoryscope" / "default.db"
    assert SqliteMemoryStore.Params(path=Path("~/x.db")).path == Path.home() / "x.db"
    with pytest.raises(ValidationError, match="pathh"):
        SqliteMemoryStore.Params.model_validate({"pathh": "x.db"})
    assert all(field.description for field in SqliteMemoryStore.Params.model_fields.values())


def test_bad_knob_values_are_store_errors(db_path: Path, embedding_model: LocalEmbedding) -> None:
    with pytest.raises(StoreError, match="cache_max_users"):
        SqliteMemoryStore(path=db_path, embedding_model=embedding_model, cache_max_users=0)


# ---- the file ------------------------------------------------------------------------------------


def test_the_file_is_in_wal_mode(store: SqliteMemoryStore, db_path: Path) -> None:
    connection = sqlite3.connect(db_path)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        connection.close()


@pytest.mark.parametrize("kind", ["parent_is_a_file", "is_a_directory", "not_a_database", "in_memory"])
def test_unusable_paths_are_one_line_errors_naming_the_path(tmp_path: Path, embedding_model: LocalEmbedding, kind: str) -> None:
    if kind == "parent_is_a_file":
        (tmp_path / "plain.txt").write_text("x")
        path = tmp_path / "plain.txt" / "sub" / "m.db"
    elif kind == "is_a_directory":
        path = tmp_path
    elif kind == "not_a_database":
        path = tmp_path / "garbage.db"
        path.write_bytes(b"this is not a database file at all" * 100)
    else:
        path = Path(":memory:")
    with pytest.raises(StoreError) as caught:
        SqliteMemoryStore(path=path, embedding_model=embedding_model).close()
    message = str(caught.value)
    assert str(path) in message and "\n" not in message


def test_reopening_keeps_memories_vectors_and_keywords(db_path: Path, embedding_model: LocalEmbedding) -> None:
    node = make_node("I keep bees on the roof")
    with SqliteMemoryStore(path=db_path, embedding_model=embedding_model) as first:
        [vector] = unit_vectors(1, first.dimension, seed=3)
        first.upsert([node], vectors=vector[None, :])
    with SqliteMemoryStore(path=db_path, embedding_model=embedding_model) as second:
        assert second.get([node.memory_id]) == [node]
        assert _top(second, vector) == (node.memory_id, pytest.approx(1.0, abs=1e-5))
        assert [n.memory_id for n in second.search(ANN, query="bees", mode=SearchMode.KEYWORD)] == [node.memory_id]


def test_mismatch_error_tells_how_to_reembed(store: SqliteMemoryStore, db_path: Path, embedding_model: LocalEmbedding) -> None:
    from memoryscope.testing.store_contract import RenamedEmbedding

    with pytest.raises(StoreError, match=r"memoryscope reembed --config") as caught:
        SqliteMemoryStore(path=db_path, embedding_model=RenamedEmbedding(embedding_model, "bge-m3", dimension=128))
    assert "'bge-m3' (dimension 128)" in str(caught.value)
    assert f"{embedding_model.model_name!r} (dimension {embedding_model.dimension})" in str(caught.value)


def test_closed_store_refuses_work(store: SqliteMemoryStore) -> None:
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.count(ANN)


# ---- transactions --------------------------------------------------------------------------------


def test_a_failure_mid_batch_rolls_the_whole_batch_back(store: SqliteMemoryStore) -> None:
    existing = make_node("old content", memory_id="existing")
    store.upsert([existing], vectors=unit_vectors(1, store.dimension))
    # the first two rows are written before the third breaks a NOT NULL constraint inside the transaction
    batch = [existing.replace(content="new content"), make_node("fresh"), make_node("broken", memory_id=None)]
    with pytest.raises(StoreError, match="memory_id"):
        store.upsert(batch, vectors=unit_vectors(3, store.dimension, seed=1))
    assert store.count(ANN) == 1
    assert store.get(["existing"])[0].content == "old content"
    assert store.search(ANN, query="fresh", mode=SearchMode.KEYWORD) == []


def test_a_busy_writer_makes_others_wait_then_fail_clearly(db_path: Path, embedding_model: LocalEmbedding) -> None:
    with SqliteMemoryStore(path=db_path, embedding_model=embedding_model, busy_timeout_s=0.2) as store:
        blocker = sqlite3.connect(db_path, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreError, match="locked") as caught:
                store.upsert([make_node("waits")], vectors=unit_vectors(1, store.dimension))
            assert str(db_path) in str(caught.value)
            assert store.count(ANN) == 0  # readers are not blocked by the writer
            blocker.execute("ROLLBACK")
        finally:
            blocker.close()
        store.upsert([make_node("now it lands")], vectors=unit_vectors(1, store.dimension))
        assert store.count(ANN) == 1


# ---- threads and processes -----------------------------------------------------------------------


def test_threads_write_and_search_at_the_same_time(store: SqliteMemoryStore) -> None:
    vectors = {worker: unit_vectors(50, store.dimension, seed=worker) for worker in range(4)}
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for index in range(50):
                node = make_node(f"memo {worker} {index}", memory_id=f"t{worker}-{index:02d}")
                store.upsert([node], vectors=vectors[worker][index : index + 1])
                if index % 10 == 9:
                    assert _top(store, vectors[worker][index])[0] == node.memory_id
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.count(ANN) == 200
    assert _top(store, vectors[2][17])[0] == "t2-17"
    assert len(store.search(ANN, query="memo", mode=SearchMode.KEYWORD, top_k=500)) == 200


_CHILD = textwrap.dedent(
    """
    import sys
    from memoryscope.models.embedding.local_embedding import LocalEmbedding
    from memoryscope.stores.sqlite_store import SqliteMemoryStore
    from memoryscope.testing.store_contract import make_node, unit_vectors

    path, worker, doomed = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with SqliteMemoryStore(path=path, embedding_model=LocalEmbedding()) as store:
        vectors = unit_vectors(50, store.dimension, seed=100 + worker)
        for index in range(50):
            node = make_node(f"memo {worker} {index}", memory_id=f"p{worker}-{index:02d}")
            store.upsert([node], vectors=vectors[index : index + 1])
        if doomed:
            store.delete([doomed])
    """
)


def test_two_processes_write_one_file_and_searches_see_it(store: SqliteMemoryStore, db_path: Path) -> None:
    own = [make_node(f"memo parent {index}", memory_id=f"parent-{index}") for index in range(10)]
    own_vectors = unit_vectors(10, store.dimension, seed=99)
    store.upsert(own, vectors=own_vectors)
    assert _top(store, own_vectors[0])[0] == "parent-0"  # the matrix is now cached in this process
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(db_path), str(worker), "parent-0" if worker == 0 else ""],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for worker in range(2)
    ]
    for child in children:
        _, stderr = child.communicate(timeout=120)
        assert child.returncode == 0, stderr
    assert store.count(ANN) == 10 + 2 * 50 - 1
    assert _top(store, unit_vectors(50, store.dimension, seed=101)[49]) == ("p1-49", pytest.approx(1.0, abs=1e-5))
    assert _top(store, own_vectors[0])[0] != "parent-0"
    assert len(store.search(ANN, query="memo", mode=SearchMode.KEYWORD, top_k=500)) == 109


# ---- the change log behind the in-memory matrices -------------------------------------------------


def test_another_store_on_the_same_file_sees_every_kind_of_change(db_path: Path, embedding_model: LocalEmbedding) -> None:
    with (
        SqliteMemoryStore(path=db_path, embedding_model=embedding_model) as reader,
        SqliteMemoryStore(path=db_path, embedding_model=embedding_model) as writer,
    ):
        nodes = [make_node(f"memo {index}", memory_id=f"n{index}") for index in range(4)]
        vectors = unit_vectors(4, reader.dimension)
        writer.upsert(nodes, vectors=vectors)
        assert _top(reader, vectors[3])[0] == "n3"
        writer.update("n3", user_name="bob")  # moves to another user
        writer.update("n2", reflected=True)
        writer.delete(["n1"])
        writer.upsert([make_node("memo new", memory_id="n4")], vectors=vectors[1:2])
        assert _top(reader, vectors[3])[0] != "n3"
        assert _top(reader, vectors[3], MemoryFilter("bob"))[0] == "n3"
        assert _top(reader, vectors[1])[0] == "n4"
        reflected = reader.search(MemoryFilter("ann", reflected=True), vector=vectors[2], mode=SearchMode.DENSE)
        assert [node.memory_id for node in reflected] == ["n2"]


def test_a_pruned_change_log_still_keeps_matrices_right(db_path: Path, embedding_model: LocalEmbedding) -> None:
    options = {"path": db_path, "embedding_model": embedding_model, "change_log_retain": 5}
    with SqliteMemoryStore(**options) as reader, SqliteMemoryStore(**options) as writer:  # type: ignore[arg-type]
        vectors = unit_vectors(40, reader.dimension)
        writer.upsert([make_node("memo", memory_id="first")], vectors=vectors[:1])
        assert _top(reader, vectors[0])[0] == "first"
        for index in range(1, 40):
            writer.upsert([make_node("memo", memory_id=f"m{index}")], vectors=vectors[index : index + 1])
        writer.delete(["first"])
        assert _top(reader, vectors[39])[0] == "m39"
        assert reader.count(ANN) == len(reader.search(ANN, vector=vectors[0], mode=SearchMode.DENSE, top_k=100)) == 39
        connection = sqlite3.connect(db_path)
        try:
            assert connection.execute("SELECT count(*) FROM memory_changes").fetchone()[0] <= 2 * 5 + 1
        finally:
            connection.close()


def test_a_large_batch_and_many_users_with_a_small_cache(db_path: Path, embedding_model: LocalEmbedding) -> None:
    with SqliteMemoryStore(path=db_path, embedding_model=embedding_model, cache_max_users=2) as store:
        users = ["ann", "bob", "cy"]
        vectors = {user: unit_vectors(1200, store.dimension, seed=seed) for seed, user in enumerate(users)}
        for user in users:
            store.upsert([make_node("memo", user_name=user, memory_id=f"{user}-0")], vectors=vectors[user][:1])
            assert _top(store, vectors[user][0], MemoryFilter(user))[0] == f"{user}-0"
        for user in users:  # far more than a delta: the matrices reload
            nodes = [make_node("memo", user_name=user, memory_id=f"{user}-{index}") for index in range(1, 1200)]
            store.upsert(nodes, vectors=vectors[user][1:])
        for _ in range(2):
            for user in users:
                assert _top(store, vectors[user][777], MemoryFilter(user))[0] == f"{user}-777"


def test_keyword_search_matches_speaker_and_context_with_stems(store: SqliteMemoryStore) -> None:
    reply = make_node("Mostly pottery.", meta={"speaker": "Jon", "context": "Any new hobbies lately?"})
    store.upsert([reply, make_node("Paris in May")])
    hits = store.search(ANN, query="What is Jon's hobby?", mode=SearchMode.KEYWORD)
    assert [hit.memory_id for hit in hits] == [reply.memory_id]


def test_an_old_keyword_index_is_rebuilt_on_open(db_path: Path, embedding_model: LocalEmbedding) -> None:
    node = make_node("She was painting sunsets")
    with SqliteMemoryStore(path=db_path, embedding_model=embedding_model) as first:
        first.upsert([node])
    with sqlite3.connect(db_path) as raw:  # as an older MemoryScope left it: unstemmed words, no version
        raw.execute("UPDATE memory_words SET words = 'she was painting sunsets'")
        raw.execute("DELETE FROM store_meta WHERE key = 'keyword_index_version'")
    raw.close()
    with SqliteMemoryStore(path=db_path, embedding_model=embedding_model) as second:
        assert [n.memory_id for n in second.search(ANN, query="paint sunset", mode=SearchMode.KEYWORD)] == [node.memory_id]


def test_hybrid_keyword_weight_weighs_the_keyword_list(db_path: Path, embedding_model: LocalEmbedding) -> None:
    """Fused score = 1 / (60 + dense rank) + weight / (60 + keyword rank)."""
    worded, close = make_node("zebra crossing"), make_node("a completely unrelated sentence")
    vectors = unit_vectors(2, embedding_model.dimension, seed=5)
    for weight in (0.5, 2.0):
        with SqliteMemoryStore(path=db_path, embedding_model=embedding_model, hybrid_keyword_weight=weight) as opened:
            opened.upsert([worded, close], vectors=vectors)
            hits = opened.search(ANN, query="zebra", vector=vectors[1], mode=SearchMode.HYBRID, top_k=2)
            scores = {hit.memory_id: hit.score for hit in hits}
            assert scores[worded.memory_id] == pytest.approx(1 / 62 + weight / 61)
            assert scores[close.memory_id] == pytest.approx(1 / 61)


def test_hybrid_score_fusion_adds_the_scaled_scores_of_both_lists(db_path: Path, embedding_model: LocalEmbedding) -> None:
    """Each list scaled to [0, 1] over its own hits, the keyword list weighted, then summed."""
    nodes = [make_node("zebra crossing"), make_node("zebra zebra zebra stripes"), make_node("an unrelated sentence")]
    vectors = unit_vectors(3, embedding_model.dimension, seed=7)
    query = vectors[2]
    cosines = vectors @ query
    with SqliteMemoryStore(
        path=db_path, embedding_model=embedding_model, hybrid_fusion="scores", hybrid_keyword_weight=0.5
    ) as opened:
        opened.upsert(nodes, vectors=vectors)
        keyword = {hit.memory_id: hit.score for hit in opened.search(ANN, query="zebra", mode=SearchMode.KEYWORD, top_k=3)}
        hits = opened.search(ANN, query="zebra", vector=query, mode=SearchMode.HYBRID, top_k=3)
    low, high = float(cosines.min()), float(cosines.max())
    dense = {node.memory_id: (float(c) - low) / (high - low) for node, c in zip(nodes, cosines, strict=True)}
    low, high = min(keyword.values()), max(keyword.values())
    words = {memory_id: (score - low) / (high - low) for memory_id, score in keyword.items()}
    expected = {memory_id: dense[memory_id] + 0.5 * words.get(memory_id, 0.0) for memory_id in dense}
    assert {hit.memory_id: hit.score for hit in hits} == pytest.approx(expected)
    assert [hit.memory_id for hit in hits] == sorted(expected, key=expected.__getitem__, reverse=True)


def test_a_message_is_embedded_with_its_speaker(store: SqliteMemoryStore, embedding_model: LocalEmbedding) -> None:
    said = make_node("Mostly pottery.", meta={"speaker": "Jon"})
    store.upsert([said])
    expected = embedding_model.embed_passages(['Jon said, "Mostly pottery."'])[0]
    assert _top(store, expected) == (said.memory_id, pytest.approx(1.0, abs=1e-4))
