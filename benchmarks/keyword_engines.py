"""The store's keyword ranking (FTS5's `bm25()`, and `UserWords` for large users) beside two
packaged BM25 indexes, `tantivy` and `bm25s`, on the same tokens (issue 34, item 3).

    python -m benchmarks.keyword_engines --data ../shared/data/locomo --sizes 10000 100000 1000000 \\
        --cache /tmp/keyword-engines --out benchmarks/results/keyword_engines.json

Two parts:
- **LoCoMo** (`--data`): each conversation's turns (`"<speaker>: <text>"`) are one user's
  memories, each question a query. Per engine: how much of FTS5's top 10 it shares, how often
  its top 10 is FTS5's in the same order, and the keyword-only recall@10 of the evidence turns.
- **Synthetic users** (`--sizes`): one user of N memories of `_synthetic.SyntheticText`, the
  queries of `benchmarks.scale`. Per engine: query p50 / p95 for the `--top-k` the store asks
  for (166: a retrieve's hybrid search asks 120 keyword hits, over-fetched by 1.25 + 16 for its
  filter), the build time, memory, and the time one insert and one delete take to become
  searchable. The engines take turns query by query, so the machine's drift hits them alike.

`--cache DIR` keeps the FTS5 file and the tantivy folder of each size (a 1M build takes
minutes) and reuses them when they hold the size's rows; their build times come from the run
that built them. `UserWords` and bm25s live in memory and are built on every run.

What each engine is, and the tokens they share: `_keyword_engines`. tantivy and bm25s are not
dependencies of memoryscope: `pip install -e .[bench]` (or `pip install tantivy bm25s`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import Progress, machine, percentiles_ms, print_table, rss_mb, run_stamp, write_json
from benchmarks._keyword_engines import (
    ENGINES,
    Engine,
    Fts5,
    document_tokens,
    make_engine,
    missing,
    query_terms,
    remove,
)
from benchmarks._locomo import load_conversations
from benchmarks._synthetic import SyntheticText
from benchmarks.locomo_retrieval import CATEGORIES

__all__ = ["main"]

_WARMUP = 5
_KEPT = ("fts5", "tantivy")  # engines whose index is a file a later run can reuse
_CHANGES = 3  # inserts and deletes timed per engine (bm25s: one each, a whole new index each time)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.keyword_engines", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--data", help="LoCoMo folder (the ranking agreement part; skipped without it)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000], help="synthetic users' memories")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per size")
    parser.add_argument("--top-k", type=int, default=166, help="hits a search asks for")
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--cache", help="folder keeping each size's FTS5 file and tantivy index between runs")
    args = parser.parse_args(argv)
    if "fts5" not in args.engines:
        args.engines.insert(0, "fts5")  # the reference every other engine is compared with
    absent = missing(args.engines)
    if absent:
        raise SystemExit(
            f"benchmarks.keyword_engines: {', '.join(absent)} not installed. Install the benchmark extra: "
            f"pip install -e .[bench] (or pip install {' '.join(absent)}), or leave them out with "
            f"--engines {' '.join(name for name in args.engines if name not in absent)}"
        )
    with tempfile.TemporaryDirectory(prefix="keyword-engines-") as scratch:
        result: dict[str, Any] = {
            "date": run_stamp(),
            "machine": machine(),
            "engines": args.engines,
            "top_k": args.top_k,
            "load_average_1m": [_load()],
        }
        if args.data:
            result["locomo"] = locomo_agreement(args.data, args.engines, Path(scratch))
        result["sizes"] = {}
        for size in args.sizes:
            folder = Path(args.cache) / f"size-{size}" if args.cache else Path(scratch) / f"size-{size}"
            result["sizes"][str(size)] = synthetic_user(size, args.engines, folder, args.queries, args.top_k)
        result["load_average_1m"].append(_load())
    write_json(args.out, result)
    _print(result)
    return 0


def locomo_agreement(data: str, engines: Sequence[str], scratch: Path) -> dict[str, Any]:
    """Per engine: mean share of FTS5's top 10 in its own, the share of questions whose top 10
    is FTS5's in the same order, and recall@10 of the evidence turns (all, and by category)."""
    conversations = load_conversations(data)
    for conversation in conversations:  # as `locomo_retrieval`: category 5 (adversarial) has no evidence to recall
        conversation.questions = [question for question in conversation.questions if question.category in CATEGORIES]
    outcomes: dict[str, list[tuple[int, float | None, bool, float]]] = {name: [] for name in engines}
    progress = Progress("LoCoMo", sum(len(conversation.questions) for conversation in conversations), unit="questions")
    for number, conversation in enumerate(conversations):
        turns = conversation.turns
        documents = [document_tokens(f"{turn.speaker}: {turn.content}") for turn in turns]
        built = _engines(engines, scratch / f"locomo-{number}")
        for engine in built:
            engine.build(documents)
        for question in conversation.questions:
            terms = query_terms(question.text)
            reference = [row for row, _ in built[0].search(terms, 10)]
            for engine in built:
                ranked = [row for row, _ in engine.search(terms, 10)]
                shared = len(set(ranked) & set(reference)) / len(reference) if reference else None
                found = {turns[row - 1].dia_id for row in ranked}
                recall = sum(dia_id in found for dia_id in question.evidence) / len(question.evidence)
                outcomes[engine.name].append((question.category, shared, ranked == reference, recall))
            progress.advance()
        for engine in built:
            engine.close()
    progress.close()
    table: dict[str, Any] = {}
    for name, rows in outcomes.items():
        overlaps = [value for _, value, _, _ in rows if value is not None]
        table[name] = {
            "top10_overlap_with_fts5": round(statistics.fmean(overlaps), 4) if overlaps else None,
            "top10_identical_to_fts5": round(sum(same for _, _, same, _ in rows) / len(rows), 4),
            "recall_at_10": {"all": round(statistics.fmean(recall for *_, recall in rows), 4)}
            | {
                str(category): round(statistics.fmean(recall for c, *_, recall in rows if c == category), 4)
                for category in sorted({c for c, *_ in rows})
            },
        }
    questions = len(next(iter(outcomes.values())))
    return {"conversations": len(conversations), "questions": questions, "engines": table}


