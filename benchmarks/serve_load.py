"""Serving under load: a real `memoryscope serve` (1 uvicorn worker, then 2) and 50 concurrent clients.

    python -m benchmarks.serve_load --out FILE.json [--config NAME|PATH] [--workers 1 2] [--users 200]
        [--clients 50] [--requests 3000] [--max-seconds 180] [--retrieve-memories 10000] [--quick]

Load, per worker count: a fresh temporary SQLite store holds `--seed-memories` memories of each
of `--users` users, written straight into the store before the server starts; every memory of
user `user-0042` carries the token `zorblax-0042`. The server (`python -m memoryscope.cli serve
--workers W`, a subprocess) embeds with `_hash_embedding.HashEmbedding` (microseconds a text, so
embedding cost stays out of the way) and chats through the fake OpenAI-compatible server (another
subprocess). `--clients` asyncio tasks (httpx, keep-alive) send `--requests` requests, stopping
early after `--max-seconds`, each to a random user: store messages (POST /v1/users/{u}/messages),
retrieve (POST /v1/users/{u}/search) or chat (POST /v1/chat/completions with `user`). Errors are
non-2xx answers and exceptions (timeouts, resets); a response counts as cross-user when its text
names another user's token (`user-NNNN` or `zorblax-NNNN`): search results, chat memories,
stored records. Reported: requests/s, p50/p95/p99 per endpoint as the client sees it, errors,
cross-user responses, the CPU seconds of server, client and fake LLM, the server log's warnings.

Retrieve at size (`retrieve_10k`): one user holds `--retrieve-memories` memories (+25% spread over
four other users, as `benchmarks.scale`), written with random unit vectors before a 1-worker
server starts on that store. The same queries, interleaved one by one, are timed through HTTP
(POST /search, top_k = output_memory_max_count, one keep-alive connection, one request at a time)
and in this process on the same store file: `retrieve_memory` with a precomputed `query_vector`
(as `benchmarks.scale`: the query is not embedded), and the library's `search()` (the exact call
the route makes). The server embeds the query with the hash embedding; that cost is measured too
(`query_embedding_ms`), and so are GET /healthz (the HTTP floor) and two in-process pieces of the
route (`route_pieces_ms`: its user check, its answer's serialization). Target: HTTP p95 minus
in-process p95 <= 3 ms, reported met or not.

Consolidation runs in the server's background as configured (`--no-scheduler` turns it off): the
fake LLM's one canned reply is unreadable to it, so each run costs two LLM calls (one repair) and
leaves the messages pending with a back-off; the server log counts those warnings.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks._common import Progress, machine, print_table, run_stamp, write_json
from benchmarks._hash_embedding import HashEmbedding
from benchmarks._serve_processes import (
    HASH_CLASS,
    FakeLLM,
    Server,
    code_version,
    cpu_seconds,
    log_summary,
    percentiles,
    server_config,
)
from benchmarks._serve_retrieve import retrieve_at_size
from benchmarks._synthetic import SyntheticText, synthetic_nodes
from memoryscope.app import MemoryScope

__all__ = ["main"]

ENDPOINTS = ("store", "search", "chat")
_TOKEN = re.compile(r"\b(?:user|zorblax)-(\d{4})\b")
_QUICK = {"users": 6, "clients": 4, "requests": 60, "warmup": 6, "seed_memories": 3, "retrieve_memories": 300,
          "retrieve_queries": 20, "workers": [1]}  # fmt: skip
_NO_LLM = {"model.generation_model.api_base": ""}  # for this process's own MemoryScope: it never chats


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.quick:  # new defaults; options given on the command line still win
        parser.set_defaults(**_QUICK)
        args = parser.parse_args(argv)
    mix = dict(zip(ENDPOINTS, args.mix, strict=True))
    result: dict[str, Any] = {
        "config": args.config,
        "embedding": f"{HASH_CLASS} (384-d, seeded by a hash of the text; microseconds a text)",
        "llm": "fake OpenAI-compatible server (python -m memoryscope.testing.fake_openai), a subprocess",
        "client": f"{args.clients} asyncio tasks, httpx.AsyncClient (keep-alive, idle connections kept "
        f"{args.keepalive_expiry:g}s), in this process",
        "users": args.users,
        "clients": args.clients,
        "requests": args.requests,
        "max_seconds": args.max_seconds,
        "mix": mix,
        "seed_memories_per_user": args.seed_memories,
        "how": "per worker count: a fresh store, the server and its clients as described in the module docstring; "
        "requests_per_s = timed requests / wall time from the first timed request to the last answer; latency "
        "percentiles of 2xx answers as the client saw them (queueing included); cpu_seconds over the timed part",
        "scheduler": not args.no_scheduler,
        "runs": {},
    }
    with tempfile.TemporaryDirectory(prefix="memoryscope-serve-load-") as scratch, FakeLLM(Path(scratch)) as llm:
        for workers in args.workers:
            folder = Path(scratch) / f"load-{workers}"
            folder.mkdir()
            result["runs"][str(workers)] = _load_run(args, workers, mix, folder, llm.base_url)
        if args.retrieve_memories:
            folder = Path(scratch) / "retrieve"
            folder.mkdir()
            result["retrieve_10k"] = retrieve_at_size(
                args.config, folder, args.retrieve_memories, args.retrieve_queries, args.seed, args.timeout
            )
        result["fake_llm_cpu_s"] = cpu_seconds(llm.process.pid)
    result["date"] = run_stamp()
    result["code"] = code_version()
    result["machine"] = machine()
    write_json(args.out, result)
    _print_summary(result)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve_load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="where to write the JSON result")
    parser.add_argument("--config", default="default", help="config name or YAML path the server config extends")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="uvicorn worker counts to measure, in turn")
    parser.add_argument("--users", type=int, default=200, help="users the clients spread over")
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients")
    parser.add_argument("--requests", type=int, default=3000, help="timed requests per worker count")
    parser.add_argument("--max-seconds", type=float, default=180.0, help="stop a load run after this many seconds")
    parser.add_argument("--mix", type=float, nargs=3, default=[0.3, 0.5, 0.2], metavar=("STORE", "SEARCH", "CHAT"), help="shares")
    parser.add_argument("--warmup", type=int, default=100, help="untimed requests before each load run")
    parser.add_argument("--seed-memories", type=int, default=10, help="memories of each user written before the server starts")
    parser.add_argument("--retrieve-memories", type=int, default=10_000, help="one user's memories in retrieve_10k; 0 skips")
    parser.add_argument("--retrieve-queries", type=int, default=200, help="timed queries in retrieve_10k (after 5 warm-up)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a client waits for one answer")
    parser.add_argument(
        "--keepalive-expiry", type=float, default=5.0, help="seconds a client keeps an idle connection (httpx's default, 5)"
    )
    parser.add_argument("--no-scheduler", action="store_true", help="no background consolidation in the load runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="tiny defaults (smoke tests): 6 users, 4 clients, 1 worker")
    return parser


# -- the load runs -----------------------------------------------------------------------------------


def _load_run(args: argparse.Namespace, workers: int, mix: dict[str, float], folder: Path, llm_url: str) -> dict[str, Any]:
    config = server_config(args.config, folder, llm_url, scheduler=not args.no_scheduler)
    users = [f"user-{i:04d}" for i in range(args.users)]
    _seed_users(config, users, args.seed_memories, args.seed)
    rng = np.random.default_rng(args.seed + workers)
    shares = np.asarray([mix[name] for name in ENDPOINTS], dtype=np.float64)
    count = args.warmup + args.requests
    kinds, whose = rng.choice(len(ENDPOINTS), size=count, p=shares / shares.sum()), rng.integers(0, len(users), size=count)
    plan = [(ENDPOINTS[kind], users[user]) for kind, user in zip(kinds, whose, strict=True)]
    load_before = os.getloadavg()[0]
    with Server(config, workers, folder) as server:
        cpu: dict[str, float] = {}

        def snapshot(prefix: str) -> None:
            cpu[f"{prefix}server"], cpu[f"{prefix}client"] = cpu_seconds(server.process.pid), time.process_time()

        answers, wall_s, stopped_by = asyncio.run(_drive(server.url, plan, args, on_timed_start=lambda: snapshot("start_")))
        snapshot("end_")
    run = _summarize(answers, wall_s)
    run.update(workers=workers, stopped_by=stopped_by, warmup_requests=args.warmup)
    run["cpu_seconds"] = {  # during the timed part; 2 cores give at most 2 s of CPU per wall second
        "server": round(cpu["end_server"] - cpu["start_server"], 2),
        "client": round(cpu["end_client"] - cpu["start_client"], 2),
        "wall": round(wall_s, 2),
    }
    run["load_average_1min"] = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}
    run["server_exit_code"], run["server_stop_s"] = server.exit_code, server.stop_s
    run["server_log"] = log_summary(server.log_path)
    return run


async def _drive(
    url: str, plan: list[tuple[str, str]], args: argparse.Namespace, on_timed_start: Any
) -> tuple[list[_Answer], float, str]:
    """Send `plan` ((endpoint, user) pairs) with `args.clients` tasks. Returns the answers to all but
    the first `args.warmup` requests (untimed), the timed part's wall time, and why it stopped."""
    limits = httpx.Limits(
        max_connections=args.clients, max_keepalive_connections=args.clients, keepalive_expiry=args.keepalive_expiry
    )
    answers: list[_Answer | None] = [None] * len(plan)
    taken = itertools.count()
    progress = Progress(f"{args.clients} clients", len(plan), "requests")
    deadline = float("inf")
    stopped_by = "requests"
    started = 0.0

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=args.timeout) as client:

        async def one_client() -> None:
            nonlocal deadline, stopped_by, started
            while True:
                index = next(taken)
                if index >= len(plan):
                    return
                if index == args.warmup:  # the timed part starts when its first request is taken
                    on_timed_start()
                    started = time.perf_counter()
                    deadline = started + args.max_seconds
                if time.perf_counter() > deadline:
                    stopped_by = "time"
                    return
                answers[index] = await _request(client, *plan[index], index)
                progress.advance()

        await asyncio.gather(*(one_client() for _ in range(args.clients)))
    progress.close()
    wall_s = time.perf_counter() - started if started else 0.0
    return [answer for answer in answers[args.warmup :] if answer is not None], wall_s, stopped_by


