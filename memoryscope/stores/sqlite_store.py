"""`sqlite_memory_store`: the default, embedded store — one SQLite file, no server.

- Durability and concurrency (`_sqlite_connections`): WAL mode, a busy timeout so writers from
  other threads and processes queue instead of failing, every write in one `BEGIN IMMEDIATE`
  transaction (a batch lands whole or not at all), one connection per thread.
- Dense search: per-user float32 matrices in memory (`_sqlite_cache`), kept current through a
  trigger-filled change log, so writes from any process are seen by the next search.
  Past `ann_min_memories` a user's matrix also keeps an approximate HNSW index (`_sqlite_ann`,
  `usearch`): candidates from it, filtered and scored exactly from the matrix. A graph built in
  the background is saved beside the file and loaded by the next process (`_sqlite_ann_files`).
- Keyword search: FTS5 `bm25()` over `memoryscope.text.keyword_text` (the words every store
  indexes: stemmed, jieba for Chinese), each word prefixed with the user's slot so posting lists
  and word frequencies are the user's own, in a per-user rowid range (`_sqlite_keyword`). For a
  large user the same BM25 scores are computed with numpy from posting lists kept in memory
  (`_sqlite_bm25`): FTS5 spends ~90% of a search scoring matches one call at a time.
- Search results: decoded nodes are kept between searches, checked against the change log (`_sqlite_nodes`).
- Keyword re-index after an upgrade: in short resumable chunks, other writers carry on (`_sqlite_reindex`).
- Hybrid search: the dense and keyword lists merged by `hybrid_fusion` (`memoryscope.stores.fusion`:
  reciprocal ranks, or scores scaled to [0, 1]), the keyword list weighted by
  `hybrid_keyword_weight` (`_sqlite_search`).
- Cold start: a large user's matrix is also kept beside the file as a packed snapshot tagged
  with its change-log position, so a new process reads it at once and replays the log since
  (`_sqlite_snapshot`).
- Metadata filters: an index of each memory's `meta` values, written with the memory (`_sqlite_metadata`).
- Re-embedding after a model change (`allow_model_change=True`, then `reembed`): resumable, in
  a side table, switched in one transaction (`_sqlite_reembed`).
The layout is in `_sqlite_schema`.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from memoryscope.errors import StoreError
from memoryscope.history import ChangeSource, MemoryChange, changes_of_delete, changes_of_write
from memoryscope.memory import MemoryNode, embedding_text, utc_now
from memoryscope.models.base import EmbeddingModel
from memoryscope.progress import Progress
from memoryscope.stores import _sqlite_history as history
from memoryscope.stores import _sqlite_leases as leases
from memoryscope.stores import _sqlite_state as state
from memoryscope.stores._sqlite_ann import AnnSettings, ann_problems
from memoryscope.stores._sqlite_ann_files import GraphFiles
from memoryscope.stores._sqlite_bm25 import MemoryWords
from memoryscope.stores._sqlite_cache import MatrixCache
from memoryscope.stores._sqlite_connections import SqliteConnections, check_store, file_problems
from memoryscope.stores._sqlite_keyword import KeywordIndex
from memoryscope.stores._sqlite_metadata import write_metadata
from memoryscope.stores._sqlite_nodes import NodeCache
from memoryscope.stores._sqlite_params import SqliteStoreParams
from memoryscope.stores._sqlite_reads import SqliteReads
from memoryscope.stores._sqlite_reembed import reembed_file
from memoryscope.stores._sqlite_schema import (
    NODE_COLUMNS,
    PRUNED_THROUGH_SQL,
    UPDATABLE_FIELDS,
    decoded_nodes,
    filter_sql,
    node_from_row,
    node_to_row,
    scope_token,
    validate_filter,
)
from memoryscope.stores._sqlite_search import Searcher
from memoryscope.stores._sqlite_snapshot import SnapshotWriter, forget_snapshots, remove_snapshot_files
from memoryscope.stores.base import (
    STORES,
    MemoryFilter,
    MemoryStore,
    conflict_error,
    conflicting,
    required_ids,
    unit_rows,
    unmet_requirements,
    validated_params,
)
from memoryscope.stores.fusion import Fusion
from memoryscope.stores.state import StateKey, StateOwner, StateRecord
from memoryscope.text import keyword_text

__all__ = ["SqliteMemoryStore"]

_QUOTED_COLUMNS = [f'"{name}"' for name in NODE_COLUMNS]  # quoted: `key` and `value` are SQL words
_NODE_COLUMNS_SQL = ", ".join(_QUOTED_COLUMNS)
_SELECT_NODES = f"SELECT {_NODE_COLUMNS_SQL} FROM memories"
_UPSERT = (
    f"INSERT INTO memories ({_NODE_COLUMNS_SQL}) VALUES ({', '.join('?' for _ in NODE_COLUMNS)}) "
    "ON CONFLICT (memory_id) DO UPDATE SET "
    + ", ".join(f"{column} = excluded.{column}" for column in _QUOTED_COLUMNS[1:])
    + " RETURNING row_id"
)
_IDS_PARAM = "(SELECT j.value FROM json_each(?) AS j)"
_log = logging.getLogger(__name__)


@STORES.register("sqlite_memory_store")
class SqliteMemoryStore(SqliteReads, MemoryStore):
    """Memories, vectors and keyword index in one SQLite file; safe across threads and processes."""

    Params = SqliteStoreParams

    def __init__(
        self,
        *,
        path: str | Path,
        embedding_model: EmbeddingModel,
        busy_timeout_s: float = 30.0,
        cache_max_users: int = 32,
        hybrid_candidates: int = 100,
        hybrid_keyword_weight: float = 1.0,
        hybrid_fusion: Fusion = "rrf",
        change_log_retain: int = 50_000,
        history_keep_deleted_content: bool = False,
        matrix_snapshot_from: int = 1_000,
        node_cache_size: int = 20_000,
        keyword_in_memory_from: int = 200,
        ann_min_memories: int = 50_000,
        allow_model_change: bool = False,
    ) -> None:
        """`allow_model_change` (not a YAML key): open a file whose vectors another embedding
        model made, to `reembed` it; until then writes and searches are refused.

        Opening never calls the embedding model (but to re-embed, which needs it at once): a
        remote model's vector size is learned when an operation first needs it (`dimension`), and
        checked against the file's then."""
        params = validated_params(
            self.Params,
            "sqlite_memory_store",
            path=Path(path),
            busy_timeout_s=busy_timeout_s,
            cache_max_users=cache_max_users,
            hybrid_candidates=hybrid_candidates,
            hybrid_keyword_weight=hybrid_keyword_weight,
            hybrid_fusion=hybrid_fusion,
            change_log_retain=change_log_retain,
            history_keep_deleted_content=history_keep_deleted_content,
            matrix_snapshot_from=matrix_snapshot_from,
            node_cache_size=node_cache_size,
            keyword_in_memory_from=keyword_in_memory_from,
            ann_min_memories=ann_min_memories,
        )
        self.params = params
        self.path = params.path
        self._written: Counter[str] = Counter()  # memories this object changed, by user: see `close`
        self._written_lock = threading.Lock()
        self.embedding_model = embedding_model
        # re-embedding needs the model at once; else the size is learned when first needed
        known = int(embedding_model.dimension) if allow_model_change else embedding_model.known_dimension
        self._dimension: int | None = None if known is None else int(known)
        self._dimension_lock = threading.Lock()
        self._connections = SqliteConnections(self.path, params.busy_timeout_s)
        self._ann_files = GraphFiles(self._connections)
        self._ann = AnnSettings(params.ann_min_memories, self._ann_files)
        self._cache = MatrixCache(lambda: self.dimension, params.cache_max_users, self._ann)
        self._words = KeywordIndex()
        self._nodes = NodeCache(params.node_cache_size)
        self._snapshots = SnapshotWriter(self._connections, params.matrix_snapshot_from)
        memory_words = MemoryWords(self._connections, params.keyword_in_memory_from, params.cache_max_users)
        self._searcher = Searcher(self._cache, self._words, self._connections, self._snapshots, memory_words)
        try:
            self._recorded = self._connections.open(embedding_model, self._dimension, allow_model_change=allow_model_change)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> SqliteMemoryStore:  # typed as this class, so `with` keeps `.path` and `.dimension`
        return self

    @property
    def dimension(self) -> int:
        """The embedding model's vector size. Asked of the model when first needed (a remote
        model not told its `dimensions` learns it from its first reply, or one probe call), then
        matched against the file's: another size is a StoreError naming both and the fix."""
        if self._dimension is None:
            learned = int(self.embedding_model.dimension)  # outside the lock: it may call the model
            with self._dimension_lock:
                if self._dimension is None:
                    self._recorded = self._connections.record_dimension(self.embedding_model.model_name, learned)
                    self._dimension = learned
        return self._dimension

    def __repr__(self) -> str:
        return f"SqliteMemoryStore(path={str(self.path)!r}, embedding_model={self.embedding_model.model_name!r})"

    def close(self) -> None:
        """Close the file. Before, a user of `matrix_snapshot_from` memories or more of whom
        this object wrote many (an import: more than a snapshot may lag, `far_behind`) and who
        has no up-to-date matrix snapshot gets one, waited for: the next process's first search
        of them then reads one file instead of every row (a first retrieve at 100k memories
        ~0.3 s instead of ~1.5 s; saving it took ~6 s here, beside the import's minutes of
        embedding). A few writes leave that to the next search."""
        self._leave_snapshots()
        self._ann.close()
        self._searcher.close()
        self._connections.close()
        self._cache.clear()
        self._nodes.clear()

    def _leave_snapshots(self) -> None:
        with self._written_lock:
            written, self._written = self._written, Counter()
        if not written or self._dimension is None or self._recorded != (self.embedding_model.model_name, self._dimension):
            # nothing written, no vector written (the size was never needed), or opened to
            # re-embed: the vectors are not this model's yet
            return
        try:
            with self._connections.errors():
                self._searcher.leave_snapshots(written, self._dimension)
        except Exception as error:  # a snapshot only saves time; closing must go on
            _log.warning("could not save matrix snapshots of %s on closing %s: %s", sorted(written), self.path, error)

    def _wrote(self, user_names: Iterable[str]) -> None:
        """Count a written memory for each name (one per memory)."""
        with self._written_lock:
            self._written.update(user_names)

    def wait_for_background(self) -> None:
        """Until what this store builds on background threads (matrix snapshots, keyword posting
        lists, approximate vector indexes) is done; searches are right meanwhile, only slower:
        for benchmarks and tests."""
        self._searcher.wait_for_background()
        self._ann.wait()

    @property
    def recorded_embedding(self) -> tuple[str, int]:
        name, dimension = self._recorded
        if dimension is None:  # a new file: its vectors will be the model's, of its size
            return name, self.dimension
        return name, dimension

    def _require_current_model(self, action: str) -> None:
        name, dimension = self._recorded
        known = self._dimension  # not learned yet: the name was matched at the open, the size is when learned
        if name != self.embedding_model.model_name or (known is not None and dimension not in (None, known)):
            raise StoreError(
                f"memory store {self.path} holds vectors made by embedding model {name!r} (dimension {dimension}) and "
                f"was opened to re-embed them with {self.embedding_model.model_name!r}: {action} waits until reembed() has run"
            )

    # ---- writing ------------------------------------------------------------------------------

    def upsert(
        self,
        nodes: Sequence[MemoryNode],
        vectors: np.ndarray | None = None,
        *,
        requires: Mapping[str, Collection[str]] | None = None,
        change: ChangeSource | None = None,
        expected: Mapping[str, datetime | None] | None = None,
    ) -> list[str]:
        nodes = list(nodes)
        for node in nodes:
            if not isinstance(node, MemoryNode):
                raise StoreError(f"upsert takes MemoryNode objects, got {type(node).__name__}")
        self._require_current_model("upsert")
        given = None if vectors is None else self._unit_rows(vectors, len(nodes), "upsert vectors")
        # a memory_id repeated in one batch: the last one wins, as if upserted one after another
        last_index = {node.memory_id: index for index, node in enumerate(nodes)}
        keep = sorted(last_index.values())
        nodes = [nodes[index] for index in keep]
        if not nodes:
            return []
        rows = [node_to_row(node) for node in nodes]
        words = [keyword_text(node) for node in nodes]
        with self._connections.errors():
            if given is not None:
                new_vectors = dict(enumerate(given[keep]))
            else:
                # embed outside the write lock; re-checked inside in case another writer changed a content
                new_vectors = self._embed_changed(self._connections.connection(), nodes, {})
            with self._connections.write_transaction() as connection:
                if given is None:
                    new_vectors = self._embed_changed(connection, nodes, new_vectors)
                # checked inside the write transaction: a delete lands wholly before or after it
                dropped = unmet_requirements(requires, self._present(connection, required_ids(requires))) if requires else set()
                kept = [index for index, node in enumerate(nodes) if node.memory_id not in dropped]
                before = self._stored(connection, [nodes[index].memory_id for index in kept])
                if expected:  # compare-and-set: checked in the write transaction, so nothing lands between
                    checked = before | self._stored(connection, [key for key in expected if key not in before])
                    wrong = conflicting(expected, checked)
                    if wrong:
                        raise conflict_error(wrong, str(self.path))
                self._write_rows(
                    connection,
                    [nodes[index] for index in kept],
                    [rows[index] for index in kept],
                    [words[index] for index in kept],
                    {position: new_vectors[index] for position, index in enumerate(kept) if index in new_vectors},
                )
                history.record(connection, changes_of_write(before, [nodes[index] for index in kept], change))
        self._wrote(nodes[index].user_name for index in kept)
        return [node.memory_id for node in nodes if node.memory_id in dropped]

    def _stored(self, connection: sqlite3.Connection, memory_ids: Sequence[str]) -> dict[str, MemoryNode]:
        """The stored nodes with these ids, by id (what a write replaces, for the history)."""
        rows = connection.execute(_SELECT_NODES + f" WHERE memory_id IN {_IDS_PARAM}", (json.dumps(list(memory_ids)),))
        return {node.memory_id: node for node in decoded_nodes((row, None) for row in rows.fetchall())}

    def acquire_lease(self, name: str, holder: str, ttl_s: float, *, stale: Callable[[str], bool] | None = None) -> bool:
        with self._connections.errors(), self._connections.write_transaction() as connection:
            return leases.acquire(connection, name, holder, ttl_s, stale)

    def lease_holder(self, name: str) -> tuple[str, float] | None:
        with self._connections.errors(), self._connections.write_transaction() as connection:  # it may make the table
            return leases.holder(connection, name)

    def release_lease(self, name: str, holder: str) -> None:
        with self._connections.errors(), self._connections.write_transaction() as connection:
            leases.release(connection, name, holder)

    # ---- state records ------------------------------------------------------------------------

    def read_state(self, keys: Sequence[StateKey]) -> list[StateRecord]:
        with self._connections.errors():
            return state.read(self._connections.connection(), keys)

    def list_state(self, owner: StateOwner, kind: str) -> list[StateRecord]:
        with self._connections.errors():
            return state.list_kind(self._connections.connection(), owner, kind)

    def write_state(
        self,
        values: Mapping[StateKey, Mapping[str, Any]],
        *,
        expected: Mapping[StateKey, int] | None = None,
        versioned: bool = False,
        change: ChangeSource | None = None,
    ) -> list[StateRecord]:
        with self._connections.errors(), self._connections.write_transaction() as connection:
            return state.write(connection, values, expected, versioned, change, str(self.path))

    def state_versions(self, key: StateKey, *, limit: int = 1000) -> list[StateRecord]:
        with self._connections.errors():
            return state.versions(self._connections.connection(), key, limit)

    def delete_state(self, user_name: str, *, target_name: str | None = None, workspace: str | None = None) -> int:
        with self._connections.errors(), self._connections.write_transaction() as connection:
            return state.delete(connection, user_name, target_name, workspace)

    def iter_state(self, *, user_name: str | None = None, batch_size: int = 500) -> Iterator[list[StateRecord]]:
        with self._connections.errors():
            yield from state.iterate(self._connections.connection(), user_name, batch_size)

    def import_state(self, records: Sequence[StateRecord]) -> int:
        with self._connections.errors(), self._connections.write_transaction() as connection:
            return state.import_records(connection, records)

    @staticmethod
    def _present(connection: sqlite3.Connection, memory_ids: Sequence[str]) -> set[str]:
        query = f"SELECT memory_id FROM memories WHERE memory_id IN {_IDS_PARAM}"
        return {row[0] for row in connection.execute(query, (json.dumps(list(memory_ids)),))}

    def _embed_changed(
        self, connection: sqlite3.Connection, nodes: Sequence[MemoryNode], known: dict[int, np.ndarray]
    ) -> dict[int, np.ndarray]:
        """`known` plus passage vectors for nodes whose stored content differs (or that are new)."""
        stored = dict(
            connection.execute(
                # joined with the vectors: a stored vector can only be kept if there is one
                "SELECT m.memory_id, m.content FROM memories AS m JOIN memory_vectors AS v ON v.row_id = m.row_id "
                f"WHERE m.memory_id IN {_IDS_PARAM}",
                (json.dumps([node.memory_id for node in nodes]),),
            ).fetchall()
        )
        missing = [index for index, node in enumerate(nodes) if index not in known and stored.get(node.memory_id) != node.content]
        if not missing:
            return known
        embedded = self._passage_vectors([embedding_text(nodes[index]) for index in missing])
        return {**known, **dict(zip(missing, embedded, strict=True))}

    def _write_rows(
        self,
        connection: sqlite3.Connection,
        nodes: Sequence[MemoryNode],
        rows: Sequence[tuple[Any, ...]],
        words: Sequence[str],
        new_vectors: dict[int, np.ndarray],
    ) -> None:
        for index, (node, row, text) in enumerate(zip(nodes, rows, words, strict=True)):
            row_id = connection.execute(_UPSERT, row).fetchall()[0][0]
            self._words.write(connection, row_id, node.user_name, scope_token(node.user_name), text)
            write_metadata(connection, row_id, node.user_name, node.meta)
            if index in new_vectors:
                connection.execute(
                    "INSERT OR REPLACE INTO memory_vectors (row_id, vector) VALUES (?, ?)",
                    (row_id, new_vectors[index].astype(np.float32).tobytes()),
                )
        self._prune_change_log(connection)

    def _prune_change_log(self, connection: sqlite3.Connection) -> None:
        """Keep the change log bounded; matrices older than the cut reload instead of replaying."""
        head = connection.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memory_changes'").fetchone()
        pruned = connection.execute(PRUNED_THROUGH_SQL).fetchone()
        retain = self.params.change_log_retain
        if head is None or head[0] - pruned[0] <= 2 * retain:
            return
        cut = head[0] - retain
        connection.execute("DELETE FROM memory_changes WHERE seq <= ?", (cut,))
        connection.execute("UPDATE store_meta SET value = ? WHERE key = 'changes_pruned_through'", (str(cut),))

    def _passage_vectors(self, texts: Sequence[str]) -> np.ndarray:
        return self._unit_rows(self.embedding_model.embed_passages(texts), len(texts), "embedding model output")

    def _unit_rows(self, vectors: Any, count: int, what: str) -> np.ndarray:
        return unit_rows(vectors, count, self.dimension, self.embedding_model.model_name, what)

    def update(self, memory_id: str, *, change: ChangeSource | None = None, **changes: Any) -> MemoryNode:
        self._require_current_model("update")
        unknown = sorted(set(changes) - UPDATABLE_FIELDS)
        if unknown:
            raise StoreError(
                f"cannot update {', '.join(unknown)} of memory {memory_id!r}; "
                f"updatable fields: {', '.join(sorted(UPDATABLE_FIELDS))}"
            )
        with self._connections.errors(), self._connections.write_transaction() as connection:
            row = connection.execute(_SELECT_NODES + " WHERE memory_id = ?", (memory_id,)).fetchone()
            if row is None:
                raise StoreError(f"no memory {memory_id!r} in {self.path}")
            old = node_from_row(row)
            try:
                new = old.replace(**{"updated_at": utc_now(), **changes})
            except (TypeError, ValueError) as error:
                raise StoreError(f"cannot update memory {memory_id!r}: {error}") from None
            new_vectors = {}
            # embedded inside the transaction: reading, changing and writing one node must not interleave
            # with another writer, and one passage costs milliseconds
            if new.content != old.content:
                new_vectors = {0: self._passage_vectors([embedding_text(new)])[0]}
            self._write_rows(connection, [new], [node_to_row(new)], [keyword_text(new)], new_vectors)
            history.record(connection, changes_of_write({memory_id: old}, [new], change))
        self._wrote([new.user_name])
        return new

    def delete(self, memory_ids: Sequence[str], *, change: ChangeSource | None = None) -> int:
        if not memory_ids:
            return 0
        return self._delete_where(f"memory_id IN {_IDS_PARAM}", [json.dumps(list(memory_ids))], change)

    def delete_by_filter(self, memory_filter: MemoryFilter, *, change: ChangeSource | None = None) -> int:
        validate_filter(memory_filter)
        where, params = filter_sql(memory_filter)
        return self._delete_where(where, params, change)

    def _delete_where(self, where: str, params: Sequence[Any], change: ChangeSource | None) -> int:
        """Delete the rows `where` matches, keeping in the history that they were deleted (and,
        unless configured, forgetting what they said). Their users' matrix snapshots and saved
        approximate indexes go too: they hold the vectors as they were, and a deleted memory must
        not live on in one (the next load of such a user reads the rows, and saves a new one)."""
        with self._connections.errors(), self._connections.write_transaction() as connection:
            deleted = [node_from_row(row) for row in connection.execute(f"{_SELECT_NODES} WHERE {where}", params).fetchall()]
            cursor = connection.execute(f"DELETE FROM memories WHERE {where}", params)
            keep = self.params.history_keep_deleted_content
            if not keep:
                history.forget_content(connection, [node.memory_id for node in deleted])
            history.record(connection, changes_of_delete(deleted, change, keep_content=keep))
            self._prune_change_log(connection)
            dropped = forget_snapshots(connection, {node.user_name for node in deleted})
        remove_snapshot_files(self.path, dropped)  # once the rows naming them are gone for good
        self._ann_files.forget({node.user_name for node in deleted})  # and their saved graphs: see `_sqlite_ann_files`
        self._wrote(node.user_name for node in deleted)
        return cursor.rowcount

    def record_history(self, changes: Sequence[MemoryChange]) -> None:
        with self._connections.errors(), self._connections.write_transaction() as connection:
            history.record(connection, changes)

    def history(
        self,
        *,
        memory_id: str | None = None,
        user_name: str | None = None,
        run_id: str | None = None,
        limit: int = 1000,
        newest_first: bool = False,
    ) -> list[MemoryChange]:
        with self._connections.errors(), self._connections.write_transaction() as connection:  # it may create the table
            return history.query(
                connection, memory_id=memory_id, user_name=user_name, run_id=run_id, limit=limit, newest_first=newest_first
            )

    def reembed(self, *, batch_size: int = 256, progress: Progress | None = None) -> int:
        """Re-embed in a side table, batch by batch (resumable), then switch in one transaction
        (see `_sqlite_reembed`); readers carry on meanwhile."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise StoreError(f"reembed: batch_size must be a positive integer, got {batch_size!r}")
        name = self.embedding_model.model_name
        with self._connections.errors():
            count = reembed_file(
                self._connections, name, self.dimension, self._passage_vectors, batch_size, progress or Progress()
            )
        self._recorded = (name, self.dimension)
        self._cache.clear()  # and with the matrices their approximate indexes: built again from the new vectors
        self._ann_files.forget_all()  # the saved ones hold the former vectors
        self._nodes.clear()
        return count

    # ---- health -------------------------------------------------------------------------------

    def check(self, *, full: bool = True) -> dict[str, list[str]]:
        """Every problem in the file, by what was checked ("file": SQLite's `integrity_check`, or
        `quick_check` unless `full`; "memories": each row decodes; "vectors": each has the store's
        dimension; "keyword index": agrees with the rows; "approximate index", when
        `ann_min_memories` is on: `usearch` builds and searches a test graph of that dimension, and
        every saved graph matches its size and CRC-32 (a damaged one costs only time: its user's
        next search builds it again from the rows, `_sqlite_ann_files`)). Empty lists: nothing wrong."""
        with self._connections.errors():
            dimension = self._recorded[1] if self._dimension is None else self._dimension  # no model call to check a file
            report = check_store(self._connections.connection(), self.path, dimension, full=full)
        if self.params.ann_min_memories > 0:
            report["approximate index"] = ann_problems(dimension) + self._ann_files.problems(dimension)
        return report

    def reach(self) -> tuple[str, bool]:
        """The file opened (which takes a write lock) and its folder writable (SQLite keeps its
        `-wal` and `-shm` files there)."""
        for place in (self.path, self.path.parent):
            if not os.access(place, os.W_OK):
                raise StoreError(
                    f"memory store {self.path}: {place} is not writable by this user; give it write permission, "
                    "or point memory_store.path at a writable place"
                )
        return f"{self.path} opens and is writable", True

    @staticmethod
    def check_file(path: str | Path, *, full: bool = True) -> list[str]:
        """What SQLite's own check finds in the file at `path`, read-only and without opening it
        as a store (which a damaged file refuses); [] when sound."""
        return file_problems(Path(path), full=full)
