"""Per-user in-memory matrices for dense search in `sqlite_memory_store`.

A search must not do per-row Python work, so each user's vectors sit in one float32 matrix
beside numpy columns of the fields filters look at; a filter becomes a boolean mask and the
search one matrix-vector product. Matrices are per user, so a small user in a huge store costs
what it would alone.

A matrix remembers the change-log position (`seq`) it reflects. Before a search, one indexed
lookup tells whether the user changed since (in this process or another); if so the matrix
replays just the changed rows, or reloads when the log was pruned past it or too much changed.
A large user's matrix is also saved beside the file as a packed snapshot (`_sqlite_snapshot`),
from which a new process starts instead of reading every row.

A damaged vector (wrong size, not a blob, not numbers: written by another program or a failing
disk) leaves its memory out of the matrix, with a warning naming it; the others stay searchable.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from memoryscope.memory import MemoryStatus
from memoryscope.stores._arrays import empty
from memoryscope.stores._sqlite_ann import AnnGraph, AnnSettings, fetch_count, inline_build
from memoryscope.stores._sqlite_schema import PRUNED_THROUGH_SQL, TIME_FIELDS, time_bounds
from memoryscope.stores._sqlite_snapshot import SnapshotWriter, far_behind
from memoryscope.stores.base import MemoryFilter

if TYPE_CHECKING:  # a type only: `_sqlite_ann_files` imports `_sqlite_snapshot`, as this module does
    from memoryscope.stores._sqlite_ann_files import GraphFiles

__all__ = ["VECTOR_ADVICE", "MatrixCache", "UserMatrix", "vector_damage"]

# How snapshots written before the type codes were kept with them numbered the types
_FORMER_TYPE_ORDER = (
    *("conversation", "observation", "obs_customized", "insight", "core_memory", "agent_state"),
    *("memoryos_page", "memoryos_segment", "memoryos_profile", "memoryos_knowledge"),
)
_STATUS_CODES = {status.value: code for code, status in enumerate(MemoryStatus)}

# the order of the cached columns in every row this module reads
_MATRIX_SELECT = """
SELECT m.row_id, m.target_name, m.workspace, m.memory_type, m.status,
       m.event_time, m.message_time, m.created_at, m.updated_at, m.reflected, m.updated, v.vector
FROM memories AS m JOIN memory_vectors AS v ON v.row_id = m.row_id
"""
_TIME_OFFSET = 5  # event_time is column 5; TIME_FIELDS follow in that order
_STALENESS_SQL = """
SELECT (SELECT max(seq) FROM memory_changes WHERE user_name = ?),
       (SELECT CAST(value AS INTEGER) FROM store_meta WHERE key = 'changes_pruned_through')
