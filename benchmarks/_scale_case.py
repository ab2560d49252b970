"""One load case of `benchmarks.scale`, run in its own process so RSS and caches start clean.

Fill a fresh store (synthetic text, random unit vectors given to `upsert`: never embedded),
then time, for the same queries, interleaved so drift hits both alike:
- `retrieve_memory` through the service, with `query_vector=` precomputed (the query text is
  still there for keyword search and ranking), as a caller sees it;
- the bare store searches that one such call makes: recorded from a warm-up call (filter, mode,
  top_k exactly as the configured retrieve worker passes them) and replayed with each query.
The embedding model's call counter must not move while timing; the case fails if it does.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import Progress, disk_mb, percentiles_ms, rss_mb
from benchmarks._synthetic import BASE_TIME, SyntheticText, clustered_unit_vectors, synthetic_nodes, unit_vectors
from memoryscope.app import MemoryScope
from memoryscope.stores.base import MemoryFilter, SearchMode

__all__ = ["MEASURED_USER", "Case", "fill", "run_case", "users_of"]

MEASURED_USER = "measured-user"
_BATCH = 2000
_WARMUP = 5


BACKGROUND_USERS = 4  # the other users of a size's store, sharing `background` of its size


def users_of(size: int, background: float) -> tuple[tuple[str, int], ...]:
    """A size's store: the measured user's `size` memories, then `size * background` more spread
    over `BACKGROUND_USERS` other users."""
    users = [(MEASURED_USER, size)]
    each = int(size * background) // BACKGROUND_USERS
    users += [(f"other-{i}", each) for i in range(BACKGROUND_USERS) if each]
    return tuple(users)


@dataclass(frozen=True)
class Case:
    label: str
    config: str
    users: tuple[tuple[str, int], ...]  # (user, memories); the first is the measured one
    queries: int = 200
    seed: int = 0
    reindex: bool = False  # also time a keyword re-index of the whole file, chunk by chunk
    ann: str = "auto"  # sqlite's approximate vector index: "on" for every user, "off", "auto" (the config's)
    vectors: str = "random"  # "random" unit vectors, or "clustered" around topics as embeddings are

    def vectors_of(self, count: int, dimension: int, rng: np.random.Generator) -> np.ndarray:
        return (clustered_unit_vectors if self.vectors == "clustered" else unit_vectors)(count, dimension, rng)


_ANN_SETTING = {"on": 1, "off": 0}  # memory_store.ann_min_memories; "auto" leaves the config's
RECALL_QUERIES = 50
RECALL_DEPTH = 50


def run_case(case: Case) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memoryscope-scale-") as folder:
        database = Path(folder) / "memories.db"
        overrides: dict[str, Any] = {"memory_store.path": str(database)}
        if case.ann in _ANN_SETTING:
            overrides["memory_store.ann_min_memories"] = _ANN_SETTING[case.ann]
        with MemoryScope(case.config, overrides=overrides) as scope:
            store = scope.store
            if store is None:
                raise SystemExit(f"config {case.config!r} has no memory_store")
            embedder: Any = store.embedding_model  # every shipped store keeps its model
            calls_before_fill = embedder.usage.calls
            insert_per_s = fill(store, int(embedder.dimension), case)
            index_build = _index_build(store, int(embedder.dimension), case)
            timing = _time_queries(scope, int(embedder.dimension), case)
            if case.ann != "auto" or index_build is not None:
                timing["ann"] = {"setting": case.ann, "build": index_build, **_recall(store, int(embedder.dimension), case)}
            embedding_calls_during_fill = embedder.usage.calls - calls_before_fill
            result = {
                "memories_total": sum(count for _, count in case.users),
                "memories_of_user": case.users[0][1],
                "users": len(case.users),
                **timing,
                "insert_per_s": insert_per_s,
                "disk_mb": disk_mb(database),
                "rss_mb": rss_mb(),
                "rss_peak_mb": rss_mb(peak=True),
                "embedding_calls_during_fill": embedding_calls_during_fill,
            }
        result["cold_start"] = _cold_start(case, overrides, result["retrieve_ms"]["p95"])
        if case.reindex:
            result["keyword_reindex"] = _keyword_reindex(database)
    return result


def _index_build(store: Any, dimension: int, case: Case) -> dict[str, Any] | None:
    """For `sqlite_memory_store` with its approximate index on for the measured user: the time
    from the first dense search (which starts the build) until it is built, and the graph's size
    in memory; None when the user gets none."""
    cache = getattr(store, "_cache", None)
    if cache is None:
        return None
    rss_before = rss_mb()
    started = time.perf_counter()
    vector = case.vectors_of(1, dimension, np.random.default_rng(case.seed + 3))[0]
    store.search(MemoryFilter(MEASURED_USER), vector=vector, mode=SearchMode.DENSE, top_k=10)
    first_search = time.perf_counter() - started  # loads the user's matrix (the build starts after it)
    store._ann.wait()  # the index alone, not the matrix snapshot saved meanwhile
    seconds = time.perf_counter() - started
    graph = cache.matrix(MEASURED_USER).graph
    if graph is None:
        return None
    size = case.users[0][1]
    return {
        "first_search_s": round(first_search, 2),
        "build_s": round(seconds, 2),  # from the first search: loading the matrix, then building in the background
        "graph_mb": round(graph.memory_bytes() / 1e6, 1),
        "rss_growth_mb": round(rss_mb() - rss_before, 1),
        "build_s_per_million": round(seconds * 1e6 / size, 1),
        "graph_mb_per_million": round(graph.memory_bytes() / size, 1),
    }


def _recall(store: Any, dimension: int, case: Case) -> dict[str, Any]:
    """The share of the exact top `RECALL_DEPTH` dense hits (a second store on the same file with
    the index off) that the store under test returns in its own top `RECALL_DEPTH`, over
    `RECALL_QUERIES` queries drawn like the stored vectors."""
    if not hasattr(store, "path"):
        return {}
    from memoryscope.stores.sqlite_store import SqliteMemoryStore

    vectors = case.vectors_of(RECALL_QUERIES, dimension, np.random.default_rng(case.seed + 4))
    memory_filter = MemoryFilter(MEASURED_USER)
    shares = []
    with SqliteMemoryStore(path=store.path, embedding_model=store.embedding_model, ann_min_memories=0) as exact:
        for vector in vectors:
            want = {
                node.memory_id for node in exact.search(memory_filter, vector=vector, mode=SearchMode.DENSE, top_k=RECALL_DEPTH)
            }
            got = {
                node.memory_id for node in store.search(memory_filter, vector=vector, mode=SearchMode.DENSE, top_k=RECALL_DEPTH)
            }
            shares.append(len(want & got) / max(len(want), 1))
    return {"recall_at_50": round(float(np.mean(shares)), 4), "recall_at_50_min": round(float(np.min(shares)), 4)}


def _cold_start(case: Case, overrides: dict[str, str], warm_p95_ms: float) -> dict[str, Any]:
    """The first `retrieve_memory` after opening the filled file again (a new MemoryScope, so no
    in-process cache: what a new process pays, the OS file cache aside), and its ratio to the
    warm p95. Opening is timed apart: it checks the file, not the user's memories."""
    started = time.perf_counter()
    with MemoryScope(case.config, overrides=overrides) as scope:
        open_s = time.perf_counter() - started
        rng = np.random.default_rng(case.seed + 2)
        vector = case.vectors_of(1, int(scope.store.embedding_model.dimension), rng)[0]  # type: ignore[union-attr]
        text = SyntheticText(seed=case.seed).queries(1, rng)[0]
        times = []
        first_started = time.perf_counter()
        for _ in range(2):
            started = time.perf_counter()
            scope.default_service.run_operation(
                "retrieve_memory", MEASURED_USER, query=text, query_time=BASE_TIME + timedelta(days=366), query_vector=vector
            )
            times.append(time.perf_counter() - started)
        index = _index_after_reopening(scope.store, first_started)
    first_ms = round(times[0] * 1000, 3)
    return {
        "open_ms": round(open_s * 1000, 3),
        "first_retrieve_ms": first_ms,
        "second_retrieve_ms": round(times[1] * 1000, 3),
        "first_to_warm_p95": round(first_ms / warm_p95_ms, 2) if warm_p95_ms else None,
        **index,
    }


