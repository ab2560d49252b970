"""Markdown tables and PNG plots from the benchmarks' JSON results.

    python -m benchmarks.report [--locomo FILE.json] [--scale FILE.json] [--ingest FILE.json] [--plots DIR]

Prints the tables `benchmarks/README.md` shows. With `--plots DIR`, also draws
`locomo_recall.png` (recall@k by category, MemoryScope beside the plain baselines) and
`scale_latency.png` (latency against store size). Plotting needs matplotlib
(`pip install matplotlib`); without it the plots are skipped with a message.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]

_CATEGORIES = (("1", "multi-hop"), ("2", "temporal"), ("3", "open-domain"), ("4", "single-hop"), ("all", "1-4"))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    locomo = _load(args.locomo)
    scale = _load(args.scale)
    ingest = _load(args.ingest)
    if locomo:
        print(locomo_markdown(locomo))
    if scale:
        print(scale_markdown(scale))
    if ingest:
        print(ingest_markdown(ingest))
    if args.plots:
        plt = _pyplot()
        if plt is None:
            print("matplotlib is not installed (pip install matplotlib): plots skipped", file=sys.stderr)
        else:
            folder = Path(args.plots)
            folder.mkdir(parents=True, exist_ok=True)
            if locomo:
                print(f"wrote {_plot_recall(plt, locomo, folder / 'locomo_recall.png')}", file=sys.stderr)
            if scale:
                print(f"wrote {_plot_scale(plt, scale, folder / 'scale_latency.png')}", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", help="JSON from benchmarks.locomo_retrieval")
    parser.add_argument("--scale", help="JSON from benchmarks.scale")
    parser.add_argument("--ingest", help="JSON from benchmarks.ingest")
    parser.add_argument("--plots", help="folder for the PNG plots")
    return parser


def _load(path: str | None) -> dict[str, Any] | None:
    return json.loads(Path(path).read_text(encoding="utf-8")) if path else None


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def locomo_markdown(result: dict[str, Any]) -> str:
    ks = list(result["recall"])
    counts = result.get("questions_by_category", {})
    lines = [
        f"LoCoMo recall — config `{result['config']}` ({result['embedding_model']}), "
        f"{result['conversations']} conversations, {result['questions']} questions, {result.get('date', '')}",
        "",
        "| category | questions | " + " | ".join(f"recall@{k}" for k in ks) + " |",
        "|---|---|" + "---|" * len(ks),
    ]
    for key, name in _CATEGORIES:
        count = result["questions"] if key == "all" else counts.get(key, "")
        label = "all (1-4)" if key == "all" else f"{key} {name}"
        lines.append(f"| {label} | {count} | " + " | ".join(_fmt(result["recall"][k][key]) for k in ks) + " |")
    lines += ["", "| retriever (categories 1-4) | " + " | ".join(f"recall@{k}" for k in ks) + " |", "|---|" + "---|" * len(ks)]
    lines.append(f"| MemoryScope `{result['config']}` | " + " | ".join(_fmt(result["recall"][k]["all"]) for k in ks) + " |")
    for name, values in result.get("baselines", {}).items():
        lines.append(f"| {name}, plain | " + " | ".join(_fmt(values["recall"][k]["all"]) for k in ks) + " |")
    if result.get("baselines"):
        lines += ["", "Plain baselines by category (recall@10):", "", "| retriever | 1 | 2 | 3 | 4 |", "|---|---|---|---|---|"]
        k10 = "10" if "10" in ks else ks[len(ks) // 2]
        rows = [(f"MemoryScope `{result['config']}`", result["recall"][k10])]
        rows += [(f"{name}, plain", values["recall"][k10]) for name, values in result["baselines"].items()]
        for name, row in rows:
            lines.append(f"| {name} | " + " | ".join(_fmt(row[c]) for c in ("1", "2", "3", "4")) + " |")
    latency = result["latency_ms"]
    lines += [
        "",
        f"retrieve_memory latency p50 {_fmt(latency['p50'], 1)} ms, p95 {_fmt(latency['p95'], 1)} ms "
        f"(query embedding included); ingest {_fmt(result['ingest_turns_per_s'], 1)} turns/s through read_message.",
        "",
    ]
    return "\n".join(lines)


def _scale_rows(result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    rows = [(f"{int(size):,}", values) for size, values in result["sizes"].items()]
    crowd = result.get("crowd")
    if crowd:
        rows.append((f"{crowd['user_memories']:,} alone", crowd["alone"]))
        rows.append((f"{crowd['user_memories']:,} in {crowd['store_total']:,}", crowd["crowded"]))
    return rows


def scale_markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Latency by store size — config `{result['config']}`, query embedding excluded, "
        f"{result.get('queries_per_size', '')} queries per size, {result.get('date', '')}",
        "",
        "| user's memories | store total | search p50 | search p95 | retrieve p50 | retrieve p95 | overhead (p50) "
        "| insert/s | disk MB | RSS MB | load 1m |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, v in _scale_rows(result):
        lines.append(
            f"| {label} | {v['memories_total']:,} "
            f"| {_fmt(v['store_search_ms']['p50'], 2)} | {_fmt(v['store_search_ms']['p95'], 2)} "
            f"| {_fmt(v['retrieve_ms']['p50'], 2)} | {_fmt(v['retrieve_ms']['p95'], 2)} | {_fmt(v['overhead_ratio'], 2)}× "
            f"| {_fmt(v['insert_per_s'], 0)} | {_fmt(v['disk_mb'], 1)} | {_fmt(v['rss_mb'], 0)} "
            f"| {'-'.join(_fmt(load, 2) for load in v.get('load_average_1m') or [])} |"
        )
    crowd = result.get("crowd")
    if crowd:
        lines += ["", f"crowded / alone retrieve p50: {crowd['retrieve_p50_ratio']}×, p95: {crowd['retrieve_p95_ratio']}×"]
    split = [(label, v) for label, v in _scale_rows(result) if "store_search_by_mode_ms" in v]
    if split:
        lines += [
            "",
            "The store search split into its two halves (same filter and top_k, 50 queries; ms) and the time of each "
            "retrieve worker (p50, ms):",
            "",
            "| user's memories | dense p50 | dense p95 | keyword p50 | keyword p95 | " + " | ".join(_workers(split)) + " |",
            "|---|---|---|---|---|" + "---|" * len(_workers(split)),
        ]
        for label, v in split:
            modes = v["store_search_by_mode_ms"]
            workers = v.get("worker_ms_p50", {})
            lines.append(
                f"| {label} | {_fmt(modes['dense']['p50'], 2)} | {_fmt(modes['dense']['p95'], 2)} "
                f"| {_fmt(modes['keyword']['p50'], 2)} | {_fmt(modes['keyword']['p95'], 2)} | "
                + " | ".join(_fmt(workers.get(name), 2) for name in _workers(split))
                + " |"
            )
    lines += _scale_stages_and_cold_start(_scale_rows(result))
    lines.append("")
    return "\n".join(lines)


_STAGES = ("filter_mask", "dense", "keyword", "fusion", "load_nodes")


def _scale_stages_and_cold_start(rows: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The store search stage by stage, the first retrieve after opening, and the keyword re-index."""
    lines: list[str] = []
    staged = [(label, v) for label, v in rows if v.get("store_search_stages_ms") or v.get("cold_start")]
    if staged:
        lines += [
            "",
            "The store search stage by stage, one after the other (p50 / p95, ms; 50 queries), and the first retrieve "
            "after opening the file again (a new store object: no in-process cache):",
            "",
            "| user's memories | " + " | ".join(_STAGES) + " | open ms | first retrieve ms | first / warm p95 |",
            "|---|" + "---|" * (len(_STAGES) + 3),
        ]
        for label, v in staged:
            stages, cold = v.get("store_search_stages_ms") or {}, v.get("cold_start") or {}
            cells = [
                f"{_fmt(stages[name]['p50'], 2)} / {_fmt(stages[name]['p95'], 2)}" if name in stages else "" for name in _STAGES
            ]
            cold_cells = [
                _fmt(cold.get("open_ms"), 1),
                _fmt(cold.get("first_retrieve_ms"), 1),
                _fmt(cold.get("first_to_warm_p95"), 1),
            ]
            lines.append(f"| {label} | " + " | ".join(cells + cold_cells) + " |")
    reindexed = [(label, v["keyword_reindex"]) for label, v in rows if "keyword_reindex" in v]
    if reindexed:
        lines += ["", "| keyword re-index of | rows | chunks | total s | longest transaction s |", "|---|---|---|---|---|"]
        for label, r in reindexed:
            lines.append(f"| {label} | {r['rows']:,} | {r['chunks']} | {r['total_s']} | {r['longest_transaction_s']} |")
    return lines


