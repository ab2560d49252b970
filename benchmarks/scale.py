"""Latency and footprint of `retrieve_memory` as the store grows.

    python -m benchmarks.scale --sizes 1000 10000 100000 --out FILE.json [--config NAME|PATH] [--crowd]
        [--ann on|off|auto] [--vectors random|clustered]

Per size: a fresh store of the config's kind holds `size` memories of the measured user plus
`--background` times as many spread over four other users; synthetic text (a Zipf vocabulary,
see `_synthetic.py`) and random unit vectors given to `upsert` (nothing is embedded). Then
`--queries` queries are timed, each both through `retrieve_memory` with a precomputed
`query_vector` (model time excluded; the text still drives keyword search) and as the bare store
search(es) the retrieve worker makes (same filter, mode and top_k). Reported: p50/p95 of each,
their ratio (`overhead_ratio`, from the p50s), insert throughput, disk size, process RSS; the
store search stage by stage (`store_search_stages_ms`: filter masks, dense, keyword, fusion,
loading nodes); and the cold start (`cold_start`): the file opened again by a new MemoryScope and
its first `retrieve_memory` timed, with its ratio to the warm p95 (with an approximate index,
also the seconds until it is ready again and whether it was loaded from its saved file); for `sqlite_memory_store` whether
its keyword ranking from memory gives the same results as FTS5 (`same_as_fts5`); with
`--reindex`, a keyword re-index of each file and its longest transaction (`keyword_reindex`).

`--crowd`: the same measurement for a 1k-memory user alone in a store, and inside a store of
`--crowd-total` memories (other users of `--crowd-user-size` memories each), under `"crowd"`.
Every case runs in its own process (`spawn`) so RSS and caches start clean.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from benchmarks._common import machine, print_table, run_stamp, write_json
from benchmarks._scale_case import MEASURED_USER, Case, run_case, users_of

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    result: dict[str, Any] = {"config": args.config, "sizes": {}}
    for size in args.sizes:
        users = users_of(size, args.background)
        result["sizes"][str(size)] = _isolated(
            Case(f"size {size}", args.config, users, args.queries, args.seed, args.reindex, args.ann, args.vectors)
        )
    if args.crowd:
        alone = _isolated(
            Case("crowd: alone", args.config, ((MEASURED_USER, args.crowd_user_size),), args.queries, args.seed, args.reindex)
        )
        crowd_users = [(MEASURED_USER, args.crowd_user_size)]
        left, index = args.crowd_total - args.crowd_user_size, 0
        while left > 0:
            crowd_users.append((f"crowd-{index}", min(args.crowd_user_size, left)))
            left -= crowd_users[-1][1]
            index += 1
        crowded = _isolated(Case("crowd: crowded", args.config, tuple(crowd_users), args.queries, args.seed, args.reindex))
        result["crowd"] = {
            "user_memories": args.crowd_user_size,
            "store_total": args.crowd_total,
            "alone": alone,
            "crowded": crowded,
            "retrieve_p50_ratio": _ratio(crowded["retrieve_ms"]["p50"], alone["retrieve_ms"]["p50"]),
            "retrieve_p95_ratio": _ratio(crowded["retrieve_ms"]["p95"], alone["retrieve_ms"]["p95"]),
        }
    result["ann"] = args.ann
    result["vectors"] = args.vectors
    result["queries_per_size"] = args.queries
    result["background_share"] = args.background
    result["date"] = run_stamp()
    result["machine"] = machine()
    write_json(args.out, result)
    _print_summary(result)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000], help="memories of the measured user")
    parser.add_argument("--out", required=True, help="where to write the JSON result")
    parser.add_argument("--config", default="default", help="config name or YAML path (default: default)")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per case (after 5 warm-up queries)")
    parser.add_argument("--background", type=float, default=0.25, help="other users' memories, as a share of size")
    parser.add_argument("--crowd", action="store_true", help="also measure a small user alone vs inside a big store")
    parser.add_argument("--crowd-total", type=int, default=1_000_000, help="memories in the crowded store")
    parser.add_argument("--crowd-user-size", type=int, default=1000, help="memories of each user in the crowd case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--reindex", action="store_true", help="also time a keyword re-index of each file (its longest transaction)"
    )
    parser.add_argument(
        "--ann",
        choices=("on", "off", "auto"),
        default="auto",
        help="sqlite_memory_store's approximate vector index: on for every user, off, or as configured (auto); "
        "on or off also measures the recall of the dense top 50 against exact search, and the index's build",
    )
    parser.add_argument(
        "--vectors",
        choices=("random", "clustered"),
        default="random",
        help="stored and query vectors: random unit vectors, or clustered around topics as embeddings are",
    )
    return parser


def _isolated(case: Case) -> dict[str, Any]:
    """`run_case(case)` in a fresh interpreter."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(run_case, case).result()


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def _loads(pair: Sequence[float | None] | None) -> str:
    """The load average as timing began and ended: "0.84-1.02"."""
    return "-".join("?" if value is None else f"{value:.2f}" for value in pair) if pair else ""