def _index_after_reopening(store: Any, first_started: float) -> dict[str, Any]:
    """When the measured user has an approximate index: seconds from the first retrieve until it
    is ready, and whether it was loaded from its saved file or built from the rows."""
    ann = getattr(store, "_ann", None)
    if ann is None:
        return {}
    ann.wait()
    matrix = store._cache.loaded(MEASURED_USER)
    if matrix is None or matrix.graph is None:
        return {}
    return {"index_ready_s": round(time.perf_counter() - first_started, 2), "index_source": matrix.graph_source}


def fill(store: Any, dimension: int, case: Case) -> float:
    """Insert the case's users' synthetic memories with random unit vectors (never embedded);
    the inserts per second."""
    rng = np.random.default_rng(case.seed)
    text = SyntheticText(seed=case.seed)
    total = sum(count for _, count in case.users)
    progress = Progress(f"{case.label}: insert", total, "memories")
    spent = 0.0
    for user, count in case.users:
        for start in range(0, count, _BATCH):
            size = min(_BATCH, count - start)
            nodes = synthetic_nodes(user, text.sentences(size, rng), rng)
            vectors = case.vectors_of(size, dimension, rng)
            started = time.perf_counter()
            store.upsert(nodes, vectors=vectors)
            spent += time.perf_counter() - started
            progress.advance(size)
    progress.close()
    return round(total / spent, 1) if spent > 0 else float("nan")