def _workers(rows: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return list(dict.fromkeys(name for _, v in rows for name in v.get("worker_ms_p50", {})))


def ingest_markdown(result: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"Ingest — config `{result['config']}` ({result['embedding_model']}), {result['turns']} {result['texts']}, "
            f"batches of {result['batch']}, median of {result['repeats']}, {result.get('date', '')}",
            "",
            "| measurement | turns/s |",
            "|---|---|",
            f"| read_message, with embedding | {_fmt(result['ingest_turns_per_s'], 1)} |",
            f"| read_message, embedding excluded | {_fmt(result['ingest_without_embedding_turns_per_s'], 0)} |",
            f"| embedding model alone, same batches | {_fmt(result['embedding_passages_per_s'], 1)} |",
            *_as_stored_row(result),
            "",
            f"ratio ingest / bare embedding: {result['ratio']} (target ≥ {result['target_ratio']})",
            *_as_stored_ratio(result),
            "",
        ]
    )


def _as_stored_ratio(result: dict[str, Any]) -> list[str]:
    ratio = result.get("ratio_as_stored")
    return [] if ratio is None else [f"ratio ingest / embedding of the texts as stored: {ratio}"]


def _as_stored_row(result: dict[str, Any]) -> list[str]:
    """The row of the texts as `read_message` embeds them (results written before it had none)."""
    rate = result.get("embedding_as_stored_per_s")
    return [] if rate is None else [f"| embedding model alone, texts as stored (speaker sentence) | {_fmt(rate, 1)} |"]


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _plot_recall(plt: Any, result: dict[str, Any], path: Path) -> Path:
    retrievers = [(f"MemoryScope ({result['config']})", result["recall"])]
    retrievers += [(f"{name} (plain)", values["recall"]) for name, values in result.get("baselines", {}).items()]
    ks = list(result["recall"])
    figure, axes = plt.subplots(1, len(ks), figsize=(4.2 * len(ks), 3.8), sharey=True)
    axes = axes if len(ks) > 1 else [axes]
    width = 0.8 / len(retrievers)
    for axis, k in zip(axes, ks, strict=True):
        for index, (name, recall) in enumerate(retrievers):
            values = [recall[k][key] or 0.0 for key, _ in _CATEGORIES]
            positions = [c + (index - (len(retrievers) - 1) / 2) * width for c in range(len(_CATEGORIES))]
            axis.bar(positions, values, width, label=name)
        axis.set_xticks(range(len(_CATEGORIES)), [f"{key}\n{name}" for key, name in _CATEGORIES], fontsize=8)
        axis.set_title(f"recall@{k}")
        axis.set_ylim(0, 1)
        axis.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("share of evidence turns retrieved")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=len(retrievers), fontsize=9)
    figure.suptitle(f"LoCoMo, {result['conversations']} conversations, {result['questions']} questions (categories 1-4)")
    figure.tight_layout(rect=(0, 0.07, 1, 1))
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _plot_scale(plt: Any, result: dict[str, Any], path: Path) -> Path:
    sizes = sorted(result["sizes"], key=int)
    x = [int(size) for size in sizes]
    figure, axis = plt.subplots(figsize=(6.5, 4.2))
    series = (("retrieve_ms", "retrieve_memory", "-o", "C0"), ("store_search_ms", "bare store search", "--s", "C2"))
    for key, name, style, color in series:
        for percentile, alpha in (("p50", 1.0), ("p95", 0.45)):
            values = [result["sizes"][s][key][percentile] for s in sizes]
            axis.plot(x, values, style, color=color, alpha=alpha, label=f"{name} {percentile}")
    crowd = result.get("crowd")
    if crowd:
        axis.scatter(
            [crowd["user_memories"]],
            [crowd["crowded"]["retrieve_ms"]["p50"]],
            marker="*",
            s=120,
            color="black",
            label=f"1k user in a {crowd['store_total']:,} store, retrieve p50",
            zorder=5,
        )
    for target in (10, 50):  # the p95 targets at 10k and 100k memories (BENCHMARKS.md)
        axis.axhline(target, color="grey", linewidth=0.8, linestyle=":")
        axis.annotate(f"target {target} ms", (x[0], target), fontsize=7, color="grey", va="bottom")
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("memories of the user")
    axis.set_ylabel("ms (query embedding excluded)")
    axis.set_title(f"Latency against store size, config {result['config']}")
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


if __name__ == "__main__":
    sys.exit(main())