@dataclass(frozen=True)
class _Answer:
    endpoint: str
    seconds: float
    error: str | None = None  # "HTTP 500", "ReadTimeout", ...; None for a 2xx answer
    detail: str = ""  # the error's message or the start of the error body
    foreign: bool = False  # the answer names another user's token
    own: bool = False  # the answer holds the user's own token


async def _request(client: httpx.AsyncClient, endpoint: str, user: str, index: int) -> _Answer:
    number = user.split("-")[1]
    body: dict[str, Any]
    if endpoint == "store":
        said = [
            {"role": "user", "content": f"{user} mentions zorblax-{number} again, note {index}"},
            {"role": "assistant", "content": f"Noted: zorblax-{number}."},
        ]
        path, body = f"/v1/users/{user}/messages", {"messages": said}
    elif endpoint == "search":
        path, body = f"/v1/users/{user}/search", {"query": f"what does {user} like about zorblax?", "top_k": 10}
    else:
        ask = [{"role": "user", "content": f"what do I like about zorblax? ({index})"}]
        path, body = "/v1/chat/completions", {"model": "memoryscope", "user": user, "messages": ask}
    started = time.perf_counter()
    try:
        response = await client.post(path, json=body)
        text = response.text
    except Exception as error:  # a load test counts every failure, whatever its kind
        return _Answer(endpoint, time.perf_counter() - started, type(error).__name__, str(error)[:200])
    seconds = time.perf_counter() - started
    foreign = any(found != number for found in _TOKEN.findall(text))
    if not 200 <= response.status_code < 300:
        return _Answer(endpoint, seconds, f"HTTP {response.status_code}", text[:200], foreign)
    return _Answer(endpoint, seconds, foreign=foreign, own=f"zorblax-{number}" in text)


