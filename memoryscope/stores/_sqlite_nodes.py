"""Decoded nodes of `sqlite_memory_store` kept in memory between searches.

Turning a row into a `MemoryNode` (times, JSON, enums) costs ~7 µs; a retrieve loads ~120 nodes,
so ~1 ms of every search went into decoding the same popular rows again. Nodes are immutable,
so decoded ones are kept by `row_id` and handed out with each search's score (`with_score`).

Kept right across threads and processes by the same change log the matrices replay: before a
lookup, one query reads the log's head; rows changed since the cache's position are dropped
(all of them when the log was pruned past it). The head is read before the rows are fetched, so
a row changed meanwhile is dropped by the next lookup at the latest.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

from memoryscope.memory import MemoryNode
from memoryscope.stores._sqlite_schema import NODE_COLUMNS, decoded_nodes

__all__ = ["NodeCache"]

_IDS_PARAM = "(SELECT j.value FROM json_each(?) AS j)"
_SELECT_BY_ROW_ID = (
    "SELECT row_id, " + ", ".join(f'"{name}"' for name in NODE_COLUMNS) + f" FROM memories WHERE row_id IN {_IDS_PARAM}"
)
_LOG_POSITION_SQL = """
SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'memory_changes'), 0),
       (SELECT CAST(value AS INTEGER) FROM store_meta WHERE key = 'changes_pruned_through')
"""


class NodeCache:
    """Up to `max_nodes` decoded nodes by row id, as of change-log position `seq`."""

    def __init__(self, max_nodes: int) -> None:
        self._max_nodes = max_nodes
        self._nodes: dict[int, MemoryNode] = {}
        self._seq = -1
        self._lock = threading.Lock()

    def load(self, connection: sqlite3.Connection, ranked: Sequence[tuple[int, float]]) -> list[MemoryNode]:
        """The nodes of `ranked` row ids in that order, each with its score; rows gone meanwhile
        are skipped, and so are damaged ones (with a warning naming them)."""
        if not ranked:
            return []
        head, pruned_through = connection.execute(_LOG_POSITION_SQL).fetchone()
        self._catch_up(connection, head, pruned_through)
        with self._lock:  # taken out at once: another thread's catch-up may drop nodes meanwhile
            found = {row_id: node for row_id, _ in ranked if (node := self._nodes.get(row_id)) is not None}
        missing = [row_id for row_id, _ in ranked if row_id not in found]
        if missing:
            fetched = self._fetch(connection, missing)
            found.update(fetched)
            with self._lock:
                if self._seq == head:  # not moved meanwhile by another thread's catch-up
                    self._nodes.update(fetched)
                    self._trim()
        return [node.with_score(score) for row_id, score in ranked if (node := found.get(row_id)) is not None]

    def _catch_up(self, connection: sqlite3.Connection, head: int, pruned_through: int) -> None:
        """Drop the nodes of rows changed since the cache's position (all when the log lost them)."""
        with self._lock:
            seq = self._seq
        if seq == head:
            return
        changed: list[int] | None = None
        if 0 <= pruned_through <= seq:
            sql = "SELECT row_id FROM memory_changes WHERE seq > ? AND seq <= ?"
            changed = [row_id for (row_id,) in connection.execute(sql, (seq, head))]
        with self._lock:
            if self._seq != seq:  # another thread caught up first: start again from its position
                self._nodes, self._seq = {}, head
                return
            if changed is None:
                self._nodes = {}
            else:
                for row_id in changed:
                    self._nodes.pop(row_id, None)
            self._seq = head

    @staticmethod
    def _fetch(connection: sqlite3.Connection, row_ids: Sequence[int]) -> dict[int, MemoryNode]:
        rows: list[Any] = connection.execute(_SELECT_BY_ROW_ID, (json.dumps(list(row_ids)),)).fetchall()
        # damaged rows are left out (and named) by `decoded_nodes`: match the rest back to their ids
        sound = decoded_nodes((row[1:], None) for row in rows)
        by_memory_id = {row[1]: row[0] for row in rows}
        return {by_memory_id[node.memory_id]: node for node in sound}

    def _trim(self) -> None:
        """Past `max_nodes`, drop the oldest quarter (by insertion): cheaper than strict LRU."""
        excess = len(self._nodes) - self._max_nodes
        if excess > 0:
            for row_id in list(itertools.islice(self._nodes, excess + self._max_nodes // 4)):
                del self._nodes[row_id]

    def clear(self) -> None:
        with self._lock:
            self._nodes, self._seq = {}, -1
