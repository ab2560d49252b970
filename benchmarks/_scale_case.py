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
from benchmarks._synthetic import BASE_TIME, SyntheticText, synthetic_nodes, unit_vectors
from memoryscope.app import MemoryScope

__all__ = ["Case", "run_case"]

MEASURED_USER = "measured-user"
_BATCH = 2000
_WARMUP = 5


@dataclass(frozen=True)
class Case:
    label: str
    config: str
    users: tuple[tuple[str, int], ...]  # (user, memories); the first is the measured one
    queries: int = 200
    seed: int = 0


def run_case(case: Case) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memoryscope-scale-") as folder:
        database = Path(folder) / "memories.db"
        with MemoryScope(case.config, overrides={"memory_store.path": str(database)}) as scope:
            store = scope.store
            if store is None:
                raise SystemExit(f"config {case.config!r} has no memory_store")
            embedder: Any = store.embedding_model  # every shipped store keeps its model
            calls_before_fill = embedder.usage.calls
            insert_per_s = _fill(store, int(embedder.dimension), case)
            timing = _time_queries(scope, int(embedder.dimension), case)
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
    return result


def _fill(store: Any, dimension: int, case: Case) -> float:
    rng = np.random.default_rng(case.seed)
    text = SyntheticText(seed=case.seed)
    total = sum(count for _, count in case.users)
    progress = Progress(f"{case.label}: insert", total, "memories")
    spent = 0.0
    for user, count in case.users:
        for start in range(0, count, _BATCH):
            size = min(_BATCH, count - start)
            nodes = synthetic_nodes(user, text.sentences(size, rng), rng)
            vectors = unit_vectors(size, dimension, rng)
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
    vectors = unit_vectors(count, dimension, rng)
    query_time = BASE_TIME + timedelta(days=366)

    def retrieve(index: int) -> Any:
        return service.run_operation(
            "retrieve_memory", MEASURED_USER, query=texts[index], query_time=query_time, query_vector=vectors[index]
        )

    template = _recorded_searches(store, lambda: retrieve(0))
    for index in range(1, _WARMUP):
        retrieve(index)

    def bare(index: int) -> float:
        started = time.perf_counter()
        for memory_filter, options in template:
            store.search(memory_filter, query=texts[index], vector=vectors[index], **options)
        return time.perf_counter() - started

    calls_before = embedder.usage.calls
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
    by_mode = _time_by_mode(store, template, texts[_WARMUP:], vectors[_WARMUP:])
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
        "worker_ms_p50": {name: round(statistics.median(values) * 1000, 3) for name, values in workers.items()},
        "memories_returned_p50": statistics.median(returned) if returned else 0,
        "embedding_calls_during_timing": embedding_calls,
        "queries_timed": case.queries,
    }


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