"""
_HEAD_SQL = "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'memory_changes'), 0)"
VECTOR_ADVICE = (
    "dense search leaves it out (keyword search still finds it); `memoryscope reembed --config ... --force` "
    "makes every vector again, `memoryscope doctor --config ...` lists every damaged memory"
)
_log = logging.getLogger(__name__)
_KEPT_MASKS = 8  # filters whose masks a matrix keeps between searches (a retrieve with time words makes three)

Damage = list[tuple[int, str]]  # (row_id, what is wrong with its vector) of rows left out


def vector_damage(blob: object, dimension: int) -> str | None:
    """What is wrong with a stored vector, or None when it is `dimension` finite float32 values."""
    if not isinstance(blob, bytes):
        return f"it holds {type(blob).__name__} {str(blob)[:40]!r}, not a blob of float32 values"
    if len(blob) != dimension * 4:
        return f"it has {len(blob)} bytes where a vector of dimension {dimension} has {dimension * 4}"
    if not np.isfinite(np.frombuffer(blob, dtype=np.float32)).all():
        return "it holds values that are not numbers (NaN or infinite)"
    return None


class UserMatrix:
    """One user's vectors and filterable fields; rows in no particular order (deletes swap in the last)."""

    row_ids: np.ndarray
    vectors: np.ndarray
    target: np.ndarray
    workspace: np.ndarray
    memory_type: np.ndarray
    status: np.ndarray
    times: dict[str, np.ndarray]
    reflected: np.ndarray
    updated: np.ndarray

    def __init__(self, dimension: int, ann: AnnSettings | None = None, user_name: str = "") -> None:
        self.dimension = dimension
        self.user_name = user_name  # whose rows: names the user's saved graph (`_sqlite_ann_files`)
        self.ann = ann  # when this matrix keeps an approximate index (`_sqlite_ann`); None: never
        self.graph: AnnGraph | None = None  # the approximate index of the rows, once built
        self.graph_source = ""  # how the graph came: "built" from the rows, or "loaded" from its saved file
        self._graph_pending: list[int] | None = None  # rows changed while a graph is being built
        self._generation = 0  # bumped when the rows are replaced wholesale: a graph being built is dropped
        self.lock = threading.Lock()  # held while refreshing or reading, so a search sees one state
        self.seq = -1  # change-log position reflected; -1 = never loaded
        self.version = 0  # bumped by every change of the rows, so a mask can be matched to its rows
        self._masks: dict[MemoryFilter, np.ndarray | None] = {}  # the last filters' masks, at `_masks_version`
        self._masks_version = -1
        self.size = 0
        self._positions: dict[int, int] | None = {}  # row id -> row; None: to be made from `row_ids`
        self._target_codes: dict[str, int] = {}
        self._workspace_codes: dict[str, int] = {}
        self._type_codes: dict[str, int] = {}
        self._allocate(0)

    def _allocate(self, capacity: int, populate: bool = False, vectors: np.ndarray | None = None) -> None:
        """Fresh arrays for `capacity` rows, on plain pages (see `_arrays`); `populate` when
        they are about to be filled (nearly) whole. `vectors`: those given instead (see `reset`)."""
        self.row_ids = empty(capacity, np.int64, populate=populate)
        self.vectors = vectors if vectors is not None else empty((capacity, self.dimension), np.float32, populate=populate)
        self.target = empty(capacity, np.int32, populate=populate)
        self.workspace = empty(capacity, np.int32, populate=populate)
        self.memory_type = empty(capacity, np.int8, populate=populate)
        self.status = empty(capacity, np.int8, populate=populate)
        self.times = {name: empty(capacity, np.float64, populate=populate) for name in TIME_FIELDS}
        self.reflected = empty(capacity, bool, populate=populate)
        self.updated = empty(capacity, bool, populate=populate)

    @property
    def _position(self) -> dict[int, int]:
        """Row id -> row. After a snapshot it is made at first need (the caller holds `lock`):
        100k entries take ~15 ms, which a first search without a filter does not need."""
        if self._positions is None:
            size = self.size
            self._positions = dict(zip(self.row_ids[:size].tolist(), range(size), strict=True))
        return self._positions

    def _arrays(self) -> list[np.ndarray]:
        columns = [self.row_ids, self.vectors, self.target, self.workspace, self.memory_type, self.status]
        return [*columns, *self.times.values(), self.reflected, self.updated]

    def _grow(self, needed: int) -> None:
        capacity = len(self.row_ids)
        if needed <= len(self.vectors):  # the vectors may have less room than the other columns (see `reset`)
            return
        if needed <= capacity:  # only the vectors are short: off the snapshot's pages, into room of their own
            vectors = empty((capacity, self.dimension), np.float32)
            vectors[: self.size] = self.vectors[: self.size]
            self.vectors = vectors
            return
        old = self._arrays()
        self._allocate(max(needed, capacity * 2, 64))
        for old_array, new_array in zip(old, self._arrays(), strict=True):
            new_array[: self.size] = old_array[: self.size]

    def reset(self, capacity: int, vectors: np.ndarray | None = None) -> None:
        """Forget every row and make room for `capacity` of them: for a reload, which fills
        nearly all of that room at once (its callers leave an eighth to grow into). `vectors`:
        the rows' vectors as they are (a snapshot's mapped pages, `_sqlite_snapshot`), with no
        room beyond them; the first row added moves them into an array of `capacity` rows."""
        self.version += 1
        self._drop_graph()
        self.size = 0
        self.seq = -1
        self._positions = {}
        self._target_codes.clear()
        self._workspace_codes.clear()
        self._type_codes.clear()
        self._allocate(capacity, populate=True, vectors=vectors)

    def code_names(self) -> tuple[list[str], list[str], list[str]]:
        """The target, workspace and memory type names in the order of their codes (for a snapshot)."""
        return list(self._target_codes), list(self._workspace_codes), list(self._type_codes)

    def restored(
        self,
        size: int,
        target_names: Sequence[str],
        workspace_names: Sequence[str],
        seq: int,
        type_names: Sequence[str] = _FORMER_TYPE_ORDER,
    ) -> None:
        """After a snapshot filled the first `size` rows of the arrays (`_sqlite_snapshot`):
        take them as the matrix at change-log position `seq`."""
        self.version += 1
        self._drop_graph()
        self.size = size
        self.seq = seq
        self._positions = None  # made at first need (`_position`)
        self._target_codes = {name: code for code, name in enumerate(target_names)}
        self._workspace_codes = {name: code for code, name in enumerate(workspace_names)}
        self._type_codes = {name: code for code, name in enumerate(type_names)}

    def append(self, rows: Sequence[Sequence[Any]]) -> Damage:
        """Add rows (as selected by `_MATRIX_SELECT`) that are not in the matrix yet; returns those
        left out for a damaged vector."""
        rows, vectors, damage = self._sound(rows)
        self._add(rows, vectors)
        return damage

    def _add(self, rows: Sequence[Sequence[Any]], vectors: np.ndarray) -> None:
        if not rows:
            return
        self._grow(self.size + len(rows))
        positions = np.arange(self.size, self.size + len(rows))
        self._write(positions, rows, vectors)
        for position, row in zip(positions.tolist(), rows, strict=True):
            self._position[row[0]] = position
        self.size += len(rows)

    def apply(self, changed_row_ids: Sequence[int], rows: Sequence[Sequence[Any]]) -> Damage:
        """Catch up with the log: `rows` are the changed rows that still belong to this user."""
        rows, vectors, damage = self._sound(rows)
        present = {row[0] for row in rows}
        for row_id in changed_row_ids:
            if row_id not in present and row_id in self._position:
                self._remove(row_id)
        known = [index for index, row in enumerate(rows) if row[0] in self._position]
        if known:
            self._write(np.array([self._position[rows[index][0]] for index in known]), [rows[i] for i in known], vectors[known])
        new = [index for index, row in enumerate(rows) if row[0] not in self._position]
        self._add([rows[index] for index in new], vectors[new])
        return damage

    def _sound(self, rows: Sequence[Sequence[Any]]) -> tuple[list[Sequence[Any]], np.ndarray, Damage]:
        """The rows with a sound vector, their vectors as a matrix, and the others' damage."""
        size = self.dimension * 4
        blobs = [row[11] for row in rows]
        damage: Damage = []
        if not all(type(blob) is bytes for blob in blobs) or {len(blob) for blob in blobs} - {size}:
            damage = [(row[0], found) for row in rows if (found := vector_damage(row[11], self.dimension))]
            left_out = {row_id for row_id, _ in damage}
            rows = [row for row in rows if row[0] not in left_out]
            blobs = [row[11] for row in rows]
        vectors = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(rows), self.dimension)
        finite = np.asarray(np.isfinite(vectors).all(axis=1))
        if not finite.all():
            damage += [(row[0], "it holds values that are not numbers (NaN or infinite)") for row in _where(rows, ~finite)]
            rows = _where(rows, finite)
            vectors = vectors[finite]
        return list(rows), vectors, damage

    def _remove(self, row_id: int) -> None:
        self.version += 1
        position = self._position.pop(row_id)
        last = self.size - 1
        if position != last:
            for array in self._arrays():
                array[position] = array[last]
            self._position[int(self.row_ids[position])] = position
            if self._graph_pending is not None:  # a build copying rows in order may have passed `position`
                self._graph_pending.append(int(self.row_ids[position]))
        self.size = last
        if self.graph is not None:
            self.graph.remove(row_id)
        if self._graph_pending is not None:
            self._graph_pending.append(row_id)

    def _write(self, positions: np.ndarray, rows: Sequence[Sequence[Any]], vectors: np.ndarray) -> None:
        self.version += 1
        columns = list(zip(*rows, strict=True))
        self.row_ids[positions] = columns[0]
        self.vectors[positions] = vectors
        self.target[positions] = [self._target_codes.setdefault(name, len(self._target_codes)) for name in columns[1]]
        self.workspace[positions] = [self._workspace_codes.setdefault(name, len(self._workspace_codes)) for name in columns[2]]
        self.memory_type[positions] = [self._type_codes.setdefault(kind, len(self._type_codes)) for kind in columns[3]]
        self.status[positions] = [_STATUS_CODES.get(status, -1) for status in columns[4]]
        for offset, name in enumerate(TIME_FIELDS):
            # None becomes NaN, which fails every comparison: NULL times never match a range
            self.times[name][positions] = _times(columns[_TIME_OFFSET + offset])
        self.reflected[positions] = columns[9]
        self.updated[positions] = columns[10]
        if self.graph is not None:
            self.graph.put(self.row_ids[positions], vectors)
        if self._graph_pending is not None:
            self._graph_pending.extend(self.row_ids[positions].tolist())

    # ---- the approximate index --------------------------------------------------------------

    def _drop_graph(self) -> None:
        self.graph = None
        self._graph_pending = None
        self._generation += 1

    def _ensure_graph(self) -> None:
        """Start building the graph when this matrix wants one and has none (the caller holds
        `lock`): here for a small matrix, else on a background thread (exact search meanwhile)."""
        if self.ann is None or self.graph is not None or self._graph_pending is not None or not self.ann.wanted(self.size):
            return
        self._graph_pending = []
        inline = inline_build(self.size)
        generation = self._generation
        self.ann.start(id(self), lambda: self._build_or_give_up(generation, inline), inline)

    def _build_or_give_up(self, generation: int, inline: bool) -> None:
        try:
            self._build_graph(generation, inline)
        except Exception as error:  # no usearch, or a broken one: exact search answers, as below the threshold
            with _held(self.lock, not inline):
                if self._generation == generation:
                    self._graph_pending = None
                    assert self.ann is not None
                    self.ann.failed(self.dimension, error)

    def _build_graph(self, generation: int, inline: bool) -> None:
        """Load the user's saved graph, or copy the rows into a new one a chunk at a time
        (holding `lock` only to copy one, unless `inline`: then the caller holds it); then,
        under `lock`, put in the rows changed meanwhile and take the graph, unless the rows were
        replaced wholesale since. A graph built here on the background thread is saved first."""
        files = None if inline or self.ann is None else self.ann.files
        graph = None
        if files is not None:
            try:
                graph = self._saved_graph(files, generation)
            except Exception as error:  # a saved graph only spares a build: build one from the rows
                _log.warning("could not load the saved approximate index of user %r (%s); building it", self.user_name, error)
        built = graph is None
        if graph is None:
            graph = AnnGraph(self.dimension)
            if not self._copy_rows_into(graph, generation, inline):
                return
        with _held(self.lock, not inline):
            if self._generation != generation:
                return
            self._catch_up(graph)
            if not built or files is None or graph.removed or len(graph) != self.size:
                self._take(graph)
                return
            seq = self.seq  # the graph holds exactly the rows of this position; changes from now on wait in pending
            self._graph_pending = []
        try:
            files.save(self.user_name, graph, seq, self.dimension)
        except Exception as error:  # saving only spares the next process a build: this one goes on
            _log.warning(
                "could not save the approximate index of user %r (%s); the next process builds it again", self.user_name, error
            )
        with _held(self.lock, not inline):
            if self._generation == generation:
                self._catch_up(graph)
                self._take(graph)

    def _copy_rows_into(self, graph: AnnGraph, generation: int, inline: bool) -> bool:
        """Copy every row into `graph`, a chunk at a time; False when the build should stop."""
        start = 0
        chunk = 2048  # the lock is taken once a chunk, and a closing store waits for at most one
        while True:
            with _held(self.lock, not inline):
                if self._generation != generation:
                    return False  # the rows were replaced: a later search builds from them
                if self.ann is not None and self.ann.closing:
                    self._graph_pending = None
                    return False
                row_ids = self.row_ids[start : min(start + chunk, self.size)].copy()
                vectors = self.vectors[start : start + len(row_ids)].copy()
            if len(row_ids) == 0:
                return True
            graph.put(row_ids, vectors)
            start += len(row_ids)

    def _saved_graph(self, files: GraphFiles, generation: int) -> AnnGraph | None:
        """The user's saved graph, with the rows the log names between its position and this
        matrix's queued to be put again (`_catch_up`); None when there is none worth catching up."""
        loaded = files.load(self.user_name, self.dimension)
        if loaded is None:
            return None
        graph, saved_seq = loaded
        with self.lock:
            seq = self.seq
        changed = files.changed_between(self.user_name, saved_seq, seq)
        if changed is None or far_behind(len(changed), self.size):
            return None  # built anew from the rows (and saved)
        with self.lock:
            if self._generation != generation or self._graph_pending is None:
                return None
            self._graph_pending.extend(changed)
        return graph

    def _catch_up(self, graph: AnnGraph) -> None:
        """Put into `graph` the rows changed while it was made (the caller holds `lock`)."""
        pending = sorted(set(self._graph_pending or ()))
        present = [row_id for row_id in pending if row_id in self._position]
        for row_id in set(pending) - set(present):
            graph.remove(row_id)
        if present:
            graph.put(np.array(present, dtype=np.int64), self.vectors[[self._position[row_id] for row_id in present]])
        self._graph_pending = []

    def _take(self, graph: AnnGraph) -> None:
        if len(graph) != self.size:  # a loaded graph that does not hold exactly the rows: built anew next time
            _log.warning(
                "the approximate index of user %r holds %d vectors for %d rows; it is built again",
                self.user_name,
                len(graph),
                self.size,
            )
            self._graph_pending = None
            if self.ann is not None and self.ann.files is not None:
                self.ann.files.forget([self.user_name])
            return
        self.graph = graph
        self.graph_source = "loaded" if graph.loaded else "built"
        self._graph_pending = None

    def _approximate(self, query: np.ndarray, mask: np.ndarray | None, top_k: int) -> list[tuple[int, float]] | None:
        """`nearest` through the graph: candidates from it, kept by `mask`, scored exactly; None
        when exact search should answer (no graph yet, a filter keeping few rows, too few survivors)."""
        if self.ann is None or not self.ann.wanted(self.size):
            return None
        self._ensure_graph()
        graph = self.graph
        kept = self.size if mask is None else int(np.count_nonzero(mask))
        if graph is None or kept == 0 or top_k <= 0:
            return None
        count = min(fetch_count(top_k, kept / self.size), self.size)
        if kept < min(self.ann.min_rows, 16 * count):
            return None  # scoring the few rows the filter keeps is as cheap as walking the graph
        positions = np.fromiter(
            (self._position.get(row_id, -1) for row_id in graph.candidates(query, count).tolist()), dtype=np.int64
        )
        positions = positions[positions >= 0]
        if mask is not None:
            positions = positions[mask[positions]]
        if positions.size < min(top_k, kept):
            return None  # the filter dropped more than the over-fetch allowed for
        scores = _cosines(self.vectors[positions], query)
        best = np.argsort(-scores, kind="stable")[:top_k]
        return list(zip(self.row_ids[positions[best]].tolist(), scores[best].tolist(), strict=True))

    def mask(self, memory_filter: MemoryFilter, allowed_row_ids: Sequence[int] | None) -> np.ndarray | None:
        """Rows the filter keeps (the user is implied), or None when it keeps them all. Read-only:
        the masks of the last few filters without `allowed_row_ids` are kept until the rows change
        (~1 ms a search at 1M memories for the retrieve worker's type and status filter)."""
        if allowed_row_ids is not None:
            return self._mask(memory_filter, allowed_row_ids)
        if self._masks_version != self.version:
            self._masks.clear()
            self._masks_version = self.version
        try:
            return self._masks[memory_filter]
        except KeyError:
            pass
        except TypeError:  # a filter holding an unhashable value: made each time
            return self._mask(memory_filter, None)
        mask = self._mask(memory_filter, None)
        if mask is not None:
            mask.flags.writeable = False
        if len(self._masks) >= _KEPT_MASKS:
            self._masks.pop(next(iter(self._masks)))
        self._masks[memory_filter] = mask
        return mask

    def _mask(self, memory_filter: MemoryFilter, allowed_row_ids: Sequence[int] | None) -> np.ndarray | None:
        size = self.size
        conditions: list[np.ndarray] = []
        if memory_filter.target_name is not None:
            conditions.append(self.target[:size] == self._target_codes.get(memory_filter.target_name, -1))
        if memory_filter.workspace is not None:
            conditions.append(self.workspace[:size] == self._workspace_codes.get(memory_filter.workspace, -1))
        if memory_filter.memory_types is not None:
            codes = sorted({self._type_codes.get(str(kind), -1) for kind in memory_filter.memory_types})
            conditions.append(_one_of(self.memory_type[:size], codes))
        if memory_filter.status is not None:
            conditions.append(self.status[:size] == _STATUS_CODES[MemoryStatus(memory_filter.status).value])
        if memory_filter.time_range is not None:
            values = self.times[memory_filter.time_range.field][:size]
            start, end = time_bounds(memory_filter.time_range)
            conditions.append((values >= start) & (values < end))
        if memory_filter.reflected is not None:
            conditions.append(self.reflected[:size] == memory_filter.reflected)
        if memory_filter.updated is not None:
            conditions.append(self.updated[:size] == memory_filter.updated)
        if allowed_row_ids is not None:
            conditions.append(np.isin(self.row_ids[:size], np.asarray(allowed_row_ids, dtype=np.int64)))
        if not conditions:
            return None
        combined = conditions[0]
        for condition in conditions[1:]:
            combined = combined & condition
        return combined

    def kept(self, row_ids: Sequence[int], mask: np.ndarray | None) -> list[bool] | None:
        """Whether `mask` (made by `mask` at the current `version`) keeps each row; None when a row
        is not in the matrix (written after the last refresh, or without a vector)."""
        position = self._position
        try:
            positions = [position[row_id] for row_id in row_ids]
        except KeyError:
            return None
        if mask is None:
            return [True] * len(positions)
        return list(mask[positions].tolist())

    def share(self, mask: np.ndarray | None) -> float:
        """The share of rows `mask` keeps (1 when it keeps them all)."""
        if mask is None or self.size == 0:
            return 1.0
        return float(np.count_nonzero(mask)) / self.size

    def nearest(self, query: np.ndarray, mask: np.ndarray | None, top_k: int) -> list[tuple[int, float]]:
        """`(row_id, cosine)` of the `top_k` rows most like the unit vector `query`, best first."""
        size = self.size
        if mask is not None and mask.all():
            mask = None  # the common filter keeps every row: skip gathering them
        approximate = self._approximate(query, mask, top_k)
        if approximate is not None:
            return approximate
        if mask is None:
            candidates = None
            scores = _cosines(self.vectors[:size], query)
        else:
            candidates = np.flatnonzero(mask)
            # few rows pass the filter: gathering them is cheaper than scoring every row
            few = candidates.size * 4 < size
            scores = _cosines(self.vectors[candidates], query) if few else _cosines(self.vectors[:size], query)[candidates]
        count = min(top_k, scores.size)
        if count == 0:
            return []
        best = np.argpartition(-scores, count - 1)[:count] if count < scores.size else np.arange(scores.size)
        best = best[np.argsort(-scores[best], kind="stable")]
        positions = best if candidates is None else candidates[best]
        return list(zip(self.row_ids[positions].tolist(), scores[best].tolist(), strict=True))


