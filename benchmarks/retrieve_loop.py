"""`retrieve_memory` in a loop over a store filled as `benchmarks.scale` fills one, for counting
the instructions of one retrieve with `valgrind --tool=callgrind`: a count does not depend on the
machine's speed, which moves timings by up to ±25% between runs.

    python -m benchmarks.retrieve_loop --size 10000 --store /tmp/s10k.db --fill
    valgrind --tool=callgrind --callgrind-out-file=/tmp/a.out \\
        python -m benchmarks.retrieve_loop --size 10000 --store /tmp/s10k.db --queries 15
    valgrind --tool=callgrind --callgrind-out-file=/tmp/b.out \\
        python -m benchmarks.retrieve_loop --size 10000 --store /tmp/s10k.db --queries 65

The instructions of one retrieve are (b's `I refs` − a's) / 50: starting the interpreter,
opening the store and the first queries cancel out. The queries are `benchmarks.scale`'s: made-up
text, with the query vector given (the embedding model is never called).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import numpy as np

from benchmarks._scale_case import MEASURED_USER, Case, fill, users_of
from benchmarks._synthetic import BASE_TIME, SyntheticText, unit_vectors
from memoryscope.app import MemoryScope


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    store_path = Path(args.store)
    if args.fill and store_path.exists():
        raise SystemExit(f"{store_path} exists already: give --fill a new file (or drop --fill to query it)")
    if not args.fill and not store_path.exists():
        raise SystemExit(f"no store at {store_path}: fill one first with --fill")
    with MemoryScope(args.config, overrides={"memory_store.path": str(store_path)}) as scope:
        store = scope.store
        if store is None:
            raise SystemExit(f"config {args.config!r} has no memory_store")
        dimension = int(store.embedding_model.dimension)  # every shipped store keeps its model
        if args.fill:
            case = Case(f"size {args.size}", args.config, users_of(args.size, args.background), seed=args.seed)
            per_s = fill(store, dimension, case)
            print(f"filled {store_path}: {sum(count for _, count in case.users)} memories, {per_s:.0f}/s", file=sys.stderr)
            return 0
        rng = np.random.default_rng(args.seed + 1)
        texts = SyntheticText(seed=args.seed).queries(args.queries, rng)
        vectors = unit_vectors(args.queries, dimension, rng)
        query_time = BASE_TIME + timedelta(days=366)
        returned = 0
        for text, vector in zip(texts, vectors, strict=True):
            run = scope.default_service.run_operation(
                "retrieve_memory", MEASURED_USER, query=text, query_time=query_time, query_vector=vector
            )
            returned += len(run.context.memories)
    print(f"{args.queries} retrieves, {returned} memories returned", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.retrieve_loop", description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="the SQLite file to fill (--fill) or to query")
    parser.add_argument("--size", type=int, default=10000, help="memories of the measured user (with --fill)")
    parser.add_argument("--fill", action="store_true", help="fill a new store and stop")
    parser.add_argument("--queries", type=int, default=15, help="retrieves to make")
    parser.add_argument("--config", default="default", help="config name or YAML path (default: default)")
    parser.add_argument("--background", type=float, default=0.25, help="other users' memories, as a share of size")
    parser.add_argument("--seed", type=int, default=0)
    return parser


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
