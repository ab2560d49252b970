"""Packed copies of large users' matrices beside the file, so a new process starts fast.

Loading a user's matrix row by row (`_sqlite_cache._reload`) costs ~1 s at 100k memories: every
row is a Python tuple and every vector its own blob. A snapshot holds the same matrix as one
file of contiguous arrays (row ids, float32 vectors, the filter fields as one record array): the
row ids and fields are read straight into the matrix's arrays, and the vectors are used where
they lie, the file mapped into memory copy-on-write (`_mapped_vectors`; read into memory where
the platform cannot map so): a first search at 100k x 384 then takes ~16 ms to reach them
instead of ~85 ms to read and copy 150 MB. Blobs inside SQLite were tried first: SQLite walks a
150 MB blob 4 KB page by page (~200 ms), most of a cold first search.

Where: `<file>-snapshots/`, one file per user and snapshot, named with a random token; the
`matrix_snapshot_files` table says which file is current, with the change-log position (`seq`) it
reflects and what it holds. Why it stays right:
- a snapshot is used only while the change log since `seq` is complete
  (`changes_pruned_through <= seq`), and the changes after it are replayed as for any matrix;
  so whatever other processes write meanwhile, a write only adds to the log;
- the file is written in full, flushed to disk and renamed before the table names it, and its
  header (seq, rows, dimension) and size must match the table's row: a file missing, cut short
  or of another snapshot is ignored (the user is loaded row by row, and a new snapshot saved);
- files are never changed once named; the one a newer snapshot replaces is deleted after;
- a delete drops its users' snapshots, and a snapshot copied before a delete is not named after
  it (checked under the write lock), so a deleted memory's vector lives on in no named file.
Snapshots are written after a full reload (and on closing a store that wrote many of a user's
memories, `SnapshotWriter.wanted`), on a background thread with its own connection,
straight from the live matrix a chunk of rows at a time, each chunk under the matrix's lock: no
search waits for more than one chunk, and no second copy of the matrix is made (copying it whole
inside the first search cost that search 1.4 s at 100k). A matrix that changes meanwhile is
written again from its new state. A file another program needs (a backup of the store) is not
among them: they are only a cache, made again when missing.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from memoryscope.stores._arrays import empty
from memoryscope.stores._sqlite_schema import PRUNED_THROUGH_SQL, TIME_FIELDS

if TYPE_CHECKING:  # a type only: `_sqlite_connections` imports `_sqlite_cache`, which imports this
    from memoryscope.stores._sqlite_connections import SqliteConnections

__all__ = [
    "LEFT_SINCE_SQL",
    "CHUNK_ROWS",
    "MatrixMoved",
    "SnapshotWriter",
    "far_behind",
    "forget_snapshots",
    "read_snapshot",
    "remove_snapshot_files",
    "snapshot_folder",
    "write_snapshot",
]

_MAGIC = b"MSSNAP01"
_HEADER = np.dtype([("magic", "S8"), ("seq", "<i8"), ("rows", "<i8"), ("dimension", "<i8")])
_FIELDS = np.dtype(
    [("target", "<i4"), ("workspace", "<i4"), ("memory_type", "i1"), ("status", "i1")]
    + [(name, "<f8") for name in TIME_FIELDS]
    + [("reflected", "?"), ("updated", "?")]
)
_SAVE_SQL = (
    "INSERT OR REPLACE INTO matrix_snapshot_files (user_name, seq, rows, dimension, names, file) VALUES (?, ?, ?, ?, ?, ?)"
)
# a row of the user changed after `seq` that is no longer the user's
LEFT_SINCE_SQL = """
SELECT 1 FROM memory_changes AS c
WHERE c.user_name = ? AND c.seq > ?
  AND NOT EXISTS (SELECT 1 FROM memories AS m WHERE m.row_id = c.row_id AND m.user_name = c.user_name)