def _time_queries(scope: MemoryScope, dimension: int, case: Case) -> dict[str, Any]:
    service = scope.default_service
    store: Any = scope.store
    embedder = store.embedding_model
    rng = np.random.default_rng(case.seed + 1)
    count = case.queries + _WARMUP
    texts = SyntheticText(seed=case.seed).queries(count, rng)
    vectors = case.vectors_of(count, dimension, rng)
    query_time = BASE_TIME + timedelta(days=366)

    def retrieve(index: int) -> Any:
        return service.run_operation(
            "retrieve_memory", MEASURED_USER, query=texts[index], query_time=query_time, query_vector=vectors[index]
        )

    template = _recorded_searches(store, lambda: retrieve(0))
    for index in range(1, _WARMUP):
        retrieve(index)
    # steady state: what the first searches started on background threads (sqlite: keyword posting
    # lists, matrix snapshot) is done before timing; the cold start below measures the other end
    getattr(store, "wait_for_background", lambda: None)()
    retrieve(_WARMUP - 1)

    def bare(index: int) -> float:
        started = time.perf_counter()
        for memory_filter, options in template:
            store.search(memory_filter, query=texts[index], vector=vectors[index], **options)
        return time.perf_counter() - started

    calls_before = embedder.usage.calls
    load_before = _load_average()
    retrieve_s: list[float] = []
    search_s: list[float] = []
    workers: dict[str, list[float]] = {}
    returned: list[int] = []
    progress = Progress(f"{case.label}: queries", case.queries, "queries")
    for index in range(_WARMUP, count):
        if index % 2:
            search_s.append(bare(index))
        started = time.perf_counter()
        run = retrieve(index)
        retrieve_s.append(time.perf_counter() - started)
        if not index % 2:
            search_s.append(bare(index))
        returned.append(len(run.context.memories))
        for name, seconds in run.timings:
            workers.setdefault(name, []).append(seconds)
        progress.advance()
    progress.close()
    load_after = _load_average()
    by_mode = _time_by_mode(store, template, texts[_WARMUP:], vectors[_WARMUP:])
    stages = stage_profile(store, template, texts[_WARMUP:], vectors[_WARMUP:])
    same_as_fts = _same_as_fts5(store, template, texts[_WARMUP:], vectors[_WARMUP:])
    embedding_calls = embedder.usage.calls - calls_before
    if embedding_calls:
        raise SystemExit(f"{case.label}: the embedding model was called {embedding_calls} times while timing")
    search, whole = percentiles_ms(search_s), percentiles_ms(retrieve_s)
    return {
        "store_search_ms": search,
        "retrieve_ms": whole,
        "overhead_ratio": round(whole["p50"] / search["p50"], 3) if search["p50"] else None,
        "overhead_ratio_p95": round(whole["p95"] / search["p95"], 3) if search["p95"] else None,
        "store_searches_per_retrieve": [
            {"mode": str(getattr(options["mode"], "value", options["mode"])), "top_k": options["top_k"]}
            for _, options in template
        ],
        "store_search_by_mode_ms": by_mode,
        "store_search_stages_ms": stages,
        "same_as_fts5": same_as_fts,
        "worker_ms_p50": {name: round(statistics.median(values) * 1000, 3) for name, values in workers.items()},
        "memories_returned_p50": statistics.median(returned) if returned else 0,
        "embedding_calls_during_timing": embedding_calls,
        "queries_timed": case.queries,
        # the 1-minute load average as the timed queries began and ended (this process counts ~1)
        "load_average_1m": [load_before, load_after],
    }


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # not on every platform
        return None


