"""Matrix snapshots of `sqlite_memory_store` (`_sqlite_snapshot`): a store opened on a file starts
from the packed copy beside it plus the change log since, and must hold exactly what loading
every row would, whatever other store objects on the same file wrote meanwhile; a snapshot file
missing or damaged only means loading row by row."""

from __future__ import annotations

import mmap
import sqlite3
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from memoryscope.memory import MemoryType
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores import _sqlite_snapshot
from memoryscope.stores._sqlite_cache import UserMatrix, _reload
from memoryscope.stores._sqlite_snapshot import MatrixMoved, read_snapshot, snapshot_folder, write_snapshot
from memoryscope.stores.base import MemoryFilter, SearchMode
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.store_contract import BASE_TIME, make_node, unit_vectors

ANN = MemoryFilter("ann")


def _store(path: Path, model: LocalEmbedding, **options: object) -> SqliteMemoryStore:
    options = {"matrix_snapshot_from": 10, **options}
    return SqliteMemoryStore(path=path, embedding_model=model, **options)  # type: ignore[arg-type]


def _fill(store: SqliteMemoryStore, count: int, start: int = 0) -> None:
    nodes = [
        make_node(
            f"memory {index}",
            memory_id=f"m{index}",
            target_name=f"t{index % 3}",
            workspace=f"w{index % 2}",
            memory_type=list(MemoryType)[index % 3],
            event_time=None if index % 4 else BASE_TIME + timedelta(days=index),
            reflected=bool(index % 2),
        )
        for index in range(start, start + count)
    ]
    store.upsert(nodes, vectors=unit_vectors(count, store.dimension, seed=start))


def _rows(matrix: UserMatrix) -> dict[int, tuple[object, ...]]:
    """Every row of `matrix` by row id, codes turned back into names: comparable across matrices."""
    targets, workspaces, types = matrix.code_names()
    out = {}
    for position in range(matrix.size):
        times = tuple(float(matrix.times[name][position]) for name in sorted(matrix.times))
        out[int(matrix.row_ids[position])] = (
            targets[matrix.target[position]],
            workspaces[matrix.workspace[position]],
            types[matrix.memory_type[position]],
            int(matrix.status[position]),
            bool(matrix.reflected[position]),
            bool(matrix.updated[position]),
            np.nan_to_num(times, nan=-1.0).tolist(),
            matrix.vectors[position].tobytes(),
        )
    return out


def _row_by_row(path: Path, dimension: int) -> dict[int, tuple[object, ...]]:
    matrix = UserMatrix(dimension)
    with sqlite3.connect(path) as connection:
        _reload(connection, matrix, "ann")
    return _rows(matrix)


def _snapshotted(store: SqliteMemoryStore, count: int, start: int = 0) -> None:
    """Add `count` memories, search (which loads the matrix) and wait for the snapshot it saves."""
    _fill(store, count, start=start)
    _searched_matrix(store)
    store._snapshots.wait()


class _MovingVectors:
    """Stands in for `_sqlite_snapshot._vectors`: copies a chunk of vectors, then changes the
    matrix as every change of its rows does (the caller holds the lock), and counts its calls."""

    def __init__(self) -> None:
        self.copy_vectors = _sqlite_snapshot._vectors
        self.calls = 0

    def __call__(self, matrix: UserMatrix, start: int, stop: int) -> np.ndarray:
        self.calls += 1
        part = self.copy_vectors(matrix, start, stop)
        matrix.version += 1
        return part


def _searched_matrix(store: SqliteMemoryStore) -> UserMatrix:
    store.search(ANN, vector=unit_vectors(1, store.dimension, seed=99)[0], mode=SearchMode.DENSE, top_k=3)
    matrix = store._cache.loaded("ann")
    assert matrix is not None
    return matrix