@contextmanager
def _held(lock: threading.Lock, take: bool) -> Iterator[None]:
    if not take:
        yield
        return
    with lock:
        yield


def _where(rows: Sequence[Sequence[Any]], keep: np.ndarray) -> list[Sequence[Any]]:
    return [row for row, kept in zip(rows, keep.tolist(), strict=True) if kept]


def _times(values: Sequence[Any]) -> np.ndarray:
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        # text from another program: NaN here (matches no range); reading the node leaves it out, named
        return np.array([value if type(value) in (int, float) else None for value in values], dtype=np.float64)


def _one_of(codes: np.ndarray, wanted: Sequence[int]) -> np.ndarray:
    """`np.isin(codes, wanted)` for a few wanted codes: one comparison each is ~50x faster."""
    if not wanted:
        return np.zeros(codes.shape, dtype=bool)
    combined = codes == wanted[0]
    for code in wanted[1:]:
        combined |= codes == code
    return combined


def _cosines(unit_rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    # One dot product a row on the calling thread (`vecdot`, numpy 2): at 10k x 384 0.28-0.31 ms,
    # against 0.58-0.63 for einsum's loop. Not `@`: BLAS hands a matrix-vector product to its
    # thread pool (0.15-0.18 ms idle), and on a busy machine waking those threads costs more than
    # the product (with two busy processes, p95 12 ms against 4.4 ms for `vecdot`).
    return np.vecdot(unit_rows, query)


def refresh(connection: sqlite3.Connection, matrix: UserMatrix, user_name: str, snapshots: SnapshotWriter | None = None) -> None:
    """Bring `matrix` up to date with the database; the caller holds `matrix.lock`. With
    `snapshots`, a matrix never loaded starts from the user's snapshot if there is one, and a
    large user's matrix loaded row by row (or caught up after a delete dropped its snapshot) is
    saved as one."""
    user_last, pruned_through = connection.execute(_STALENESS_SQL, (user_name,)).fetchone()
    if matrix.seq >= 0 and matrix.seq >= pruned_through and (user_last or 0) <= matrix.seq:
        return  # the hot path: nothing changed for this user
    # one read transaction, so the rows and the log position come from the same snapshot
    connection.execute("BEGIN")
    try:
        head = connection.execute(_HEAD_SQL).fetchone()[0]
        pruned_through = connection.execute(PRUNED_THROUGH_SQL).fetchone()[0]
        from_snapshot = matrix.seq < 0 and snapshots is not None and snapshots.read(connection, matrix, user_name, pruned_through)
        changed = None
        if 0 <= pruned_through <= matrix.seq:
            sql = "SELECT DISTINCT row_id FROM memory_changes WHERE user_name = ? AND seq > ?"
            changed = [row_id for (row_id,) in connection.execute(sql, (user_name, matrix.seq))]
        reloaded = changed is None or len(changed) > max(1024, matrix.size // 4)
        if changed is None or reloaded:
            damage = _reload(connection, matrix, user_name)
        else:
            # `+` keeps SQLite from walking the user's index: the changed row ids are the few rows to read
            sql = _MATRIX_SELECT + "WHERE m.row_id IN (SELECT j.value FROM json_each(?) AS j) AND +m.user_name = ?"
            damage = matrix.apply(changed, connection.execute(sql, (json.dumps(changed), user_name)).fetchall())
        matrix.seq = head
        if damage:
            _warn(connection, damage)
    finally:
        connection.execute("COMMIT")
    if snapshots is None or matrix.size < snapshots.from_rows:
        return
    # a snapshot far behind costs a long replay on every start: save a newer one too; and one a
    # delete dropped (a deleted memory must not live on in it) is saved again from this matrix
    stale = from_snapshot and changed is not None and far_behind(len(changed), matrix.size)
    dropped = bool(changed) and not reloaded and not snapshots.exists(connection, user_name)
    if reloaded or stale or dropped:
        snapshots.submit(user_name, matrix)  # copied out on its thread, a chunk at a time


def _warn(connection: sqlite3.Connection, damage: Damage) -> None:
    """One warning for each memory left out of the matrix, by its id."""
    sql = "SELECT row_id, memory_id FROM memories WHERE row_id IN (SELECT j.value FROM json_each(?) AS j)"
    memory_ids = dict(connection.execute(sql, (json.dumps([row_id for row_id, _ in damage]),)).fetchall())
    for row_id, found in damage:
        _log.warning("memory %r: its stored vector is damaged (%s); %s", memory_ids.get(row_id, row_id), found, VECTOR_ADVICE)


def _reload(connection: sqlite3.Connection, matrix: UserMatrix, user_name: str) -> Damage:
    count = connection.execute("SELECT count(*) FROM memories WHERE user_name = ?", (user_name,)).fetchone()[0]
    matrix.reset(count + count // 8)  # room to grow before the next copy
    cursor = connection.execute(_MATRIX_SELECT + "WHERE m.user_name = ?", (user_name,))
    damage: Damage = []
    try:
        # in chunks: a whole user's vector blobs at once would briefly double the memory they need
        while rows := cursor.fetchmany(4096):
            damage += matrix.append(rows)
    finally:
        cursor.close()
    return damage


class MatrixCache:
    """The matrices of the most recently searched users (least recently used dropped first)."""

    def __init__(self, dimension: Callable[[], int], max_users: int, ann: AnnSettings | None = None) -> None:
        """`dimension`: the store's vector size, asked when a first matrix is made (a dense
        search has its query vector by then, so the size is known without a model call).
        `ann`: when a matrix keeps an approximate index (`_sqlite_ann`)."""
        self._dimension = dimension
        self.ann = ann
        self._max_users = max_users
        self._matrices: OrderedDict[str, UserMatrix] = OrderedDict()
        self._lock = threading.Lock()

    def matrix(self, user_name: str) -> UserMatrix:
        with self._lock:
            matrix = self._matrices.get(user_name)
            if matrix is None:
                matrix = self._matrices[user_name] = UserMatrix(self._dimension(), self.ann, user_name)
                while len(self._matrices) > self._max_users:
                    self._matrices.popitem(last=False)
            else:
                self._matrices.move_to_end(user_name)
            return matrix

    def loaded(self, user_name: str) -> UserMatrix | None:
        """The user's matrix if it was ever loaded, without making room for one."""
        with self._lock:
            matrix = self._matrices.get(user_name)
        return matrix if matrix is not None and matrix.seq >= 0 else None

    def clear(self) -> None:
        with self._lock:
            self._matrices.clear()
