"""Opening the SQLite file of `sqlite_memory_store`, and its connections and transactions.

One connection per thread (SQLite connections must not be shared mid-statement, and separate
connections let reads run in parallel); writes take `BEGIN IMMEDIATE` so a writer queues for
the lock up front, under the busy timeout, instead of failing half-way when another thread or
process writes. WAL lets readers go on while someone writes.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memoryscope.errors import StoreError
from memoryscope.models.base import EmbeddingModel
from memoryscope.stores._sqlite_keyword import rebuild_keyword_index
from memoryscope.stores._sqlite_schema import (
    KEYWORD_INDEX_VERSION,
    SCHEMA_SCRIPT,
    SCHEMA_VERSION,
    migrate_schema,
)

__all__ = ["SqliteConnections"]


class SqliteConnections:
    """The connections of one store to its file; `open` must succeed before anything else."""

    def __init__(self, path: Path, busy_timeout_s: float) -> None:
        self.path = path
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._connections: list[tuple[weakref.ref[threading.Thread], sqlite3.Connection]] = []
        self._lock = threading.Lock()
        self._closed = False

    def open(self, embedding_model: EmbeddingModel, dimension: int, *, allow_model_change: bool = False) -> tuple[str, int]:
        """Create or check the file: WAL on, schema in place, the embedding model recorded or matched.

        Returns the recorded `(model name, dimension)`; another model than `embedding_model` is
        an error unless `allow_model_change` (the store is being opened to re-embed)."""
        if str(self.path) == ":memory:" or str(self.path).startswith("file:"):
            raise StoreError(f"sqlite_memory_store needs a file path, got {str(self.path)!r}")
        if self.path.is_dir():
            raise StoreError(f"cannot open memory store {self.path}: it is a directory, not a file")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreError(f"cannot create the folder of memory store {self.path}: {error.strerror or error}") from None
        try:
            connection = self.connection()
            mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"cannot open memory store {self.path}: WAL mode unavailable (journal mode {mode!r})")
            # BEGIN inside the script: executescript would commit a transaction begun before it
            connection.executescript("BEGIN IMMEDIATE;" + SCHEMA_SCRIPT)
            try:
                recorded = self._check_recorded_model(connection, embedding_model.model_name, dimension, allow_model_change)
                _update_keyword_index(connection, self.path)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        except sqlite3.Error as error:
            raise StoreError(f"cannot open memory store {self.path}: {error}") from None
        return recorded

    def _check_recorded_model(
        self, connection: sqlite3.Connection, name: str, dimension: int, allow_model_change: bool
    ) -> tuple[str, int]:
        """Record the embedding model on first open; refuse another model on later opens (unless allowed)."""
        recorded = dict(connection.execute("SELECT key, value FROM store_meta").fetchall())
        version = recorded.setdefault("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            if not version.isdigit() or int(version) > int(SCHEMA_VERSION):
                raise StoreError(
                    f"memory store {self.path} has schema version {version}; this MemoryScope reads {SCHEMA_VERSION}"
                )
            migrate_schema(connection, version)  # an older file: brought up to date, nothing lost
            connection.execute("UPDATE store_meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION,))
        recorded_name = recorded.get("embedding_model")
        if recorded_name is None:
            connection.executemany(
                "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)",
                [("schema_version", SCHEMA_VERSION), ("embedding_model", name), ("embedding_dimension", str(dimension))],
            )
            return name, dimension
        recorded_dimension = recorded.get("embedding_dimension")
        if allow_model_change:
            return recorded_name, int(recorded_dimension or 0)
        if recorded_name != name or recorded_dimension != str(dimension):
            raise StoreError(
                f"memory store {self.path} holds vectors made by embedding model {recorded_name!r} "
                f"(dimension {recorded_dimension}), but it was opened with {name!r} (dimension {dimension}); "
                "re-embed it with `memoryscope reembed --config ...` or point memory_store.path at another file"
            )
        return name, dimension

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (created on first use)."""
        if self._closed:
            raise StoreError(f"memory store {self.path} is closed")
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is not None:
            return connection
        connection = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_s,
            isolation_level=None,  # transactions are explicit: BEGIN IMMEDIATE for writes
            check_same_thread=False,  # used by one thread only, but `close()` may run on another
        )
        # NORMAL is durable against process crashes in WAL mode; only power loss may drop the last commits
        connection.execute("PRAGMA synchronous = NORMAL")
        self._local.connection = connection
        with self._lock:
            self._close_connections_of_finished_threads()
            self._connections.append((weakref.ref(threading.current_thread()), connection))
        return connection

    def _close_connections_of_finished_threads(self) -> None:
        alive = []
        for thread_ref, connection in self._connections:
            thread = thread_ref()
            if thread is None or not thread.is_alive():
                connection.close()
            else:
                alive.append((thread_ref, connection))
        self._connections = alive

    @contextmanager
    def errors(self) -> Iterator[None]:
        """SQLite errors become StoreError naming the file."""
        try:
            yield
        except sqlite3.Error as error:
            raise StoreError(f"memory store {self.path}: {error}") from error

    @contextmanager
    def write_transaction(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection inside `BEGIN IMMEDIATE`; committed on success, else rolled back."""
        connection = self.connection()
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield connection
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._closed = True
        with self._lock:
            for _, connection in self._connections:
                connection.close()
            self._connections = []


def _update_keyword_index(connection: sqlite3.Connection, path: Path) -> None:
    """Re-index a file whose keyword index an older MemoryScope built (once, when opened)."""
    found = connection.execute("SELECT value FROM store_meta WHERE key = 'keyword_index_version'").fetchone()
    if found is not None and found[0] == KEYWORD_INDEX_VERSION:
        return
    rebuild_keyword_index(connection, path)
    connection.execute(
        "INSERT OR REPLACE INTO store_meta (key, value) VALUES ('keyword_index_version', ?)", (KEYWORD_INDEX_VERSION,)
    )
