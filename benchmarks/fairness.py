"""Fairness under a heavy request: one user's large add must not stall another user's searches.

    python -m benchmarks.fairness --out FILE.json [--config NAME|PATH] [--messages 100] [--chars 3990]
        [--searches 40] [--quick]

A real `memoryscope serve` (a subprocess, 1 worker) on the given config (default: `default`, the
offline embedding model in the server's process: the real cost of embedding) and a fresh
temporary SQLite store. User `reader` holds 50 short memories. First `--searches` searches of
`reader`, one at a time, give the idle latency. Then user `writer` stores `--messages` messages
of `--chars` characters in one request (POST /v1/users/writer/messages, the scenario of issue 30:
a 400 KB body within every configured limit) while `reader` keeps searching, one at a time,
until the add is answered. Reported: the idle and the during-add search p50/p95/p99 (ms, as the
client sees them), their p95 ratio against the target (3x), how long the add took, and whether
each of the writer's messages was stored exactly once (listed afterwards, counted by text).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import yaml

from benchmarks._common import machine, print_table, run_stamp, write_json
from benchmarks._serve_processes import Server, code_version, cpu_seconds, log_summary, percentiles

TARGET_RATIO = 3.0
_WORDS = (
    "river", "garden", "violin", "market", "winter", "coffee", "pencil", "harbor", "lantern", "meadow", "orchard",
    "canyon", "festival", "library", "mountain", "notebook", "painting", "quartet", "recipe", "station", "theater",
)  # fmt: skip


def _config(base: str, folder: Path) -> Path:
    extends = str(Path(base).resolve()) if Path(base).suffix in (".yaml", ".yml") else base
    path = folder / "serve.yaml"
    # no LLM, whatever the environment says: the add's embedding is what is measured
    data = {
        "extends": extends,
        "memory_store": {"path": str(folder / "memories.db")},
        "model": {"generation_model": {"api_base": ""}},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _long_message(rng: random.Random, index: int, chars: int) -> str:
    words = [f"message {index}:"]
    while sum(len(word) + 1 for word in words) < chars:
        words.append(rng.choice(_WORDS))
    return " ".join(words)[:chars]


def _searches(client: httpx.Client, until: threading.Event | None, count: int) -> list[float]:
    """Search `reader` one request at a time: `count` times, or until `until` is set."""
    seconds: list[float] = []
    queries = ("what does the reader play?", "where does the reader live?", "what does the reader drink?")
    while (until is None and len(seconds) < count) or (until is not None and not until.is_set()):
        started = time.perf_counter()
        response = client.post("/v1/users/reader/search", json={"query": queries[len(seconds) % 3], "top_k": 5})
        seconds.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise SystemExit(f"a search answered {response.status_code}: {response.text[:300]}")
    return seconds


def run(config: str, messages: int, chars: int, searches: int) -> dict[str, Any]:
    rng = random.Random(7)
    said = [_long_message(rng, index, chars) for index in range(messages)]
    with tempfile.TemporaryDirectory(prefix="memoryscope-fairness-") as temporary:
        folder = Path(temporary)
        with Server(_config(config, folder), 1, folder) as server, httpx.Client(base_url=server.url, timeout=900) as client:
            verbs = ["likes", "plays", "visits"] * 17
            facts = [f"the reader {verb} {rng.choice(_WORDS)} number {n}" for n, verb in enumerate(verbs)][:50]
            added = client.post("/v1/users/reader/memories", json={"texts": facts})
            assert added.status_code == 201, added.text
            _searches(client, None, 5)  # warm: the first query loads what it reads
            idle = _searches(client, None, searches)

            done = threading.Event()
            answer: dict[str, Any] = {}

            def heavy_add() -> None:
                started = time.perf_counter()
                body = {"messages": [{"role": "user", "content": text} for text in said]}
                with httpx.Client(base_url=server.url, timeout=1800) as writer:
                    response = writer.post("/v1/users/writer/messages", json=body)
                answer.update(status=response.status_code, seconds=time.perf_counter() - started, body=response.text[:300])
                done.set()

            cpu_before = cpu_seconds(server.process.pid)
            adding = threading.Thread(target=heavy_add, name="heavy-add")
            adding.start()
            time.sleep(0.2)  # the add is under way
            during = _searches(client, done, 0)
            adding.join()
            cpu = cpu_seconds(server.process.pid) - cpu_before
            listed = client.get("/v1/users/writer/memories", params={"type": "conversation", "limit": messages * 2})
            texts = [record["memory"] for record in listed.json().get("memories", [])] if listed.status_code == 200 else []
        log = log_summary(folder / "server-1.log")
    counted = Counter(texts)
    idle_p, during_p = percentiles(idle), percentiles(during)
    ratio = round(during_p["p95"] / idle_p["p95"], 2) if idle_p["p95"] else float("nan")
    return {
        "config": config,
        "messages": messages,
        "chars_per_message": chars,
        "body_kb": round(sum(len(text) for text in said) / 1000, 1),
        "idle_search_ms": {**idle_p, "count": len(idle)},
        "during_add_search_ms": {**during_p, "count": len(during)},
        "p95_ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "target_met": bool(ratio <= TARGET_RATIO),
        "add": {"status": answer.get("status"), "seconds": round(answer.get("seconds", float("nan")), 2)},
        "stored": {
            "messages": len(texts),
            "each_exactly_once": sorted(counted.values()) == [1] * messages and set(counted) == set(said),
            "missing": len(set(said) - set(counted)),
            "duplicated": sum(count > 1 for count in counted.values()),
        },
        "server_cpu_s_during_add": round(cpu, 2),
        "server_log": log,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fairness", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--config", default="default")
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--chars", type=int, default=3990)
    parser.add_argument("--searches", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="20 messages of 1,000 characters, 15 idle searches (a smoke run)")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.chars, args.searches = 20, 1000, 15
    result = run(args.config, args.messages, args.chars, args.searches)
    document = {"benchmark": "fairness", "run_at": run_stamp(), "machine": machine(), "code": code_version(), "result": result}
    write_json(args.out, document)
    idle, during = result["idle_search_ms"], result["during_add_search_ms"]
    rows = [
        ("idle search p50 / p95 ms", f"{idle['p50']} / {idle['p95']}"),
        ("search during the add p50 / p95 ms", f"{during['p50']} / {during['p95']}"),
        ("p95 ratio (target <= 3)", f"{result['p95_ratio']} ({'met' if result['target_met'] else 'not met'})"),
        ("the add", f"{result['add']['status']} in {result['add']['seconds']} s ({result['body_kb']} KB)"),
        ("stored exactly once", str(result["stored"]["each_exactly_once"])),
    ]
    print_table(("figure", "value"), rows, file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
