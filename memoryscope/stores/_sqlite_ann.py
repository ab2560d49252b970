"""An approximate nearest-neighbour index (HNSW, `usearch`) beside a large user's matrix.

Exact dense search reads every row of a user's matrix (`_sqlite_cache`): ~7-9 ms at 100k
memories, ~70-90 ms at a million. Past `ann_min_memories` a user's matrix also keeps an HNSW
graph of its vectors; a search asks the graph for a few times more candidates than it needs,
keeps those the filter keeps (the same boolean mask exact search uses, so type, time, status,
metadata and id filters apply exactly), scores them exactly from the float32 matrix and returns
the best. When too few candidates survive the filter it falls back to exact search, and a
filter that keeps few rows goes exact from the start (scoring those few rows is cheap).

Why `usearch`: of the three packages with wheels for Linux, macOS and Windows (`pip download
--no-deps --only-binary=:all:`), `hnswlib` ships only a source archive (0.8.0, 2023: a C++
compiler at install); `faiss-cpu` has wheels (~27 MB on Linux) but its HNSW cannot remove a
vector (a delete or re-embedding means a rebuild) and its keys need an `IndexIDMap` around it;
`usearch` (~0.5 MB wheels) takes our 64-bit row ids as keys, removes and re-adds single vectors,
quantizes to int8 (a quarter of the float32 size: exact re-scoring from the matrix makes up for
the rounding) and builds on several threads.

Kept current with the matrix, under its lock: every row the matrix writes (a new memory, a new
vector) is put into the graph, every row it drops is removed from it. A reload of the matrix
(many changes at once, another process's re-embedding) drops the graph, and the next search
builds a new one. The graph is built from the matrix (itself from the store, or its snapshot)
on the first search of a user past the threshold, on a background thread for a large user
(~30 s per 100k memories of dimension 384 on one thread, matrix load included; ~1.2 GB per
million in memory), exact search answering meanwhile. One built on the background thread is
saved beside the store file, and the next process loads it and catches it up with the change
log (`_sqlite_ann_files`, which also says why a saved one is never stale, damaged or holding a
deleted memory's vector when used).
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # a type only: `_sqlite_ann_files` imports this module
    from memoryscope.stores._sqlite_ann_files import GraphFiles

__all__ = ["ANN_PROBLEM", "AnnGraph", "AnnSettings", "ann_problems", "graph_settings"]

_log = logging.getLogger(__name__)

# Graph edges per node and candidates weighed while inserting: at 1M clustered vectors (1,000
# topics) usearch's defaults (16, 128→64 here) left some queries stranded in another topic (recall
# of the top 50: 0.91 mean, 0.02 worst); 32 and 128 gave 0.998, worst 0.98, for ~2x the build time
_CONNECTIVITY = 32
_EXPANSION_ADD = 128
# the least candidates weighed while searching (twice the candidates fetched when more): with the
# graph above 256 is as good as 1024 at 1M (p95 1.2 ms against 2.0)
_EXPANSION_SEARCH = 256
_OVERFETCH = 2.0  # candidates asked of the graph per result wanted, before the filter's share
_INLINE_BUILD_ROWS = 4096  # smaller graphs are built by the search that needs them (milliseconds)
ANN_PROBLEM = (
    "the `usearch` package is missing or broken: dense search is exact for every user (slower past "
    "ann_min_memories); `pip install usearch`"
)


class AnnSettings:
    """When a user's matrix gets a graph: `min_rows` memories or more (0: never)."""

    def __init__(self, min_rows: int, files: GraphFiles | None = None) -> None:
        self.min_rows = min_rows
        self.files = files  # where graphs built on the background thread are saved and loaded from; None: nowhere
        self._broken = False
        self.closing = False  # set by `close`: a build under way stops at its next chunk
        self._building: set[int] = set()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)

    def wanted(self, size: int) -> bool:
        return self.min_rows > 0 and size >= self.min_rows and not self._broken

    def failed(self, dimension: int, error: Exception) -> None:
        """A graph could not be built: say why once, and search exactly from now on."""
        self._broken = True
        _log.warning("%s (%s: %s); dimension %d", ANN_PROBLEM, type(error).__name__, error, dimension)

    def start(self, key: int, build: Callable[[], None], inline: bool) -> None:
        """Run `build` here when `inline`, else on a daemon thread (once per `key` at a time)."""
        if inline:
            build()
            return
        with self._lock:
            if key in self._building or self.closing:
                return
            self._building.add(key)

        def run() -> None:
            try:
                build()  # it catches its own errors (`UserMatrix._build_or_give_up`)
            finally:
                with self._lock:
                    self._building.discard(key)
                    self._idle.notify_all()

        threading.Thread(target=run, name="memoryscope-ann-build", daemon=True).start()

    def wait(self) -> None:
        """Until no graph is being built."""
        with self._lock:
            self._idle.wait_for(lambda: not self._building)

    def close(self) -> None:
        """Stop the builds under way (each at its next chunk, a fraction of a second) and wait
        for them: a native build thread must not outlive the store (nor the interpreter)."""
        self.closing = True
        self.wait()