def synthetic_user(size: int, engines: Sequence[str], folder: Path, queries: int, top_k: int) -> dict[str, Any]:
    """One user of `size` synthetic memories in every engine: query times, build, memory, changes."""
    folder.mkdir(parents=True, exist_ok=True)
    meta_path = folder / "built.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    fts5 = Fts5(folder / "fts5.db")
    reuse = fts5.rows() == size and meta.get("size") == size
    if reuse:
        print(f"{size:,} memories: reusing {folder}", file=sys.stderr)
        documents = [words.split() for (words,) in fts5.connection.execute("SELECT words FROM memory_words ORDER BY rowid")]
    else:
        fts5.close()
        remove(folder)
        folder.mkdir(parents=True)
        fts5 = Fts5(folder / "fts5.db")
        started = time.perf_counter()
        texts = SyntheticText(seed=0).sentences(size, np.random.default_rng(size))
        documents = [document_tokens(text) for text in texts]
        print(f"{size:,} memories tokenized in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        meta = {"size": size, "build_s": {}}
    built: list[Engine] = []
    out: dict[str, Any] = {}
    for name in engines:
        engine: Engine = fts5 if name == "fts5" else make_engine(name, folder, fts5)
        rss_before = rss_mb()
        kept = reuse and name in _KEPT and name in meta["build_s"]
        started = time.perf_counter()
        if not kept:
            print(f"{size:,} memories: building {name}", file=sys.stderr)
            engine.build(documents)
            meta["build_s"][name] = round(time.perf_counter() - started, 3)
        out[name] = {
            "build_s": meta["build_s"][name],
            "build_reused": kept,
            "memory_mb": engine.memory_mb(),
            "rss_growth_mb": round(rss_mb() - rss_before, 1),
        }
        built.append(engine)
    meta_path.write_text(json.dumps(meta))
    texts = SyntheticText(seed=0).queries(queries + _WARMUP, np.random.default_rng(7))
    timing = _time_queries(built, [query_terms(text) for text in texts], top_k, size)
    for name, values in timing.items():
        out[name] |= values
    changes = _time_changes(built, size)
    for name, values in changes.items():
        out[name] |= values
    for engine in built:
        engine.close()
    return {"memories": size, "queries": queries, "top_k": top_k, "load_average_1m": _load(), "engines": out}


def _time_queries(built: list[Engine], queries: list[list[str]], top_k: int, size: int) -> dict[str, dict[str, Any]]:
    """Each query through every engine, the engines in turn (their order rotates query by query)."""
    seconds: dict[str, list[float]] = {engine.name: [] for engine in built}
    overlap: dict[str, list[float]] = {engine.name: [] for engine in built}
    same: dict[str, int] = {engine.name: 0 for engine in built}
    progress = Progress(f"{size:,} memories: queries", len(queries), unit="queries")
    for index, terms in enumerate(queries):
        results = {}
        shift = index % len(built)
        for engine in built[shift:] + built[:shift]:
            started = time.perf_counter()
            results[engine.name] = engine.search(terms, top_k)
            if index >= _WARMUP:
                seconds[engine.name].append(time.perf_counter() - started)
        reference = [row for row, _ in results["fts5"]]
        for name, hits in results.items():
            rows = [row for row, _ in hits]
            if reference:
                overlap[name].append(len(set(rows) & set(reference)) / len(reference))
            same[name] += rows == reference
        progress.advance()
    progress.close()
    return {
        name: {
            "query_ms": percentiles_ms(values),
            f"top{top_k}_overlap_with_fts5": round(statistics.fmean(overlap[name]), 4) if overlap[name] else None,
            f"top{top_k}_identical_to_fts5": round(same[name] / len(queries), 4),
        }
        for name, values in seconds.items()
    }


def _time_changes(built: list[Engine], size: int) -> dict[str, dict[str, Any]]:
    """One new memory made searchable, then deleted, `_CHANGES` times per engine (median ms)."""
    texts = SyntheticText(seed=0).sentences(_CHANGES, np.random.default_rng(size + 1))
    out: dict[str, dict[str, Any]] = {}
    for engine in built:
        rounds = 1 if engine.name == "bm25s" else _CHANGES
        inserts, deletes = [], []
        for number in range(rounds):
            tokens = document_tokens(texts[number])
            row = size + 1 + number
            inserts.append(engine.insert(row, tokens))
            if row not in [hit for hit, _ in engine.search(tokens[:1], 10**9)]:
                raise SystemExit(f"{engine.name}: an inserted memory is not found")
            deletes.append(engine.delete(row))
        out[engine.name] = {
            "insert_ms": round(statistics.median(inserts) * 1000, 3),
            "delete_ms": round(statistics.median(deletes) * 1000, 3),
            "changes_timed": rounds,
        }
    return out


def _engines(names: Sequence[str], folder: Path) -> list[Engine]:
    folder.mkdir(parents=True, exist_ok=True)
    fts5 = Fts5(folder / "fts5.db")
    return [fts5 if name == "fts5" else make_engine(name, folder, fts5) for name in names]


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _print(result: dict[str, Any]) -> None:
    if "locomo" in result:
        print(f"\nLoCoMo: {result['locomo']['questions']} questions, top 10 of each engine against FTS5's")
        rows = [
            [name, values["top10_overlap_with_fts5"], values["top10_identical_to_fts5"], values["recall_at_10"]["all"]]
            for name, values in result["locomo"]["engines"].items()
        ]
        print_table(["engine", "overlap", "identical", "recall@10"], rows)
    for size, case in result["sizes"].items():
        top = case["top_k"]
        print(f"\n{int(size):,} memories, top {top} (ms unless marked)")
        rows = [
            [
                name,
                values["query_ms"]["p50"],
                values["query_ms"]["p95"],
                values["build_s"],
                values["memory_mb"],
                values["insert_ms"],
                values["delete_ms"],
                values[f"top{top}_overlap_with_fts5"],
                values[f"top{top}_identical_to_fts5"],
            ]
            for name, values in case["engines"].items()
        ]
        print_table(["engine", "p50", "p95", "build s", "MB", "insert", "delete", "overlap", "identical"], rows)


if __name__ == "__main__":
    sys.exit(main())
