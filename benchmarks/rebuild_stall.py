"""How much one user's searches slow down while a large user's keyword posting lists are rebuilt.

A write to a user with many memories makes their in-memory posting lists stale (`_sqlite_bm25`);
after a few searches they are rebuilt on a background thread, and that thread runs Python, which
holds the interpreter's lock away from every search of the process. This measures it:

    python -m benchmarks.rebuild_stall --size 10000 --out /tmp/rebuild_stall.json

A store is filled as `benchmarks.scale` fills one (the large user, `--size` memories, and four
small ones). Then rounds alternate, in one process:
- **quiet**: a small user's `retrieve_memory`, for `--window` seconds;
- **rebuild**: one memory written to the large user, `BUILD_AFTER` searches of theirs (which asks
  for the rebuild), then the small user's retrieves for the same window.
The window is long enough to hold a whole rebuild, so every retrieve that overlaps one is in the
"rebuild" set, whatever the rebuild's length. Query vectors are given: nothing is embedded.

The small user's retrieves arrive on a schedule, one every `--interval-ms` (default: twice the
median retrieve, i.e. the process half busy), as requests reach a server, and each one's time is
counted from when it was due: a retrieve held up delays the ones due behind it, and they count
it. (Back-to-back retrieves would hide a stall: the loop would simply wait it out, and only one
retrieve would show it.)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import Progress, config_overrides, percentiles_ms
from benchmarks._scale_case import MEASURED_USER, Case, fill, users_of
from benchmarks._synthetic import BASE_TIME, SyntheticText, unit_vectors
from memoryscope.app import MemoryScope
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.stores._sqlite_bm25 import BUILD_AFTER

_SMALL_USER = "other-0"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memoryscope-rebuild-") as folder:
        path = Path(folder) / "memories.db"
        overrides = {**config_overrides(args.overrides), "memory_store.path": str(path)}
        with MemoryScope(args.config, overrides=overrides) as scope:
            result = _measure(scope, args)
    _print(result)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _measure(scope: MemoryScope, args: argparse.Namespace) -> dict[str, Any]:
    store: Any = scope.store
    if store is None or not hasattr(store, "wait_for_background"):
        raise SystemExit(f"config {args.config!r}: this benchmark needs the sqlite_memory_store")
    lists_from = store.params.keyword_in_memory_from
    if args.size < lists_from:
        raise SystemExit(
            f"--size {args.size}: a user gets posting lists from {lists_from} memories (memory_store.keyword_in_memory_from); "
            "raise --size, or lower it with --set memory_store.keyword_in_memory_from=N"
        )
    dimension = int(store.embedding_model.dimension)
    case = Case(f"size {args.size}", args.config, users_of(args.size, args.background), seed=args.seed)
    fill(store, dimension, case)
    rng = np.random.default_rng(args.seed + 1)
    texts = SyntheticText(seed=args.seed).queries(4096, rng)
    vectors = unit_vectors(len(texts), dimension, rng)
    query_time = BASE_TIME + timedelta(days=366)
    asked = 0

    def retrieve(user: str) -> float:
        nonlocal asked
        index = asked % len(texts)
        asked += 1
        started = time.perf_counter()
        scope.default_service.run_operation(
            "retrieve_memory", user, query=texts[index], query_time=query_time, query_vector=vectors[index]
        )
        return time.perf_counter() - started

    for _ in range(BUILD_AFTER + 2):  # both users' matrices loaded, the large user's lists built
        retrieve(MEASURED_USER)
        retrieve(_SMALL_USER)
    store.wait_for_background()
    interval = args.interval_ms / 1000 if args.interval_ms else 2 * float(np.median([retrieve(_SMALL_USER) for _ in range(100)]))

    def window() -> list[float]:
        """The small user's retrieves due every `interval` for `args.window` seconds, each timed from when it was due."""
        spent: list[float] = []
        due = time.perf_counter()
        ends = due + args.window
        while due < ends:
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            retrieve(_SMALL_USER)
            spent.append(time.perf_counter() - due)
            due += interval
        return spent

    quiet: list[float] = []
    rebuild: list[float] = []
    progress = Progress("rounds", args.rounds, "rounds")
    for number in range(args.rounds):
        quiet += window()
        new = MemoryNode(user_name=MEASURED_USER, content=f"written in round {number}", memory_type=MemoryType.OBSERVATION)
        store.upsert([new], vectors=unit_vectors(1, dimension, rng))
        for _ in range(BUILD_AFTER):
            retrieve(MEASURED_USER)
        rebuild += window()
        store.wait_for_background()
        progress.advance()
    progress.close()
    return {
        "config": args.config,
        "large_user_memories": args.size,
        "rounds": args.rounds,
        "window_s": args.window,
        "interval_ms": round(interval * 1000, 3),
        "small_user_retrieve_ms": {"quiet": _summary(quiet), "rebuild": _summary(rebuild)},
    }


def _summary(seconds: list[float]) -> dict[str, float]:
    return {**percentiles_ms(seconds), "max": round(max(seconds) * 1000, 3), "count": len(seconds)}


def _print(result: dict[str, Any]) -> None:
    print(
        f"a small user's retrieve_memory (ms, from when it was due; one due every {result['interval_ms']:.2f} ms) "
        f"with no write (quiet) and after a write to a {result['large_user_memories']:,}-memory user (rebuild)"
    )
    print(f"{'rounds':<10}{'count':>8}{'p50':>9}{'p95':>9}{'max':>9}")
    for name, row in result["small_user_retrieve_ms"].items():
        print(f"{name:<10}{row['count']:>8}{row['p50']:>9.2f}{row['p95']:>9.2f}{row['max']:>9.1f}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rebuild_stall", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="where to write the JSON result")
    parser.add_argument("--size", type=int, default=10000, help="memories of the large user")
    parser.add_argument("--rounds", type=int, default=12, help="quiet and rebuild windows, each")
    parser.add_argument("--window", type=float, default=1.0, help="seconds of the small user's retrieves per window")
    parser.add_argument(
        "--interval-ms", type=float, default=None, help="a small-user retrieve due every this many ms (default: twice the median)"
    )
    parser.add_argument("--config", default="default", help="config name or YAML path (default: default)")
    parser.add_argument("--background", type=float, default=0.25, help="the small users' memories, as a share of size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="change one config key for this run (dotted; the value read as YAML); repeatable",
    )  # fmt: skip
    return parser


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