def _print_summary(result: dict[str, Any]) -> None:
    print(f"\nretrieve_memory latency by store size — config {result['config']} (query embedding excluded)")
    rows = []
    cases = [(size, values) for size, values in result["sizes"].items()]
    if "crowd" in result:
        crowd = result["crowd"]
        cases += [("1k alone", crowd["alone"]), (f"1k in {crowd['store_total']}", crowd["crowded"])]
    for label, values in cases:
        rows.append(
            [
                label,
                values["memories_total"],
                values["store_search_ms"]["p50"],
                values["store_search_ms"]["p95"],
                values["retrieve_ms"]["p50"],
                values["retrieve_ms"]["p95"],
                values["overhead_ratio"],
                values["insert_per_s"],
                values["disk_mb"],
                values["rss_mb"],
                _loads(values.get("load_average_1m")),
            ]
        )
    headers = [
        "user size",
        "store total",
        "search p50",
        "search p95",
        "retrieve p50",
        "retrieve p95",
        "ratio",
        "insert/s",
        "disk MB",
        "RSS MB",
        "load 1m",
    ]
    print_table(headers, rows)
    if "crowd" in result:
        crowd = result["crowd"]
        print(f"crowded/alone retrieve p50 ratio {crowd['retrieve_p50_ratio']}, p95 ratio {crowd['retrieve_p95_ratio']}")
    stage_names = ("filter_mask", "dense", "keyword", "fusion", "load_nodes")
    print("\nstore search by stage, one after the other (ms p50/p95), and the first retrieve after opening the file")
    rows = []
    for label, values in cases:
        stages = values.get("store_search_stages_ms") or {}
        cold = values.get("cold_start") or {}
        rows.append(
            [label]
            + [f"{stages[name]['p50']:.2f}/{stages[name]['p95']:.2f}" if name in stages else "-" for name in stage_names]
            + [cold.get("open_ms", "-"), cold.get("first_retrieve_ms", "-"), cold.get("first_to_warm_p95", "-")]
            + [f"{cold['index_ready_s']} ({cold['index_source']})" if "index_ready_s" in cold else "-"]
        )
    print_table(["user size", *stage_names, "open ms", "cold retrieve ms", "cold / warm p95", "index ready s"], rows)
    compared = [(label, values["same_as_fts5"]) for label, values in cases if values.get("same_as_fts5")]
    if compared:
        print("\nthe same searches with every keyword search left to FTS5: identical results (share), ids in common")
        print_table(
            ["user size", "searches", "identical", "mean overlap"],
            [[label, c["searches"], c["identical_share"], c["mean_overlap"]] for label, c in compared],
        )
    indexed = [(label, values["ann"]) for label, values in cases if values.get("ann")]
    if indexed:
        print(f"\napproximate vector index ({result['ann']}, {result['vectors']} vectors): recall of the dense top 50")
        print_table(
            ["user size", "recall@50", "worst query", "build s", "graph MB", "build s / 1M", "graph MB / 1M"],
            [
                [label, a.get("recall_at_50"), a.get("recall_at_50_min")]
                + [
                    (a.get("build") or {}).get(key, "-")
                    for key in ("build_s", "graph_mb", "build_s_per_million", "graph_mb_per_million")
                ]
                for label, a in indexed
            ],
        )
    reindexed = [(label, values["keyword_reindex"]) for label, values in cases if "keyword_reindex" in values]
    if reindexed:
        print("\nkeyword re-index of the whole file (as after an upgrade)")
        print_table(
            ["user size", "rows", "chunks", "total s", "longest transaction s"],
            [[label, r["rows"], r["chunks"], r["total_s"], r["longest_transaction_s"]] for label, r in reindexed],
        )


if __name__ == "__main__":
    sys.exit(main())