def _summarize(answers: list[_Answer], wall_s: float) -> dict[str, Any]:
    failed = [answer for answer in answers if answer.error]
    endpoints: dict[str, Any] = {}
    for name in ENDPOINTS:
        mine = [answer for answer in answers if answer.endpoint == name]
        endpoints[name] = {
            "requests": len(mine),
            "errors": sum(answer.error is not None for answer in mine),
            "latency_ms": percentiles([answer.seconds for answer in mine if answer.error is None]),
            "requests_per_s": round(len(mine) / wall_s, 1) if wall_s else None,
            "answers_with_own_memories": sum(answer.own for answer in mine),
        }
    return {
        "requests_timed": len(answers),
        "requests_per_s": round(len(answers) / wall_s, 1) if wall_s else None,
        "errors": len(failed),
        "errors_by_kind": dict(Counter(f"{answer.endpoint}: {answer.error}" for answer in failed)),
        "error_samples": [
            {
                "endpoint": answer.endpoint,
                "error": answer.error,
                "detail": answer.detail,
                "after_ms": round(answer.seconds * 1000, 1),
            }
            for answer in failed[:10]
        ],
        "cross_user_responses": sum(answer.foreign for answer in answers),
        "endpoints": endpoints,
    }


# -- pieces ----------------------------------------------------------------------------------------------