LIMIT 1
"""
_FIELD_NAMES = ("target", "workspace", "memory_type", "status", "reflected", "updated")
_MAP_PRIVATE = getattr(mmap, "MAP_PRIVATE", 0)  # POSIX: where a mapped file may be deleted while mapped
_log = logging.getLogger(__name__)

CHUNK_ROWS = 8192  # rows copied out per hold of the matrix's lock (12 MB of 384-d vectors)
_ATTEMPTS = 3  # a matrix that keeps changing while it is written is left without a snapshot ...
_RETRY_AFTER_S = 60.0  # ... and its user's next try waits this long: no rewriting it on every write


def far_behind(changes: int, rows: int) -> bool:
    """Whether a snapshot `changes` rows behind the log, of a matrix of `rows`, costs so long a
    replay at every start that a newer one is worth writing."""
    return changes > max(1024, rows // 16)


def snapshot_folder(database: Path) -> Path:
    """Where the snapshots of the store file `database` live."""
    return Path(f"{database}-snapshots")


def _snapshot_file(database: Path, file: object) -> Path:
    """The file a `matrix_snapshot_files` row names (only its name is used: never a path elsewhere)."""
    return snapshot_folder(database) / Path(str(file)).name


class MatrixMoved(Exception):
    """The matrix changed while a snapshot of it was being written: the file would mix two states."""


def _copy_out(matrix: Any, out: BinaryIO, chunk_rows: int) -> tuple[int, int, dict[str, list[str]]]:
    """Write `matrix` (a `UserMatrix`) to `out` as a snapshot file's body, `chunk_rows` rows at a
    time, each copied while holding the matrix's lock: a search of the user waits for one chunk
    at most, and no copy of the whole matrix is ever made. Returns (seq, rows, names); raises
    `MatrixMoved` when the matrix changed between two chunks."""
    with matrix.lock:
        version, seq, size = matrix.version, matrix.seq, matrix.size
        target_names, workspace_names, type_names = matrix.code_names()
    out.write(np.array([(_MAGIC, seq, size, matrix.dimension)], dtype=_HEADER).tobytes())
    for section in (_row_ids, _vectors, _fields):
        for start in range(0, size, chunk_rows):
            with matrix.lock:
                if matrix.version != version:
                    raise MatrixMoved
                part = section(matrix, start, min(start + chunk_rows, size))
            out.write(part.tobytes())
    return seq, size, {"target": target_names, "workspace": workspace_names, "type": type_names}


def _row_ids(matrix: Any, start: int, stop: int) -> np.ndarray:
    return matrix.row_ids[start:stop].astype("<i8")


def _vectors(matrix: Any, start: int, stop: int) -> np.ndarray:
    return matrix.vectors[start:stop].astype("<f4")


def _fields(matrix: Any, start: int, stop: int) -> np.ndarray:
    fields = np.empty(stop - start, dtype=_FIELDS)
    for name in _FIELD_NAMES:
        fields[name] = getattr(matrix, name)[start:stop]
    for name in TIME_FIELDS:
        fields[name] = matrix.times[name][start:stop]
    return fields


def _size(rows: int, dimension: int) -> int:
    return _HEADER.itemsize + rows * (8 + 4 * dimension + _FIELDS.itemsize)


def write_snapshot(
    connection: sqlite3.Connection, database: Path, user_name: str, matrix: Any, chunk_rows: int = CHUNK_ROWS
) -> bool:
    """Store `matrix` (a `UserMatrix`) as the user's snapshot, unless a newer one is there or one
    of its rows was deleted since it was copied; True when written. Raises `MatrixMoved` (and
    leaves nothing behind) when the matrix changed while it was copied out."""
    folder = snapshot_folder(database)
    folder.mkdir(exist_ok=True)
    name = f"{secrets.token_hex(8)}.snapshot"
    temporary = folder / (name + ".part")
    try:
        with open(temporary, "wb") as out:
            seq, rows, names = _copy_out(matrix, out, chunk_rows)
            out.flush()
            os.fsync(out.fileno())  # on disk before the table names it: never a named file half written
        os.replace(temporary, folder / name)
    finally:
        temporary.unlink(missing_ok=True)
    replaced = None
    connection.execute("BEGIN IMMEDIATE")
    try:
        found = connection.execute("SELECT seq, file FROM matrix_snapshot_files WHERE user_name = ?", (user_name,)).fetchone()
        if found is not None and found[0] > seq:
            replaced = name  # a newer one is there: ours goes (one as new is replaced: it may be the damaged one)
        elif connection.execute(LEFT_SINCE_SQL, (user_name, seq)).fetchone() is not None:
            # one of its rows was deleted (or moved to another user) after it was copied: a deleted
            # memory must not live on in a file. Checked under the write lock, so a later delete
            # finds this row and drops it.
            replaced = name
        else:
            replaced = None if found is None else found[1]
            row = (user_name, seq, rows, matrix.dimension, json.dumps(names), name)
            connection.execute(_SAVE_SQL, row)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        (folder / name).unlink(missing_ok=True)
        raise
    if replaced is not None:
        remove_snapshot_files(database, [replaced])
    return replaced != name


def forget_snapshots(connection: sqlite3.Connection, user_names: Collection[str]) -> list[str]:
    """Drop the snapshots of `user_names` inside the caller's write transaction; returns their
    files, for `remove_snapshot_files` once that transaction has committed."""
    files: list[str] = []
    for user_name in user_names:
        found = connection.execute("SELECT file FROM matrix_snapshot_files WHERE user_name = ?", (user_name,)).fetchone()
        if found is not None:
            connection.execute("DELETE FROM matrix_snapshot_files WHERE user_name = ?", (user_name,))
            files.append(str(found[0]))
    return files


def remove_snapshot_files(database: Path, files: Collection[str]) -> None:
    """Delete snapshot files no row names any more (a reader holding one open still reads it whole)."""
    for file in files:
        _snapshot_file(database, file).unlink(missing_ok=True)


def read_snapshot(connection: sqlite3.Connection, database: Path, matrix: Any, user_name: str, pruned_through: int) -> bool:
    """Fill the empty `matrix` from the user's snapshot and set its `seq`, inside the caller's
    read transaction; False (matrix untouched) when there is none usable."""
    found = connection.execute(
        "SELECT seq, rows, dimension, names, file FROM matrix_snapshot_files WHERE user_name = ?", (user_name,)
    ).fetchone()
    if found is None:
        return False
    seq, rows, dimension, names, file = found
    if dimension != matrix.dimension or seq < pruned_through:
        return False
    path = _snapshot_file(database, file)
    try:
        with open(path, "rb") as source:
            if os.fstat(source.fileno()).st_size != _size(rows, dimension):
                raise ValueError("its size is not what the table says")
            header = np.frombuffer(source.read(_HEADER.itemsize), dtype=_HEADER)[0]
            if (header["magic"], int(header["seq"]), int(header["rows"]), int(header["dimension"])) != (
                _MAGIC,
                seq,
                rows,
                dimension,
            ):
                raise ValueError("its header is not what the table says")
            vectors = _mapped_vectors(source, rows, dimension)
            # room to grow before the next copy; the vectors stay in the file's pages until a row is added
            matrix.reset(rows + rows // 8, vectors=vectors)
            # straight into the matrix's arrays: no copy beside the one from the OS
            _read_into(source, matrix.row_ids[:rows])
            if vectors is None:
                _read_into(source, matrix.vectors[:rows])
            else:
                source.seek(rows * 4 * dimension, os.SEEK_CUR)
            fields = empty(rows, _FIELDS, populate=True)
            _read_into(source, fields)
    except (OSError, ValueError) as error:
        _log.info("the matrix snapshot of user %r is not usable (%s); loading the user row by row", user_name, error)
        matrix.reset(0)
        return False
    for name in _FIELD_NAMES:
        getattr(matrix, name)[:rows] = fields[name]
    for name in TIME_FIELDS:
        matrix.times[name][:rows] = fields[name]
    decoded = json.loads(names)
    if "type" in decoded:  # written with its type codes; before, the types had fixed codes
        matrix.restored(rows, decoded["target"], decoded["workspace"], seq, decoded["type"])
    else:
        matrix.restored(rows, decoded["target"], decoded["workspace"], seq)
    return True


def _mapped_vectors(source: BinaryIO, rows: int, dimension: int) -> np.ndarray | None:
    """The snapshot's vectors as an array over the file's own pages (a private mapping: a write
    to a row copies its page, the file never changes), or None where the platform has no such
    mapping (then they are read into memory of their own).

    Reading them costs a fresh 150 MB for 100k x 384 and a copy (~85 ms, most of a first search
    on a warm OS file cache); mapped, the first scan takes the OS's cached pages as they are (the
    first search's dense scan: ~16 ms). A file is never changed once named and a deleted one
    stays readable while mapped (POSIX), so the mapping stays valid."""
    if not (_MAP_PRIVATE and rows):
        return None
    mapping = mmap.mmap(source.fileno(), 0, flags=_MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    if hasattr(mapping, "madvise") and hasattr(mmap, "MADV_WILLNEED"):  # read ahead now, if the OS does not hold the pages
        mapping.madvise(mmap.MADV_WILLNEED)
    offset = _HEADER.itemsize + rows * 8
    return np.frombuffer(mapping, dtype="<f4", count=rows * dimension, offset=offset).reshape(rows, dimension)


def _read_into(source: Any, array: np.ndarray) -> None:
    view = memoryview(array).cast("B")  # type: ignore[arg-type]  # numpy arrays are buffers; its stubs do not say so
    if source.readinto(view) != view.nbytes:
        raise ValueError("it is cut short")


class SnapshotWriter:
    """Reads snapshots, and writes them on one background thread (its own connection), so no
    search waits for the write lock or for writing tens of megabytes. A failed write is only
    logged: the next reload tries again, and meanwhile loading row by row stays right. A user
    whose matrix changed under every attempt is not tried again for `_RETRY_AFTER_S`: under a
    steady stream of writes each attempt would be thrown away, and that I/O with it."""

    def __init__(self, connections: SqliteConnections, from_rows: int) -> None:
        self.from_rows = from_rows
        self._connections = connections
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._pending: set[str] = set()
        self._resting_until: dict[str, float] = {}  # user -> monotonic time of their next try

    def read(self, connection: sqlite3.Connection, matrix: Any, user_name: str, pruned_through: int) -> bool:
        return read_snapshot(connection, self._connections.path, matrix, user_name, pruned_through)

    def exists(self, connection: sqlite3.Connection, user_name: str) -> bool:
        """Whether the user has a snapshot (usable or not)."""
        sql = "SELECT 1 FROM matrix_snapshot_files WHERE user_name = ?"
        return connection.execute(sql, (user_name,)).fetchone() is not None

    def wanted(self, connection: sqlite3.Connection, user_name: str, dimension: int, written: int) -> int:
        """The user's number of memories when a process that changed `written` of them should
        save a new snapshot, else 0: the user has `from_rows` memories or more, `written` is
        `far_behind` what a snapshot may lag, and there is no usable snapshot (none, its file
        missing or of the wrong size, one the log was pruned past, one of vectors of another
        `dimension`) or only one `far_behind` the log."""
        memories = int(connection.execute("SELECT count(*) FROM memories WHERE user_name = ?", (user_name,)).fetchone()[0])
        if memories < self.from_rows or not far_behind(written, memories):
            return 0
        return memories if self._outdated(connection, user_name, dimension, memories) else 0

    def _outdated(self, connection: sqlite3.Connection, user_name: str, dimension: int, memories: int) -> bool:
        sql = "SELECT seq, rows, dimension, file FROM matrix_snapshot_files WHERE user_name = ?"
        found = connection.execute(sql, (user_name,)).fetchone()
        if found is None:
            return True
        seq, rows, found_dimension, file = found
        pruned_through = connection.execute(PRUNED_THROUGH_SQL).fetchone()[0]
        if seq < pruned_through or found_dimension != dimension:
            return True
        try:
            if _snapshot_file(self._connections.path, file).stat().st_size != _size(rows, dimension):
                return True
        except OSError:
            return True
        sql = "SELECT count(DISTINCT row_id) FROM memory_changes WHERE user_name = ? AND seq > ?"
        return far_behind(connection.execute(sql, (user_name, seq)).fetchone()[0], memories)

    def submit(self, user_name: str, matrix: Any) -> None:
        """Save `matrix` (a `UserMatrix`) as the user's snapshot, on the background thread."""
        with self._lock:
            if user_name in self._pending or time.monotonic() < self._resting_until.get(user_name, 0.0):
                return
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memoryscope-snapshot")
            self._pending.add(user_name)
            self._executor.submit(self._write, user_name, matrix)

    def _write(self, user_name: str, matrix: Any) -> None:
        try:
            for _ in range(_ATTEMPTS):
                try:
                    write_snapshot(self._connections.connection(), self._connections.path, user_name, matrix)
                    return
                except MatrixMoved:
                    continue  # written again from the matrix as it is now
            with self._lock:
                self._resting_until[user_name] = time.monotonic() + _RETRY_AFTER_S
            _log.info("the matrix of user %r kept changing while it was saved; trying again in %.0f s", user_name, _RETRY_AFTER_S)
        except Exception as error:  # a snapshot only saves time: the store stays right without it
            _log.warning("could not save the matrix snapshot of user %r (%s); the next reload tries again", user_name, error)
        finally:
            with self._lock:
                self._pending.discard(user_name)

    def wait(self) -> None:
        """Until every submitted snapshot is written (for tests and `close`)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