def _index(dimension: int) -> Any:
    from usearch.index import Index  # imported when first needed: a store that never uses it never loads it

    return Index(
        ndim=dimension,
        metric="ip",  # the vectors are unit rows: the inner product is the cosine
        dtype="i8",
        connectivity=_CONNECTIVITY,
        expansion_add=_EXPANSION_ADD,
        expansion_search=_EXPANSION_SEARCH,
    )


def _threads() -> int:
    """Threads for adding vectors: all cores but one (at most 4), so searches keep a core while
    a graph is built beside them (on two cores: one thread)."""
    return max(1, min(4, (os.cpu_count() or 2) - 1))


def graph_settings() -> dict[str, Any]:
    """What a saved graph must have been built with to be loaded (`_sqlite_ann_files`)."""
    from usearch import __version__  # imported when first needed, as `_index` does

    return {"connectivity": _CONNECTIVITY, "expansion_add": _EXPANSION_ADD, "dtype": "i8", "metric": "ip", "usearch": __version__}


class AnnGraph:
    """The HNSW graph of one user's vectors, keyed by row id. Not thread-safe: the matrix's lock guards it."""

    def __init__(self, dimension: int) -> None:
        self._index = _index(dimension)
        # rows removed since it was made: usearch keeps a removed vector's slot, so a graph with
        # any may hold a deleted memory's vector and is not saved (`_sqlite_ann_files`)
        self.removed = 0
        self.loaded = False  # True when read from a saved file rather than built from rows

    def __len__(self) -> int:
        return len(self._index)

    def put(self, row_ids: np.ndarray, vectors: np.ndarray) -> None:
        """Add these rows, replacing the vectors of those already in."""
        if len(row_ids) == 0:
            return
        keys = np.ascontiguousarray(row_ids, dtype=np.uint64)
        present = np.asarray(self._index.contains(keys), dtype=bool).reshape(-1)
        if present.any():
            self._index.remove(keys[present])
        self._index.add(keys, np.ascontiguousarray(vectors, dtype=np.float32), threads=_threads())

    def remove(self, row_id: int) -> None:
        self._index.remove(int(row_id))
        self.removed += 1

    def save(self, path: os.PathLike[str]) -> None:
        self._index.save(os.fspath(path))

    def load(self, path: os.PathLike[str]) -> None:
        """Replace this graph with the one saved at `path` (read whole into memory)."""
        self._index.load(os.fspath(path))
        self._index.expansion_search = _EXPANSION_SEARCH
        self.loaded = True

    def candidates(self, query: np.ndarray, count: int) -> np.ndarray:
        """The row ids of about the `count` rows nearest `query`, as int64."""
        self._index.expansion_search = max(_EXPANSION_SEARCH, 2 * count)
        found = self._index.search(np.ascontiguousarray(query, dtype=np.float32), count)
        return np.asarray(found.keys, dtype=np.int64).reshape(-1)

    def memory_bytes(self) -> int:
        return int(self._index.memory_usage)


def fetch_count(top_k: int, share: float) -> int:
    """How many candidates to ask the graph for, to keep `top_k` after a filter keeping `share` of the rows."""
    return math.ceil(top_k * _OVERFETCH / max(share, 1e-6)) + 16


def inline_build(size: int) -> bool:
    return size < _INLINE_BUILD_ROWS


def ann_problems(dimension: int | None) -> list[str]:
    """What stops the approximate index from working here: [] when `usearch` builds and searches a small graph."""
    size = dimension or 8
    try:
        graph = AnnGraph(size)
        vectors = np.eye(3, size, dtype=np.float32)
        graph.put(np.array([7, 8, 9]), vectors)
        found = graph.candidates(vectors[1], 1).tolist()
    except Exception as error:  # ImportError, or a broken build of the package
        return [f"{ANN_PROBLEM} ({type(error).__name__}: {error})"]
    if found != [8]:
        return [f"{ANN_PROBLEM} (a 3-vector test graph returned {found} for the second vector)"]
    return []
