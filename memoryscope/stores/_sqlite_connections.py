"""Opening the SQLite file of `sqlite_memory_store`, and its connections and transactions.

One connection per thread (SQLite connections must not be shared mid-statement, and separate
connections let reads run in parallel); writes take `BEGIN IMMEDIATE` so a writer queues for
the lock up front, under the busy timeout, instead of failing half-way when another thread or
process writes. WAL lets readers go on while someone writes.

A damaged file (a failing disk, a copy cut short) is refused when opened, naming the file, what
SQLite's check found and what to do: `PRAGMA quick_check` runs on files up to
`QUICK_CHECK_MAX_BYTES` (30-95 ms for 10,000 memories, 26 MB, on two busy cores); a bigger file
gets a check of its header (truncation) only, so opening stays fast. Damage found later by any
statement is reported the same way (`errors`). `check_store` is the full check of `memoryscope doctor`.

A file SQLite may not write (a read-only folder, where WAL keeps its `-wal` and `-shm` files, or
a read-only file or mount) is no damage: it is reported as not writable, naming what to change.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from memoryscope.errors import StoreError
from memoryscope.models.base import EmbeddingModel
from memoryscope.stores._sqlite_cache import VECTOR_ADVICE, vector_damage
from memoryscope.stores._sqlite_metadata import update_metadata_index
from memoryscope.stores._sqlite_reindex import continue_keyword_reindex, start_keyword_reindex
from memoryscope.stores._sqlite_schema import (
    NODE_COLUMNS,
    ROWID_SPAN,
    SCHEMA_SCRIPT,
    SCHEMA_VERSION,
    TRIGGERS_SCRIPT,
    assign_keyword_slots,
    row_damage,
)

__all__ = ["QUICK_CHECK_MAX_BYTES", "SqliteConnections", "check_store", "file_problems", "migrate_schema"]

# up to this size a file is quick-checked when opened: 30-95 ms at 10k memories (26 MB), 1.3-3.5 ms a MB
QUICK_CHECK_MAX_BYTES = 32 * 1024 * 1024
_DAMAGED_ADVICE = (
    "restore the file from a backup, or save what can still be read with `memoryscope export --config ... --out FILE`; "
    "`memoryscope doctor --config ...` checks it all"
)
_SHOWN_LINES = 5  # of a check's findings, in an error message


class SqliteConnections:
    """The connections of one store to its file; `open` must succeed before anything else."""

    def __init__(self, path: Path, busy_timeout_s: float) -> None:
        self.path = path
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._connections: list[tuple[weakref.ref[threading.Thread], sqlite3.Connection]] = []
        self._lock = threading.Lock()
        self._closed = False

    def open(
        self, embedding_model: EmbeddingModel, dimension: int | None, *, allow_model_change: bool = False
    ) -> tuple[str, int | None]:
        """Create or check the file: WAL on, schema in place, the embedding model recorded or matched.

        Returns the recorded `(model name, dimension)`; another model than `embedding_model` is
        an error unless `allow_model_change` (the store is being opened to re-embed). `dimension`
        None (a remote model not yet asked): only the name is matched now, and the dimension
        later (`record_dimension`); the recorded dimension is then None on a new file."""
        if str(self.path) == ":memory:" or str(self.path).startswith("file:"):
            raise StoreError(f"sqlite_memory_store needs a file path, got {str(self.path)!r}")
        if self.path.is_dir():
            raise StoreError(f"cannot open memory store {self.path}: it is a directory, not a file")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreError(f"cannot create the folder of memory store {self.path}: {error.strerror or error}") from None
        self._check_on_open()
        try:
            connection = self.connection()
            mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"cannot open memory store {self.path}: WAL mode unavailable (journal mode {mode!r})")
            # BEGIN inside the script: executescript would commit a transaction begun before it
            connection.executescript("BEGIN IMMEDIATE;" + SCHEMA_SCRIPT)
            try:
                recorded = self._check_recorded_model(connection, embedding_model.model_name, dimension, allow_model_change)
                reindex = start_keyword_reindex(connection)
                update_metadata_index(connection, self.path)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            if reindex:  # in chunks of short transactions, after the open's own one
                continue_keyword_reindex(self, self.path)
        except sqlite3.Error as error:
            if _is_damage(error):
                raise StoreError(damaged_message(self.path, f"SQLite says {error}")) from None
            if _is_unwritable(error):
                raise StoreError(unwritable_message(self.path, str(error))) from None
            raise StoreError(f"cannot open memory store {self.path}: {error}") from None
        return recorded

    def record_dimension(self, name: str, dimension: int) -> tuple[str, int]:
        """The model's `dimension`, learned after the open, matched against the file's (or
        recorded, when the file has none yet); the recorded `(model name, dimension)`."""
        with self.errors():
            recorded = dict(self.connection().execute("SELECT key, value FROM store_meta").fetchall())
            if recorded.get("embedding_model") == name and recorded.get("embedding_dimension") == str(dimension):
                return name, dimension  # the common case: read only
            with self.write_transaction() as connection:
                found = self._check_recorded_model(connection, name, dimension, False)
        return found[0], dimension

    def _check_on_open(self) -> None:
        """Refuse a damaged file: `quick_check` when small enough, else its header's page count."""
        try:
            size = self.path.stat().st_size
        except OSError:
            return  # a new file (or one SQLite will say it cannot open)
        if size == 0:
            return
        if size > QUICK_CHECK_MAX_BYTES and not _looks_truncated(self.path, size):
            return
        try:
            found = file_problems(self.path, full=False)
        except sqlite3.Error as error:  # SQLite could not even start the check
            raise StoreError(unwritable_message(self.path, str(error))) from None
        if found:
            raise StoreError(damaged_message(self.path, "PRAGMA quick_check says: " + "; ".join(found[:_SHOWN_LINES])))

    def _check_recorded_model(
        self, connection: sqlite3.Connection, name: str, dimension: int | None, allow_model_change: bool
    ) -> tuple[str, int | None]:
        """Record the embedding model on first open; refuse another model on later opens (unless
        allowed). An unknown `dimension` is left to match (or record) when learned."""
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
        recorded_dimension = recorded.get("embedding_dimension")
        if recorded_name is None or (recorded_name == name and recorded_dimension is None and dimension is not None):
            values = [("schema_version", SCHEMA_VERSION), ("embedding_model", name)]
            if dimension is not None:
                values.append(("embedding_dimension", str(dimension)))
            connection.executemany("INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)", values)
            return name, dimension
        stored = None if recorded_dimension is None else int(recorded_dimension)
        if allow_model_change:
            return recorded_name, stored or 0
        if recorded_name != name or (dimension is not None and stored is not None and stored != dimension):
            raise StoreError(self._model_mismatch(recorded_name, stored, name, dimension))
        return name, stored if dimension is None else dimension

    def _model_mismatch(self, recorded_name: str, stored: int | None, name: str, dimension: int | None) -> str:
        fix = "re-embed it with `memoryscope reembed --config ...` or point memory_store.path at another file"
        if recorded_name == name:
            return (
                f"memory store {self.path} holds vectors of dimension {stored} made by embedding model {name!r}, "
                f"but that model now gives vectors of dimension {dimension}; set `dimensions: {stored}` under "
                f"model.embedding_model if the model can make them (with `send_dimensions: true`), or {fix}"
            )
        shown = "not known yet" if dimension is None else str(dimension)
        return (
            f"memory store {self.path} holds vectors made by embedding model {recorded_name!r} "
            f"(dimension {stored}), but it was opened with {name!r} (dimension {shown}); {fix}"
        )

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
            if _is_damage(error):
                raise StoreError(damaged_message(self.path, f"SQLite says {error}")) from error
            if _is_unwritable(error):
                raise StoreError(unwritable_message(self.path, str(error))) from error
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


