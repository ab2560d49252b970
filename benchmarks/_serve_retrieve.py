"""`retrieve_10k` of `benchmarks.serve_load`: retrieve through HTTP against in-process, same store, same queries.

One user holds `memories` memories (+25% spread over four other users, as `benchmarks.scale`),
written with random unit vectors before a 1-worker server starts on that store. Each query is
timed, interleaved (the order alternating, so drift hits all alike): through HTTP (POST /search,
one keep-alive connection, one request at a time; the server embeds the query with the hash
embedding, microseconds), in this process `retrieve_memory` with a precomputed `query_vector` (as
`benchmarks.scale`: the query is not embedded) and the library's `search()` (the route's own
call), GET /healthz (the HTTP floor), and two in-process pieces of the route: its user check
(`store.count`) and its answer's serialization.
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from fastapi.encoders import jsonable_encoder

from benchmarks._common import Progress
from benchmarks._hash_embedding import HashEmbedding
from benchmarks._serve_processes import Server, log_summary, percentiles, server_config
from benchmarks._synthetic import BASE_TIME, SyntheticText, synthetic_nodes, unit_vectors
from memoryscope.app import MemoryScope
from memoryscope.config import load_config
from memoryscope.stores.base import MemoryFilter

__all__ = ["fill_store", "retrieve_at_size", "MEASURED_USER", "TARGET_MS"]

MEASURED_USER = "measured-user"
TARGET_MS = 3.0  # HTTP p95 may exceed the in-process p95 by this much
_WARMUP_QUERIES = 5


def retrieve_at_size(config_name: str, folder: Path, size: int, queries_timed: int, seed: int, timeout: float) -> dict[str, Any]:
    """The timings described above, their p95 difference and whether it meets `TARGET_MS`."""
    config = server_config(config_name, folder, llm_url=None)
    text = fill_store(config, size, seed, "retrieve_10k: insert")
    count = queries_timed + _WARMUP_QUERIES
    queries = text.queries(count, np.random.default_rng(seed + 1))
    embedder = HashEmbedding()
    vectors = embedder.embed_queries(queries)  # what the server's hash embedding gives for the same texts
    query_time = BASE_TIME + timedelta(days=366)
    embed_s = [_timed(lambda q=q: embedder.embed_queries([q])) for q in queries]
    top_k = load_config(str(config)).settings.output_memory_max_count
    names = ("http", "in_process", "in_process_search_api", "http_healthz", "route_user_count", "route_serialize")
    timings: dict[str, list[float]] = {name: [] for name in names}
    returned: dict[str, list[int]] = {"http": [], "in_process": []}
    embedding_calls = 0
    with (
        Server(config, 1, folder) as server,
        httpx.Client(base_url=server.url, timeout=timeout) as client,
        MemoryScope(str(config)) as scope,
    ):
        service, model = scope.default_service, scope.store.embedding_model  # type: ignore[union-attr]  # the config has a store

        def in_process(i: int) -> None:
            nonlocal embedding_calls
            calls = model.usage.calls
            run = service.run_operation("retrieve_memory", MEASURED_USER, query=queries[i], query_time=query_time,
                                        query_vector=vectors[i])  # fmt: skip
            embedding_calls += model.usage.calls - calls  # must stay 0: the query is not embedded
            returned["in_process"].append(len(run.context.memories))

        last: list[Any] = []

        def search_api(i: int) -> None:
            last[:] = scope.search(queries[i], user_id=MEASURED_USER, top_k=top_k, query_time=query_time)

        def user_count(i: int) -> None:  # the route's check that the user exists (404 otherwise)
            scope.store.count(MemoryFilter(user_name=MEASURED_USER, target_name="", workspace=""))  # type: ignore[union-attr]

        def serialize(i: int) -> None:  # the route's answer: records as dicts, FastAPI's encoder, JSON
            json.dumps(jsonable_encoder({"memories": [record.to_dict() for record in last]})).encode()

        def http(i: int) -> None:
            body = {"query": queries[i], "top_k": top_k, "query_time": query_time.isoformat()}
            response = client.post(f"/v1/users/{MEASURED_USER}/search", json=body)
            response.raise_for_status()
            returned["http"].append(len(response.json()["memories"]))

        def healthz(i: int) -> None:
            client.get("/healthz").raise_for_status()

        steps = dict(zip(names, (http, in_process, search_api, healthz, user_count, serialize), strict=True))
        progress = Progress("retrieve_10k: queries", count, "queries")
        for i in range(count):
            order = list(steps) if i % 2 else [*reversed(names[:4]), *names[4:]]  # alternate who goes first: drift hits all alike
            for name in order:
                started = time.perf_counter()
                steps[name](i)
                if i >= _WARMUP_QUERIES:
                    timings[name].append(time.perf_counter() - started)
            progress.advance()
        progress.close()
    if embedding_calls:
        raise SystemExit(f"retrieve_10k: the in-process retrieve embedded {embedding_calls} queries; it must embed none")
    found = {name: percentiles(values) for name, values in timings.items()}
    difference = round(found["http"]["p95"] - found["in_process"]["p95"], 3)
    pieces = {"user_count": found.pop("route_user_count"), "serialize": found.pop("route_serialize")}
    return {
        "user_memories": size,
        "store_total": size + 4 * (size // 16),
        "queries_timed": queries_timed,
        "top_k": top_k,
        "http_ms": found["http"],
        "in_process_ms": found["in_process"],
        "in_process_search_api_ms": found["in_process_search_api"],
        "http_healthz_ms": found["http_healthz"],
        "query_embedding_ms": percentiles(embed_s),
        "route_pieces_ms": pieces,
        "memories_returned_p50": {name: float(np.median(values)) for name, values in returned.items()},
        "in_process_embedding_calls": embedding_calls,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "p95_difference_ms": difference,
        "p50_difference_ms": round(found["http"]["p50"] - found["in_process"]["p50"], 3),
        "target_ms": TARGET_MS,
        "meets_target": difference <= TARGET_MS,
        "server_log": log_summary(server.log_path),
        "how": "one user's memories (+25% over 4 other users) upserted with random unit vectors before a 1-worker "
        "server started on that store; per query, interleaved (order alternating): HTTP POST /search "
        "(one keep-alive connection, the server embeds the query with the hash embedding), in-process "
        "retrieve_memory with query_vector= (query embedding excluded, as benchmarks.scale), the library's "
        "search() (hash-embedded query, the route's own call), and GET /healthz (the HTTP floor); then, in "
        "process, two pieces of the route: its user check (store.count) and its answer's serialization "
        "(records, jsonable_encoder, json.dumps). Target: http p95 - in_process p95 <= 3 ms.",
    }


def _timed(call: Any) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def fill_store(config: Path, size: int, seed: int, label: str) -> SyntheticText:
    """`size` synthetic memories for `MEASURED_USER` and a sixteenth as many for each of four
    others, written straight to the store of `config` (hash-free random vectors); returns the
    text generator, to draw the queries from."""
    users = [(MEASURED_USER, size)] + [(f"other-{i}", size // 16) for i in range(4) if size // 16]
    rng = np.random.default_rng(seed)
    text = SyntheticText(seed=seed)
    with MemoryScope(str(config)) as scope:
        store: Any = scope.store
        progress = Progress(label, sum(count for _, count in users), "memories")
        for user, count in users:
            for start in range(0, count, 2000):
                batch = min(2000, count - start)
                store.upsert(synthetic_nodes(user, text.sentences(batch, rng), rng), vectors=unit_vectors(batch, 384, rng))
                progress.advance(batch)
        progress.close()
    return text
