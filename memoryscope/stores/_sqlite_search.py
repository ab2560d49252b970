"""The three searches of `sqlite_memory_store` over one user, and loading their nodes.

Each returns `(row_id, score)` best first; the store turns them into scored nodes through
`_sqlite_nodes.NodeCache` (`load_nodes` is the same with one SQL query and nothing kept). The
dense list comes from the user's in-memory matrix (`_sqlite_cache`); the keyword list is FTS5's
BM25 ranking within the user's rowid range (`_sqlite_keyword`), computed from posting lists in
memory for a large user (`_sqlite_bm25`), its candidates then checked against the same filter
mask the dense half computed, so a hybrid search makes no per-row SQL lookups beyond loading
the nodes it returns.
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from memoryscope.memory import MemoryNode
from memoryscope.stores._sqlite_bm25 import MemoryWords
from memoryscope.stores._sqlite_cache import MatrixCache, UserMatrix, refresh
from memoryscope.stores._sqlite_connections import SqliteConnections
from memoryscope.stores._sqlite_keyword import KeywordIndex, first_kept
from memoryscope.stores._sqlite_metadata import metadata_row_ids_sql
from memoryscope.stores._sqlite_reindex import REINDEX_NOTICE_FROM
from memoryscope.stores._sqlite_schema import NODE_COLUMNS, decoded_nodes
from memoryscope.stores._sqlite_snapshot import SnapshotWriter
from memoryscope.stores.base import MemoryFilter
from memoryscope.stores.fusion import Fusion, fuse

__all__ = ["PARALLEL_FROM_ROWS", "Searcher", "load_nodes"]

_IDS_PARAM = "(SELECT j.value FROM json_each(?) AS j)"
_SELECT_BY_ROW_ID = (
    "SELECT row_id, " + ", ".join(f'"{name}"' for name in NODE_COLUMNS) + f" FROM memories WHERE row_id IN {_IDS_PARAM}"
)
# a hybrid search of a user with at least this many vectors runs its two halves on two threads
PARALLEL_FROM_ROWS = 5000
_OVERFETCH = 1.25  # keyword candidates fetched beyond what the filter's share should leave
_log = logging.getLogger(__name__)


class Searcher:
    """Dense, keyword and hybrid search over the matrices in `cache` and the index `words`.

    A hybrid search of a large user runs its keyword half on a helper thread while the calling
    thread scores the vectors: SQLite and numpy both release the GIL, so on two cores the search
    takes about as long as its slower half instead of both added up (at 100k memories ~7-9 ms of
    dense scores beside ~2-4 ms of keyword ranking, on the machine of `benchmarks/README.md` §2).
    Small users stay on one thread, where handing work over would cost more than it saves.
    """

    def __init__(
        self,
        cache: MatrixCache,
        words: KeywordIndex,
        connections: SqliteConnections,
        snapshots: SnapshotWriter | None = None,
        memory_words: MemoryWords | None = None,
    ) -> None:
        self._cache = cache
        self._words = words
        self._connections = connections
        self._snapshots = snapshots
        self._memory_words = memory_words
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    def close(self) -> None:
        if self._memory_words is not None:
            self._memory_words.close()
        if self._snapshots is not None:
            self._snapshots.wait()  # a snapshot under way is worth finishing: the next process starts from it
        with self._executor_lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None

    def leave_snapshots(self, written: Mapping[str, int], dimension: int) -> None:
        """Save a snapshot of each user of whom `written` counts many memories changed (more
        than a snapshot may lag behind, `far_behind`) and who has enough memories for one but
        none up to date (`SnapshotWriter.wanted`), loading its matrix if this process has not:
        for a store about to close, so the next process's first search reads one file instead
        of every row. `close` waits for them."""
        if self._snapshots is None:
            return
        connection = self._connections.connection()
        for user_name, count in sorted(written.items()):
            memories = self._snapshots.wanted(connection, user_name, dimension, written=count)
            if not memories:
                continue
            # seconds of work for a large user (loading the rows, writing the file): say so, as a re-index does
            say = _log.warning if memories >= REINDEX_NOTICE_FROM else _log.info
            say(
                "saving the vectors of user %r (%d memories) as one file before closing, so the next "
                "process's first search reads it instead of every row",
                user_name,
                memories,
            )
            matrix = self._cache.matrix(user_name)
            with matrix.lock:
                refresh(connection, matrix, user_name, self._snapshots)
                self._snapshots.submit(user_name, matrix)  # a no-op if `refresh` just did

    def wait_for_background(self) -> None:
        """Until the snapshots and posting lists being built on background threads are done."""
        if self._snapshots is not None:
            self._snapshots.wait()
        if self._memory_words is not None:
            self._memory_words.wait()

    def _ranked(
        self, connection: sqlite3.Connection, user_name: str, match: str, limit: int | None, user_rows: int
    ) -> list[tuple[int, float]]:
        """FTS5's BM25 ranking of `match` among the user's memories: computed from posting lists
        in memory for a large user (`_sqlite_bm25`, the same numbers), else by FTS5."""
        if self._memory_words is not None and user_rows >= self._memory_words.from_rows:
            slot = self._words.slot(connection, user_name)
            if slot is not None:
                found = self._memory_words.ranked(connection, user_name, slot, match, limit, user_rows)
                if found is not None:
                    return found
        return self._words.ranked(connection, user_name, match, limit)

    def _helper(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="memoryscope-keyword")
            return self._executor

    def dense(
        self, connection: sqlite3.Connection, memory_filter: MemoryFilter, query_vector: np.ndarray, top_k: int
    ) -> list[tuple[int, float]]:
        allowed = _allowed_row_ids(connection, memory_filter)
        matrix = self._cache.matrix(memory_filter.user_name)
        with matrix.lock:
            refresh(connection, matrix, memory_filter.user_name, self._snapshots)
            return matrix.nearest(query_vector, matrix.mask(memory_filter, allowed), top_k)

    def keyword(
        self, connection: sqlite3.Connection, memory_filter: MemoryFilter, query: str, top_k: int
    ) -> list[tuple[int, float]]:
        match = self._words.match(connection, memory_filter.user_name, query)
        if match is None:
            return []
        matrix = self._cache.loaded(memory_filter.user_name)
        if _only_user(memory_filter):
            return self._ranked(connection, memory_filter.user_name, match, top_k, matrix.size if matrix else 0)
        if matrix is None:  # not worth loading every vector of the user for one keyword search
            return self._words.ranked_filtered(connection, memory_filter, match, top_k)
        allowed = _allowed_row_ids(connection, memory_filter)
        with matrix.lock:
            refresh(connection, matrix, memory_filter.user_name, self._snapshots)
            mask = matrix.mask(memory_filter, allowed)
            checked = (mask, matrix.version, matrix.share(mask))
        return self._keyword_checked(connection, matrix, memory_filter, match, top_k, checked)

    def hybrid(
        self,
        connection: sqlite3.Connection,
        memory_filter: MemoryFilter,
        query: str | None,
        query_vector: np.ndarray,
        depth: int,
        keyword_weight: float,
        fusion: Fusion = "rrf",
    ) -> list[tuple[int, float]]:
        """Both lists `depth` deep, fused by `fusion` (the keyword list weighted)."""
        allowed = _allowed_row_ids(connection, memory_filter)
        matrix = self._cache.matrix(memory_filter.user_name)
        match = self._words.match(connection, memory_filter.user_name, query) if query else None
        pending: Future[list[tuple[int, float]]] | None = None
        with matrix.lock:
            refresh(connection, matrix, memory_filter.user_name, self._snapshots)
            mask = matrix.mask(memory_filter, allowed)
            checked = (mask, matrix.version, matrix.share(mask))
            if match is not None and matrix.size >= PARALLEL_FROM_ROWS:
                pending = self._helper().submit(self._keyword_on_helper, matrix, memory_filter, match, depth, checked)
            dense = matrix.nearest(query_vector, mask, depth)
        lists = [dense]
        weights = [1.0]
        if match is not None:
            if pending is not None:
                keyword = pending.result()
            else:
                keyword = self._keyword_checked(connection, matrix, memory_filter, match, depth, checked)
            lists.append(keyword)
            weights.append(keyword_weight)
        return fuse(fusion, lists, weights)

    def _keyword_on_helper(
        self,
        matrix: UserMatrix,
        memory_filter: MemoryFilter,
        match: str,
        limit: int,
        checked: tuple[np.ndarray | None, int, float],
    ) -> list[tuple[int, float]]:
        # the helper thread's own connection: a connection must not run two statements at once
        connection = self._connections.connection()
        return self._keyword_checked(connection, matrix, memory_filter, match, limit, checked)

    def _keyword_checked(
        self,
        connection: sqlite3.Connection,
        matrix: UserMatrix,
        memory_filter: MemoryFilter,
        match: str,
        limit: int,
        checked: tuple[np.ndarray | None, int, float],
    ) -> list[tuple[int, float]]:
        """The best `limit` keyword hits the filter keeps, checked against `mask`, which `matrix`
        made at `version` for this filter; `share` is how many rows it keeps. Over-fetches by the
        share, and fetches every candidate when that was not enough."""
        mask, version, share = checked
        user_name = memory_filter.user_name
        if mask is None:  # the filter keeps every row of the user: the rowid range is the filter
            return self._ranked(connection, user_name, match, limit, matrix.size)
        fetch: int | None = math.ceil(limit / max(share, 1e-3) * _OVERFETCH) + 16
        while True:
            hits = self._ranked(connection, user_name, match, fetch, matrix.size)
            with matrix.lock:
                kept = matrix.kept([row_id for row_id, _ in hits], mask) if matrix.version == version else None
            if kept is None:  # the matrix moved on meanwhile, or a row is new: let SQL check each row
                return self._words.ranked_filtered(connection, memory_filter, match, limit)
            best = first_kept(hits, kept, limit)
            if len(best) == limit or fetch is None or len(hits) < fetch:
                return best
            fetch = None  # the filter dropped more than its share: take every candidate


def load_nodes(connection: sqlite3.Connection, ranked: Sequence[tuple[int, float]]) -> list[MemoryNode]:
    """The nodes of `ranked` row ids in that order, each with its score; rows gone meanwhile are
    skipped, and so are damaged ones (with a warning naming them)."""
    if not ranked:
        return []
    rows: dict[int, Any] = {
        row[0]: row for row in connection.execute(_SELECT_BY_ROW_ID, (json.dumps([row_id for row_id, _ in ranked]),))
    }
    # built with their score at once: a node is immutable and copying it costs as much as building it
    return decoded_nodes((rows[row_id][1:], score) for row_id, score in ranked if row_id in rows)


def _only_user(memory_filter: MemoryFilter) -> bool:
    """True when the filter names the user and nothing else."""
    f = memory_filter
    return (
        f.target_name is None
        and f.workspace is None
        and f.memory_types is None
        and f.status is None
        and f.time_range is None
        and f.reflected is None
        and f.updated is None
        and f.memory_ids is None
        and not f.metadata
    )


def _allowed_row_ids(connection: sqlite3.Connection, memory_filter: MemoryFilter) -> list[int] | None:
    """The row ids of the user's memories the filter's `memory_ids` and `metadata` keep (the
    fields the in-memory arrays do not hold), or None when it sets neither."""
    if memory_filter.memory_ids is None and not memory_filter.metadata:
        return None
    selects, params = [], []
    if memory_filter.memory_ids is not None:
        selects.append(f"SELECT row_id FROM memories WHERE user_name = ? AND memory_id IN {_IDS_PARAM}")
        params += [memory_filter.user_name, json.dumps(list(memory_filter.memory_ids))]
    if memory_filter.metadata:  # from the index alone: the cost follows the matches, not the user's size
        select, select_params = metadata_row_ids_sql(memory_filter.user_name, memory_filter.metadata)
        selects.append(select)
        params += select_params
    return [row_id for (row_id,) in connection.execute(" INTERSECT ".join(selects), params)]