def test_a_large_users_first_load_saves_a_snapshot_that_equals_the_rows(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    with _store(path, embedding_model) as store:
        _snapshotted(store, 40)
    with sqlite3.connect(path) as connection:
        matrix = UserMatrix(embedding_model.dimension)
        assert read_snapshot(connection, path, matrix, "ann", pruned_through=0)
        seq = connection.execute("SELECT seq FROM matrix_snapshot_files WHERE user_name = 'ann'").fetchone()[0]
    assert matrix.seq == seq > 0
    assert _rows(matrix) == _row_by_row(path, embedding_model.dimension)


def test_a_small_user_gets_no_snapshot(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    with _store(path, embedding_model) as store:
        _snapshotted(store, 5)
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM matrix_snapshot_files").fetchone()[0] == 0


def test_snapshot_plus_later_changes_by_another_store_equals_the_rows(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    """Updates, a memory moved to another user, and inserts after the snapshot, by another store
    object on the file (a delete drops the snapshot: see the test of that)."""
    path = tmp_path / "m.db"
    with _store(path, embedding_model) as first:
        _fill(first, 40)
        _searched_matrix(first)
        first._snapshots.wait()
    with _store(path, embedding_model) as writer:
        writer.update("m3", target_name="moved", reflected=True, event_time=BASE_TIME)
        writer.update("m5", content="now about something else")
        _fill(writer, 4, start=100)
        writer.upsert([make_node("to bob", user_name="bob", memory_id="m8")], vectors=unit_vectors(1, writer.dimension, 5))
    with _store(path, embedding_model) as fresh:
        loaded = _searched_matrix(fresh)
        with sqlite3.connect(path) as connection:
            snapshot_seq = connection.execute("SELECT seq FROM matrix_snapshot_files WHERE user_name = 'ann'").fetchone()[0]
            head = connection.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memory_changes'").fetchone()[0]
        assert snapshot_seq < head  # the fresh store replayed changes on top of the snapshot
        assert _rows(loaded) == _row_by_row(path, embedding_model.dimension)
        assert len(_rows(loaded)) == 40 - 1 + 4


def test_search_results_from_a_snapshot_equal_the_original_stores(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    queries = unit_vectors(5, embedding_model.dimension, seed=7)
    with _store(path, embedding_model) as first:
        _fill(first, 60)
        expected = [[(n.memory_id, n.score) for n in first.search(ANN, query="memory", vector=q, top_k=10)] for q in queries]
        first._snapshots.wait()
    with _store(path, embedding_model) as fresh:
        found = [[(n.memory_id, n.score) for n in fresh.search(ANN, query="memory", vector=q, top_k=10)] for q in queries]
    assert found == expected


def test_a_snapshot_the_pruned_log_no_longer_covers_is_ignored(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    with _store(path, embedding_model, change_log_retain=5) as store:
        _snapshotted(store, 30)
    # another process, set to save no snapshots, writes on; each batch prunes the log past the snapshot
    with _store(path, embedding_model, change_log_retain=5, matrix_snapshot_from=1_000_000) as other:
        for index in range(3):
            _fill(other, 20, start=200 + 20 * index)
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM matrix_snapshot_files").fetchone()[0] == 1
        pruned = int(connection.execute("SELECT value FROM store_meta WHERE key = 'changes_pruned_through'").fetchone()[0])
        assert not read_snapshot(connection, path, UserMatrix(embedding_model.dimension), "ann", pruned)
    with _store(path, embedding_model) as fresh:
        assert _rows(_searched_matrix(fresh)) == _row_by_row(path, embedding_model.dimension)


def test_a_snapshot_file_missing_or_cut_short_means_loading_row_by_row(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    with _store(path, embedding_model) as store:
        _snapshotted(store, 40)
    [snapshot] = list(snapshot_folder(path).glob("*.snapshot"))
    snapshot.write_bytes(snapshot.read_bytes()[:-10])
    with sqlite3.connect(path) as connection:
        assert not read_snapshot(connection, path, UserMatrix(embedding_model.dimension), "ann", 0)
    with _store(path, embedding_model) as fresh:
        assert _rows(_searched_matrix(fresh)) == _row_by_row(path, embedding_model.dimension)
        fresh._snapshots.wait()  # the reload saved a sound one in its place
    [replacement] = list(snapshot_folder(path).glob("*.snapshot"))
    assert replacement != snapshot
    replacement.unlink()
    with _store(path, embedding_model) as fresh:
        assert _rows(_searched_matrix(fresh)) == _row_by_row(path, embedding_model.dimension)


def test_a_newer_snapshot_replaces_the_file_of_the_older(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    with _store(path, embedding_model) as store:
        _snapshotted(store, 40)
        first = list(snapshot_folder(path).glob("*"))
        _fill(store, 2000, start=1000)  # more than a replay: the next search reloads and saves again
        _searched_matrix(store)
        store._snapshots.wait()
    files = list(snapshot_folder(path).glob("*"))
    assert len(first) == len(files) == 1 and first != files
    with _store(path, embedding_model) as fresh:
        assert fresh._cache.loaded("ann") is None
        assert _searched_matrix(fresh).size == 2040


def test_a_new_store_starts_from_the_snapshot_not_the_rows(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    """Proof the snapshot is read: a vector changed in the snapshot only shows in the new matrix."""
    path = tmp_path / "m.db"
    with _store(path, embedding_model) as store:
        _snapshotted(store, 20)
    [snapshot] = list(snapshot_folder(path).glob("*.snapshot"))
    data = bytearray(snapshot.read_bytes())
    first_vector = 32 + 20 * 8  # after the header and the 20 row ids
    data[first_vector : first_vector + 4] = np.float32(0.5).tobytes()
    snapshot.write_bytes(bytes(data))
    with _store(path, embedding_model) as fresh:
        assert fresh._cache.loaded("ann") is None
        assert float(_searched_matrix(fresh).vectors[0, 0]) == 0.5


def test_a_snapshot_is_written_chunk_by_chunk_and_equals_the_rows(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    with _store(path, embedding_model) as store:
        _fill(store, 45)
        matrix = _searched_matrix(store)
        store._snapshots.wait()
        with sqlite3.connect(path) as connection:
            assert write_snapshot(connection, path, "ann", matrix, chunk_rows=4)  # 12 chunks a section
    with sqlite3.connect(path) as connection:
        again = UserMatrix(embedding_model.dimension)
        assert read_snapshot(connection, path, again, "ann", pruned_through=0)
    assert _rows(again) == _row_by_row(path, embedding_model.dimension)


def test_a_matrix_that_changes_while_written_leaves_no_file(
    tmp_path: Path, embedding_model: LocalEmbedding, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change between two chunks would mix two states in one file: the write gives up cleanly."""
    path = tmp_path / "m.db"
    with _store(path, embedding_model) as store:
        _snapshotted(store, 30)
        matrix = store._cache.loaded("ann")
        assert matrix is not None
        before = sorted(snapshot_folder(path).iterdir())
        with sqlite3.connect(path) as connection:
            named = connection.execute("SELECT file, seq FROM matrix_snapshot_files").fetchall()
        monkeypatch.setattr(_sqlite_snapshot, "_vectors", _MovingVectors())
        with sqlite3.connect(path) as connection, pytest.raises(MatrixMoved):
            write_snapshot(connection, path, "ann", matrix, chunk_rows=8)
        with sqlite3.connect(path) as connection:
            assert connection.execute("SELECT file, seq FROM matrix_snapshot_files").fetchall() == named
    assert sorted(snapshot_folder(path).iterdir()) == before  # no new file, no .part left


def test_deleting_memories_drops_their_users_snapshot_and_only_theirs(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    """A snapshot holds vectors as they were: a deleted memory must not live on in one."""
    path = tmp_path / "m.db"
    bob = MemoryFilter("bob")
    with _store(path, embedding_model) as store:
        _snapshotted(store, 30)
        bobs = [make_node(f"bob {index}", user_name="bob", memory_id=f"b{index}") for index in range(20)]
        store.upsert(bobs, vectors=unit_vectors(20, store.dimension, seed=3))
        store.search(bob, vector=unit_vectors(1, store.dimension, seed=4)[0], mode=SearchMode.DENSE, top_k=3)
        store._snapshots.wait()
        with sqlite3.connect(path) as connection:
            files = dict(connection.execute("SELECT user_name, file FROM matrix_snapshot_files").fetchall())
        assert set(files) == {"ann", "bob"}

        assert store.delete(["m4"]) == 1
        with sqlite3.connect(path) as connection:
            left = dict(connection.execute("SELECT user_name, file FROM matrix_snapshot_files").fetchall())
        assert left == {"bob": files["bob"]}
        assert sorted(file.name for file in snapshot_folder(path).iterdir()) == [files["bob"]]

        assert store.delete_by_filter(bob) == 20  # a whole user gone: no file of theirs is left
        assert list(snapshot_folder(path).iterdir()) == []

        _searched_matrix(store)  # ann's next search catches up and saves a snapshot without m4
        store._snapshots.wait()
    with sqlite3.connect(path) as connection:
        assert [user for (user,) in connection.execute("SELECT user_name FROM matrix_snapshot_files")] == ["ann"]
        again = UserMatrix(embedding_model.dimension)
        assert read_snapshot(connection, path, again, "ann", pruned_through=0)
    assert _rows(again) == _row_by_row(path, embedding_model.dimension) and len(_rows(again)) == 29


def test_a_user_whose_matrix_changes_under_every_attempt_rests_before_the_next(
    tmp_path: Path, embedding_model: LocalEmbedding, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a steady stream of writes every attempt would be thrown away: after three, the user
    is left alone for a while instead of being rewritten at each search."""
    path = tmp_path / "m.db"
    moving = _MovingVectors()
    with _store(path, embedding_model) as store:
        _fill(store, 30)
        monkeypatch.setattr(_sqlite_snapshot, "_vectors", moving)
        matrix = _searched_matrix(store)  # the first load submits a snapshot: three attempts, all moved
        store._snapshots.wait()
        assert moving.calls == 3
        store._snapshots.submit("ann", matrix)  # what the next search after a change would do
        store._snapshots.wait()
        assert moving.calls == 3
        monkeypatch.setattr(_sqlite_snapshot, "_vectors", moving.copy_vectors)
        store._snapshots._resting_until.clear()  # the rest is over: a quiet matrix is saved
        store._snapshots.submit("ann", matrix)
        store._snapshots.wait()
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM matrix_snapshot_files").fetchone()[0] == 1


def _snapshot_files(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as connection:
        return dict(connection.execute("SELECT user_name, file FROM matrix_snapshot_files").fetchall())


def test_a_store_that_filled_a_large_user_without_searching_leaves_a_snapshot(
    tmp_path: Path, embedding_model: LocalEmbedding, caplog: pytest.LogCaptureFixture
) -> None:
    """A process that only writes (an import) leaves the next process's first search one file to read."""
    path = tmp_path / "m.db"
    caplog.set_level("INFO", logger="memoryscope.stores._sqlite_search")
    with _store(path, embedding_model) as store:
        _fill(store, 1100)  # more than a snapshot may lag behind: worth saving on closing
        bobs = [make_node(f"bob {index}", user_name="bob", memory_id=f"b{index}") for index in range(5)]
        store.upsert(bobs, vectors=unit_vectors(5, store.dimension, 5))
        assert store._cache.loaded("ann") is None and _snapshot_files(path) == {}
    assert set(_snapshot_files(path)) == {"ann"}  # bob has fewer memories than matrix_snapshot_from
    assert [record.getMessage()[:48] for record in caplog.records] == ["saving the vectors of user 'ann' (1100 memories)"]
    with sqlite3.connect(path) as connection:
        matrix = UserMatrix(embedding_model.dimension)
        assert read_snapshot(connection, path, matrix, "ann", pruned_through=0)
        head = connection.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memory_changes'").fetchone()[0]
    assert matrix.seq == head
    assert _rows(matrix) == _row_by_row(path, embedding_model.dimension)


def test_a_few_writes_keep_the_snapshot_and_many_renew_it_on_closing(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    with _store(path, embedding_model) as store:
        _snapshotted(store, 40)
    first = _snapshot_files(path)["ann"]
    with _store(path, embedding_model) as store:
        _fill(store, 3, start=100)  # replayed in no time: not worth a new file
    assert _snapshot_files(path) == {"ann": first}
    with _store(path, embedding_model) as store:
        _fill(store, 1100, start=1000)  # more than `far_behind` allows
    renewed = _snapshot_files(path)["ann"]
    assert renewed != first
    assert sorted(file.name for file in snapshot_folder(path).iterdir()) == [renewed]
    with sqlite3.connect(path) as connection:
        matrix = UserMatrix(embedding_model.dimension)
        assert read_snapshot(connection, path, matrix, "ann", pruned_through=0)
    assert len(_rows(matrix)) == 40 + 3 + 1100 and _rows(matrix) == _row_by_row(path, embedding_model.dimension)


def test_a_few_writes_leave_a_missing_snapshot_to_the_next_search(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    """A command that deletes two memories drops the snapshot and does not spend its closing on
    a new one: the next process to search the user loads it row by row and saves one."""
    path = tmp_path / "m.db"
    with _store(path, embedding_model) as store:
        _snapshotted(store, 30)
    with _store(path, embedding_model) as store:
        assert store.delete(["m4", "m7"]) == 2
    assert _snapshot_files(path) == {}
    with _store(path, embedding_model) as store:
        _searched_matrix(store)
        store._snapshots.wait()
    assert set(_snapshot_files(path)) == {"ann"}
    with sqlite3.connect(path) as connection:
        matrix = UserMatrix(embedding_model.dimension)
        assert read_snapshot(connection, path, matrix, "ann", pruned_through=0)
    assert len(_rows(matrix)) == 28 and _rows(matrix) == _row_by_row(path, embedding_model.dimension)


def test_a_snapshot_copied_before_a_delete_is_not_named_after_it(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    """A snapshot already being written when another process deletes one of its memories would
    otherwise land after the delete with the deleted vector in it."""
    path = tmp_path / "m.db"
    with _store(path, embedding_model) as store:
        _snapshotted(store, 30)
        before_delete = store._cache.loaded("ann")
        assert before_delete is not None
        with _store(path, embedding_model, matrix_snapshot_from=1_000_000) as other:
            assert other.delete(["m4"]) == 1  # drops the snapshot there was
            other.update("m5", content="changed, not deleted")
        with sqlite3.connect(path) as connection:
            assert not write_snapshot(connection, path, "ann", before_delete)  # its copy still holds m4
            assert connection.execute("SELECT count(*) FROM matrix_snapshot_files").fetchone()[0] == 0
        assert list(snapshot_folder(path).iterdir()) == []
        caught_up = _searched_matrix(store)  # the search replays the delete and saves a snapshot without it
        store._snapshots.wait()
        assert caught_up.size == 29
    assert set(_snapshot_files(path)) == {"ann"}
    with sqlite3.connect(path) as connection:
        again = UserMatrix(embedding_model.dimension)
        assert read_snapshot(connection, path, again, "ann", pruned_through=0)
    assert _rows(again) == _row_by_row(path, embedding_model.dimension) and len(_rows(again)) == 29


def _mapped(array: np.ndarray) -> bool:
    """Whether `array` lies in a memory-mapped file's pages (its base, or the base's base, ...)."""
    base = array.base
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base.obj if isinstance(base, memoryview) else base, mmap.mmap)


@pytest.mark.skipif(not hasattr(mmap, "MAP_PRIVATE"), reason="the vectors are mapped on POSIX only")
def test_vectors_mapped_from_a_snapshot_change_in_memory_never_in_the_file(
    tmp_path: Path, embedding_model: LocalEmbedding
) -> None:
    """A new store takes a snapshot's vectors in the file's pages; a rewritten vector, a delete
    (which drops the file while it is mapped), then new rows keep the matrix equal to the rows,
    and the file stays as it was written until it is dropped."""
    path = tmp_path / "m.db"
    with _store(path, embedding_model) as store:
        _snapshotted(store, 40)
    [snapshot] = list(snapshot_folder(path).glob("*.snapshot"))
    written = snapshot.read_bytes()
    with _store(path, embedding_model) as fresh:
        matrix = _searched_matrix(fresh)
        assert _mapped(matrix.vectors) and len(matrix.vectors) == 40 < len(matrix.row_ids)
        assert matrix._positions is None  # row id -> row: not needed yet, made when first needed
        fresh.upsert([make_node("memory 3, said again", memory_id="m3")], vectors=unit_vectors(1, fresh.dimension, seed=41))
        assert _searched_matrix(fresh) is matrix and _mapped(matrix.vectors)  # a copy of the page, not of the matrix
        assert _rows(matrix) == _row_by_row(path, embedding_model.dimension)
        assert snapshot.read_bytes() == written
        fresh.delete(["m5"])
        assert _searched_matrix(fresh) is matrix and _mapped(matrix.vectors)
        assert _rows(matrix) == _row_by_row(path, embedding_model.dimension)
        assert not snapshot.exists()  # a deleted memory's vector lives on in no file
        _fill(fresh, 3, start=200)  # room of their own, the size of the other columns'
        assert _searched_matrix(fresh) is matrix and not _mapped(matrix.vectors)
        assert len(matrix.vectors) == len(matrix.row_ids) and matrix.size == 42
        assert _rows(matrix) == _row_by_row(path, embedding_model.dimension)


def test_by_default_a_user_of_a_thousand_memories_gets_a_snapshot(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    """The default threshold: at 1,000 memories loading row by row costs several warm retrieves."""
    path = tmp_path / "m.db"
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as store:
        for user, count in (("ann", 1000), ("bob", 999)):
            nodes = [make_node(f"memory {index}", user_name=user) for index in range(count)]
            store.upsert(nodes, vectors=unit_vectors(count, store.dimension, seed=count))
            store.search(MemoryFilter(user), vector=unit_vectors(1, store.dimension, seed=1)[0], mode=SearchMode.DENSE, top_k=3)
        store._snapshots.wait()
    assert set(_snapshot_files(path)) == {"ann"}