def damaged_message(path: Path, found: str) -> str:
    return f"memory store {path} is damaged ({found}): {_DAMAGED_ADVICE}"


def unwritable_message(path: Path, said: str) -> str:
    """That the store at `path` may not be written, what stops it (as far as can be told), and the fix."""
    folder = path.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        why, fix = f"its folder {folder} is read-only for this user", f"`chmod u+w {folder}`, or run as its owner"
    elif path.exists() and not os.access(path, os.W_OK):
        why, fix = "the file is read-only for this user", f"`chmod u+w {path}`, or run as its owner"
    else:  # the permission bits allow it (or this is root): the file system itself refuses
        immutable = f"`lsattr -d {folder} {path}`"
        why = f"the file system refuses writes there (a read-only mount, or an immutable file or folder: {immutable})"
        fix = "remount it read-write or `chattr -i` it"
    return (
        f"memory store {path} is not writable: {why} (SQLite says: {said}). Make it writable ({fix}), "
        "or point memory_store.path (`--store`) at a file in a writable folder"
    )


def _is_unwritable(error: sqlite3.Error) -> bool:
    """SQLITE_READONLY, SQLITE_CANTOPEN or SQLITE_PERM: SQLite may not write the file (or its folder)."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (3, 8, 14)
    return "readonly database" in str(error) or "unable to open database file" in str(error)


def _is_damage(error: sqlite3.Error) -> bool:
    """SQLITE_CORRUPT or SQLITE_NOTADB: the file itself is damaged (or is no database)."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (11, 26)
    return "malformed" in str(error) or "not a database" in str(error)