def _seed_users(config: Path, users: list[str], per_user: int, seed: int) -> None:
    """`per_user` memories of each user, straight into the store: every one names the user's token."""
    rng = np.random.default_rng(seed)
    text = SyntheticText(seed=seed)
    embedder = HashEmbedding()
    with MemoryScope(str(config), overrides=_NO_LLM) as scope:  # only the store is used
        store: Any = scope.store
        for user in users:
            token = f"zorblax-{user.split('-')[1]}"
            texts = [f"{user} likes {token}"] + [f"{sentence} {token}" for sentence in text.sentences(per_user - 1, rng)]
            store.upsert(synthetic_nodes(user, texts, rng), vectors=embedder.embed_passages(texts))


def _print_summary(result: dict[str, Any]) -> None:
    print(f"\nmemoryscope serve under load — {result['clients']} clients, {result['users']} users, config {result['config']}")
    rows = []
    for workers, run in result["runs"].items():
        for name, endpoint in run["endpoints"].items():
            latency = endpoint["latency_ms"]
            rows.append([workers, name, endpoint["requests"], endpoint["requests_per_s"], latency["p50"], latency["p95"],
                         latency["p99"], endpoint["errors"]])  # fmt: skip
        rows.append([workers, "all", run["requests_timed"], run["requests_per_s"], "", "", "", run["errors"]])
    print_table(["workers", "endpoint", "requests", "req/s", "p50 ms", "p95 ms", "p99 ms", "errors"], rows)
    for workers, run in result["runs"].items():
        print(f"workers {workers}: cross-user responses {run['cross_user_responses']}, CPU s {run['cpu_seconds']}")
    if "retrieve_10k" in result:
        at = result["retrieve_10k"]
        print(f"\nretrieve, one user with {at['user_memories']} memories (ms): HTTP {at['http_ms']}")
        print(f"in-process retrieve_memory, query_vector given (ms): {at['in_process_ms']}")
        print(f"HTTP floor (GET /healthz): {at['http_healthz_ms']}; route pieces in process: {at['route_pieces_ms']}")
        verdict = "met" if at["meets_target"] else "NOT met"
        print(f"p95 difference {at['p95_difference_ms']} ms (target <= {at['target_ms']} ms): {verdict}")


if __name__ == "__main__":
    sys.exit(main())