def _recorded_searches(store: Any, call: Any) -> list[tuple[Any, dict[str, Any]]]:
    """The store searches (filter and options, without query and vector) that `call()` makes."""
    recorded: list[tuple[Any, dict[str, Any]]] = []
    original = store.search

    def recording(memory_filter: Any, **options: Any) -> Any:
        recorded.append((memory_filter, {k: v for k, v in options.items() if k not in ("query", "vector")}))
        return original(memory_filter, **options)

    store.search = recording  # instance attribute shadows the method for this one call
    try:
        call()
    finally:
        del store.search
    if not recorded:
        print("warning: retrieve_memory made no store search", file=sys.stderr)
    return recorded


def _time_by_mode(
    store: Any, template: list[tuple[Any, dict[str, Any]]], texts: list[str], vectors: np.ndarray
) -> dict[str, Any]:
    """The recorded searches again as dense only and as keyword only (same filter and top_k), to
    show which half of a hybrid search costs what. At most 50 queries: a breakdown, not a headline."""
    out: dict[str, Any] = {}
    for mode in ("dense", "keyword"):
        seconds = []
        for index in range(min(50, len(texts))):
            started = time.perf_counter()
            for memory_filter, options in template:
                store.search(memory_filter, query=texts[index], vector=vectors[index], **{**options, "mode": mode})
            seconds.append(time.perf_counter() - started)
        out[mode] = percentiles_ms(seconds)
    return out


def _keyword_reindex(database: Path) -> dict[str, Any]:
    """The keyword re-index an upgrade makes (the recorded version set to another one, then the
    same chunks an open runs): its whole time and its longest transaction, which is how long
    another writer can wait."""
    from memoryscope.stores._sqlite_connections import SqliteConnections
    from memoryscope.stores._sqlite_reindex import continue_keyword_reindex, start_keyword_reindex

    connections = SqliteConnections(database, busy_timeout_s=60.0)
    try:
        with connections.write_transaction() as connection:
            connection.execute("UPDATE store_meta SET value = 'older' WHERE key = 'keyword_index_version'")
            start_keyword_reindex(connection)
        started = time.perf_counter()
        report = continue_keyword_reindex(connections, database)
        total_s = time.perf_counter() - started
    finally:
        connections.close()
    return {
        "rows": report.rows,
        "chunks": report.chunks,
        "total_s": round(total_s, 2),
        "longest_transaction_s": round(report.longest_chunk_s, 3),
    }