def _check_lines(connection: sqlite3.Connection, pragma: str) -> list[str]:
    """What `PRAGMA quick_check` / `integrity_check` found ([] when the file is sound)."""
    try:
        lines = [str(line) for (line,) in connection.execute(f"PRAGMA {pragma}").fetchall()]
    except sqlite3.DatabaseError as error:  # so damaged the check cannot even start
        if _is_unwritable(error):
            raise  # not damage: SQLite may not open or write the file (or its folder)
        return [str(error)]
    return [] if lines == ["ok"] else lines


def _looks_truncated(path: Path, size: int) -> bool:
    """True when the header promises more pages than the file holds (only a hint: a checkpoint
    of another process may be growing the file, so a quick_check confirms)."""
    with path.open("rb") as file:
        header = file.read(100)
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return True
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages, counter, valid_for = (int.from_bytes(header[at : at + 4], "big") for at in (28, 24, 92))
    return counter == valid_for and pages * page_size > size


def file_problems(path: Path, *, full: bool = True) -> list[str]:
    """What SQLite's own check (`integrity_check`, or `quick_check` unless `full`) finds in the
    file at `path`, on a connection of its own ([] when sound). The file must exist. A check
    SQLite cannot start because it may not write there (a read-only folder or file) raises
    that `sqlite3.Error`: it says nothing of the file's soundness."""
    with closing(sqlite3.connect(path, timeout=30.0)) as connection:
        return _check_lines(connection, "integrity_check" if full else "quick_check")


