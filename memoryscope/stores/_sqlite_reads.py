"""The read side of `sqlite_memory_store`: get, scan, count, walk and search (a mixin of
`SqliteMemoryStore`, which owns the connections, the caches and the writes)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from memoryscope.errors import StoreError
from memoryscope.memory import MemoryNode
from memoryscope.models.base import EmbeddingModel
from memoryscope.stores._sqlite_connections import SqliteConnections
from memoryscope.stores._sqlite_nodes import NodeCache
from memoryscope.stores._sqlite_schema import NODE_COLUMNS, decoded_nodes, filter_sql, validate_filter
from memoryscope.stores._sqlite_search import Searcher
from memoryscope.stores.base import MemoryFilter, SearchMode

__all__ = ["SqliteReads"]

_SELECT_NODES = "SELECT " + ", ".join(f'"{name}"' for name in NODE_COLUMNS) + " FROM memories"
_IDS_PARAM = "(SELECT j.value FROM json_each(?) AS j)"


class SqliteReads:
    """Reading memories from the file; the store provides what is declared here."""

    _connections: SqliteConnections
    _searcher: Searcher
    _nodes: NodeCache
    embedding_model: EmbeddingModel
    params: Any

    def _require_current_model(self, action: str) -> None:
        raise NotImplementedError

    def _unit_rows(self, vectors: Any, count: int, what: str) -> np.ndarray:
        raise NotImplementedError

    # ---- reading ------------------------------------------------------------------------------

    def get(self, memory_ids: Sequence[str]) -> list[MemoryNode]:
        if not memory_ids:
            return []
        with self._connections.errors():
            rows = (
                self._connections.connection()
                .execute(_SELECT_NODES + f" WHERE memory_id IN {_IDS_PARAM}", (json.dumps(list(memory_ids)),))
                .fetchall()
            )
        found = {node.memory_id: node for node in decoded_nodes((row, None) for row in rows)}
        return [found[memory_id] for memory_id in memory_ids if memory_id in found]

    def scan(
        self, memory_filter: MemoryFilter, *, limit: int = 100, offset: int = 0, newest_first: bool = True
    ) -> list[MemoryNode]:
        validate_filter(memory_filter)
        if limit < 0 or offset < 0:
            raise StoreError(f"scan: limit and offset must not be negative, got limit={limit}, offset={offset}")
        where, params = filter_sql(memory_filter)
        direction = "DESC" if newest_first else "ASC"
        sql = f"{_SELECT_NODES} WHERE {where} ORDER BY created_at {direction}, memory_id {direction} LIMIT ? OFFSET ?"
        with self._connections.errors():
            rows = self._connections.connection().execute(sql, [*params, limit, offset]).fetchall()
        return decoded_nodes((row, None) for row in rows)

    def count(self, memory_filter: MemoryFilter) -> int:
        validate_filter(memory_filter)
        where, params = filter_sql(memory_filter)
        with self._connections.errors():
            return int(
                self._connections.connection().execute(f"SELECT count(*) FROM memories WHERE {where}", params).fetchone()[0]
            )

    # ---- the whole store ----------------------------------------------------------------------

    def iter_all(
        self, batch_size: int = 500, *, user_name: str | None = None, after_id: str | None = None
    ) -> Iterator[list[MemoryNode]]:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise StoreError(f"iter_all: batch_size must be a positive integer, got {batch_size!r}")
        last = after_id
        while True:
            clauses, params = ["1"], []
            if user_name is not None:
                clauses.append("user_name = ?")
                params.append(user_name)
            if last is not None:
                clauses.append("memory_id > ?")
                params.append(last)
            sql = f"{_SELECT_NODES} WHERE {' AND '.join(clauses)} ORDER BY memory_id LIMIT ?"
            with self._connections.errors():
                rows = self._connections.connection().execute(sql, [*params, batch_size]).fetchall()
            if rows:
                yield decoded_nodes((row, None) for row in rows)
            if len(rows) < batch_size:
                return
            last = rows[-1][0]

    def user_counts(self) -> dict[str, int]:
        with self._connections.errors():
            rows = self._connections.connection().execute("SELECT user_name, count(*) FROM memories GROUP BY user_name")
            return {str(user): int(count) for user, count in rows.fetchall()}

    def get_vectors(self, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not memory_ids:
            return {}
        sql = (
            "SELECT m.memory_id, v.vector FROM memories AS m JOIN memory_vectors AS v ON v.row_id = m.row_id "
            f"WHERE m.memory_id IN {_IDS_PARAM}"
        )
        with self._connections.errors():
            rows = self._connections.connection().execute(sql, (json.dumps(list(memory_ids)),)).fetchall()
        return {memory_id: np.frombuffer(blob, dtype=np.float32).copy() for memory_id, blob in rows}

    def search(
        self,
        memory_filter: MemoryFilter,
        *,
        query: str | None = None,
        vector: np.ndarray | None = None,
        mode: SearchMode = SearchMode.HYBRID,
        top_k: int = 10,
    ) -> list[MemoryNode]:
        """Dense scores are cosines, keyword scores BM25 (higher is better), hybrid scores fused (`hybrid_fusion`).

        Hybrid without a query (only `vector`) is dense ranking with fused scores.
        """
        validate_filter(memory_filter)
        self._require_current_model("search")
        try:
            mode = SearchMode(mode)
        except ValueError:
            raise StoreError(f"unknown search mode {mode!r}; use one of {', '.join(m.value for m in SearchMode)}") from None
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise StoreError(f"search: top_k must be a positive integer, got {top_k!r}")
        if mode is SearchMode.KEYWORD and not query:
            raise StoreError("keyword search needs a query text")
        if query is None and vector is None:
            raise StoreError(f"{mode.value} search needs a query text or a query vector")
        with self._connections.errors():
            connection = self._connections.connection()
            if mode is SearchMode.KEYWORD:
                ranked = self._searcher.keyword(connection, memory_filter, query or "", top_k)
            else:
                query_vector = self._query_vector(query, vector)
                if mode is SearchMode.DENSE:
                    ranked = self._searcher.dense(connection, memory_filter, query_vector, top_k)
                else:
                    depth = max(top_k, self.params.hybrid_candidates)
                    params = self.params
                    fused = self._searcher.hybrid(
                        connection, memory_filter, query, query_vector, depth, params.hybrid_keyword_weight, params.hybrid_fusion
                    )
                    ranked = fused[:top_k]
            return self._nodes.load(connection, ranked)

    def _query_vector(self, query: str | None, vector: np.ndarray | None) -> np.ndarray:
        if vector is not None:
            return self._unit_rows(vector, 1, "search vector")[0]
        return self._unit_rows(self.embedding_model.embed_queries([query or ""]), 1, "embedding model output")[0]