def _same_as_fts5(
    store: Any, template: list[tuple[Any, dict[str, Any]]], texts: list[str], vectors: np.ndarray
) -> dict[str, Any]:
    """`sqlite_memory_store` ranks a large user's keyword search from posting lists in memory; the
    recorded searches (top_k as recorded, 120) again through a second store object on the same file
    that leaves every keyword search to FTS5: the share of queries whose ids come out the same, in
    the same order, and the mean share of ids in common. At most 50 queries; empty for other stores."""
    if not hasattr(store, "_searcher"):
        return {}
    options = {**store.params.model_dump(exclude={"embedding_model"}), "keyword_in_memory_from": 10**12}
    reference = type(store)(embedding_model=store.embedding_model, **options)  # the same knobs as the config's
    same, overlap = 0, []
    try:
        count = min(50, len(texts))
        for index in range(count):
            for memory_filter, options in template:
                ours = [n.memory_id for n in store.search(memory_filter, query=texts[index], vector=vectors[index], **options)]
                theirs = [
                    n.memory_id for n in reference.search(memory_filter, query=texts[index], vector=vectors[index], **options)
                ]
                same += ours == theirs
                overlap.append(len(set(ours) & set(theirs)) / max(len(theirs), 1))
    finally:
        reference.close()
    return {
        "searches": len(overlap),
        "identical_share": round(same / max(len(overlap), 1), 4),
        "mean_overlap": round(float(np.mean(overlap)), 4),
    }


def stage_profile(
    store: Any, template: list[tuple[Any, dict[str, Any]]], texts: list[str], vectors: np.ndarray
) -> dict[str, Any]:
    """Where a hybrid store search of `sqlite_memory_store` spends its time: the recorded searches
    replayed stage by stage through the store's own parts, one after the other (in a real search
    the dense and keyword halves of a large user overlap on two threads). At most 50 queries; ms
    p50/p95 of each stage. Empty for other stores."""
    from memoryscope.stores import _sqlite_search as search_module  # the parts of this one store
    from memoryscope.stores.fusion import reciprocal_rank_fusion

    searcher = getattr(store, "_searcher", None)
    if searcher is None:
        return {}
    stages: dict[str, list[float]] = {name: [] for name in ("filter_mask", "dense", "keyword", "fusion", "load_nodes")}
    connection = store._connections.connection()
    for index in range(min(50, len(texts))):
        spent = dict.fromkeys(stages, 0.0)
        for memory_filter, options in template:
            depth = max(options["top_k"], store.params.hybrid_candidates)
            clock = time.perf_counter()
            allowed = search_module._allowed_row_ids(connection, memory_filter)
            matrix = searcher._cache.matrix(memory_filter.user_name)
            with matrix.lock:
                search_module.refresh(connection, matrix, memory_filter.user_name)
                mask = matrix.mask(memory_filter, allowed)
                checked = (mask, matrix.version, matrix.share(mask))
            clock = _lap(spent, "filter_mask", clock)
            dense = matrix.nearest(vectors[index], mask, depth)
            clock = _lap(spent, "dense", clock)
            match = searcher._words.match(connection, memory_filter.user_name, texts[index])
            keyword = searcher._keyword_checked(connection, matrix, memory_filter, match, depth, checked) if match else []
            clock = _lap(spent, "keyword", clock)
            fused = reciprocal_rank_fusion(
                [[row_id for row_id, _ in dense], [row_id for row_id, _ in keyword]],
                weights=[1.0, store.params.hybrid_keyword_weight],
            )
            clock = _lap(spent, "fusion", clock)
            nodes = getattr(store, "_nodes", None)  # decoded nodes kept between searches, where the store has them
            load = nodes.load if nodes is not None else search_module.load_nodes
            load(connection, fused[: options["top_k"]])
            _lap(spent, "load_nodes", clock)
        for name, seconds in spent.items():
            stages[name].append(seconds)
    return {name: percentiles_ms(seconds) for name, seconds in stages.items()}


def _lap(spent: dict[str, float], stage: str, started: float) -> float:
    now = time.perf_counter()
    spent[stage] += now - started
    return now