def check_store(connection: sqlite3.Connection, path: Path, dimension: int | None, *, full: bool) -> dict[str, list[str]]:
    """Every problem in the file, by what was checked: the file's structure (`integrity_check`,
    `quick_check` unless `full`), every memory row, every vector (of `dimension`: None when
    none is recorded yet, so any vector is one of the wrong size), the keyword index."""
    pragma = "integrity_check" if full else "quick_check"
    try:
        report = {"file": [f"PRAGMA {pragma} says: {line}" for line in _check_lines(connection, pragma)]}
    except sqlite3.Error as error:  # not damage: SQLite may not write there
        return {"file": [unwritable_message(path, str(error))]}
    checks = {"memories": _row_problems, "vectors": lambda c: _vector_problems(c, dimension), "keyword index": _word_problems}
    for name, check in checks.items():
        try:
            report[name] = check(connection)
        except sqlite3.DatabaseError as error:
            report[name] = [f"cannot read them: {error}"]
    if full and not report["keyword index"]:
        try:  # FTS5's own check of its index against its rows (a write statement that changes nothing)
            connection.execute("INSERT INTO memory_words (memory_words) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as error:
            report["keyword index"].append(f"FTS5 integrity-check says: {error}")
    if report["file"]:
        report["file"].append(damaged_message(path, "see above"))
    return report


def _row_problems(connection: sqlite3.Connection) -> list[str]:
    columns = ", ".join(f'"{name}"' for name in NODE_COLUMNS)
    problems = []
    with closing(connection.execute(f"SELECT {columns} FROM memories")) as cursor:
        while rows := cursor.fetchmany(1000):
            for row in rows:
                found = row_damage(row)
                if found is not None:
                    problems.append(f"memory {row[0]!r}: {found[1]}; reads leave it out: delete it or write a sound value")
    return problems


def _vector_problems(connection: sqlite3.Connection, dimension: int | None) -> list[str]:
    problems = []
    sql = "SELECT m.memory_id, v.vector FROM memories AS m LEFT JOIN memory_vectors AS v ON v.row_id = m.row_id"
    with closing(connection.execute(sql)) as cursor:
        while rows := cursor.fetchmany(1000):
            for memory_id, blob in rows:
                found = "it has none" if blob is None else vector_damage(blob, dimension or 0)
                if found is not None:
                    problems.append(f"memory {memory_id!r}: its vector is missing or damaged ({found}); {VECTOR_ADVICE}")
    return problems


def _word_problems(connection: sqlite3.Connection) -> list[str]:
    """Memories without their keyword entry, and entries of no memory."""
    missing = [
        memory_id
        for (memory_id,) in connection.execute(
            "SELECT m.memory_id FROM memories AS m LEFT JOIN keyword_scopes AS s ON s.user_name = m.user_name "
            "WHERE s.slot IS NULL OR NOT EXISTS "
            f"(SELECT 1 FROM memory_words AS w WHERE w.rowid = s.slot * {ROWID_SPAN} + m.row_id)"
        )
    ]
    counts = "SELECT (SELECT count(*) FROM memories), (SELECT count(*) FROM memory_words)"
    memories, entries = connection.execute(counts).fetchone()
    extra = entries - (memories - len(missing))
    rebuild = "the next open rebuilds the index after: DELETE FROM store_meta WHERE key = 'keyword_index_version'"
    problems = []
    if missing:
        shown = ", ".join(repr(memory_id) for memory_id in missing[:10]) + (" ..." if len(missing) > 10 else "")
        some = "1 memory has" if len(missing) == 1 else f"{len(missing)} memories have"
        problems.append(f"{some} no keyword entry, so keyword search misses them: {shown}; {rebuild}")
    if extra > 0:
        problems.append(f"{extra} keyword entries belong to no memory; {rebuild}")
    return problems


def migrate_schema(connection: sqlite3.Connection, version: str) -> None:
    """Bring a file of an older schema `version` to `SCHEMA_VERSION`, inside the caller's write
    transaction (the tables of SCHEMA_SCRIPT already created). Every memory is kept."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(memories)")}
    if "rank_terms" not in columns:
        # NULL in every row: the keyword re-index this open starts fills it (KEYWORD_INDEX_VERSION)
        connection.execute("ALTER TABLE memories ADD COLUMN rank_terms TEXT")
    if version == "1":
        # the triggers address `memory_words` by the new rowids; the words move there unchanged
        # (same rows, same tokens: keyword ranking is exactly as before)
        for trigger in ("memories_inserted", "memories_updated", "memories_deleted"):
            connection.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        _run_script(connection, TRIGGERS_SCRIPT)
        assign_keyword_slots(connection)
        connection.execute("CREATE TEMP TABLE moved_words AS SELECT rowid AS row_id, scope, words FROM memory_words")
        connection.execute("DELETE FROM memory_words")
        connection.execute(
            f"INSERT INTO memory_words (rowid, scope, words) SELECT s.slot * {ROWID_SPAN} + w.row_id, w.scope, w.words "
            "FROM temp.moved_words AS w JOIN memories AS m ON m.row_id = w.row_id "
            "JOIN keyword_scopes AS s ON s.user_name = m.user_name"
        )
        connection.execute("DROP TABLE temp.moved_words")
        version = "2"
    if version == "2":
        # `memory_meta` and its trigger come with SCHEMA_SCRIPT; `update_metadata_index` fills them
        version = "3"
    if version == "3":
        # `memories_updated` now fires on a node's own columns only: filling `rank_terms` is no change
        connection.execute("DROP TRIGGER IF EXISTS memories_updated")
        _run_script(connection, TRIGGERS_SCRIPT)
        version = "4"
    if version != SCHEMA_VERSION:
        raise StoreError(f"schema version {version} is unknown; this MemoryScope reads {SCHEMA_VERSION}")


def _run_script(connection: sqlite3.Connection, script: str) -> None:
    """Run `script` statement by statement: `executescript` would commit the open transaction."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            connection.execute(statement)
            statement = ""
