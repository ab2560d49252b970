"""Ingest throughput: turns per second through `read_message`, against the embedding model alone.

    python -m benchmarks.ingest --out FILE.json [--config NAME|PATH] [--data DIR] [--turns 640] [--batch 64] [--repeats 3]

Four measurements over the same texts and the same batches, taking turns batch by batch in a
rotating order (so drift on a shared machine hits them alike), medians of the rounds reported:
- `ingest_turns_per_s`: the `read_message` operation into a fresh store with the config's
  embedding model (passage embedding + store write + workflow);
- `ingest_without_embedding_turns_per_s`: the same with a near-zero-cost embedding model
  (`_hash_embedding.HashEmbedding`), i.e. what the store and the workflow cost alone;
- `embedding_passages_per_s`: the config's embedding model embedding the same batches, bare;
- `embedding_as_stored_per_s`: the same, each text as `read_message` has it embedded (a chat
  message as a sentence about its speaker, `memoryscope.memory.embedding_text`: a few tokens more).
`ratio` = ingest / bare embedding; the target is >= 0.90 (the store must not be the bottleneck).
`ratio_as_stored` = ingest / embedding as stored: what the store and the workflow cost alone.

Texts: the turns of the LoCoMo files in `--data` (with image captions), else synthetic
made-up-word sentences (their words split into more sub-word tokens than real chat does).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import Progress, machine, print_table, run_stamp, write_json
from benchmarks._locomo import load_conversations
from benchmarks._synthetic import SyntheticText
from memoryscope.app import MemoryScope
from memoryscope.context import Message
from memoryscope.memory import embedding_text_of

__all__ = ["main"]

TARGET_RATIO = 0.90
_USER = "ingest-user"
_SPEAKER = "speaker"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    texts = _texts(args.data, args.turns)
    batches = [texts[i : i + args.batch] for i in range(0, len(texts), args.batch)]
    rounds: list[dict[str, float]] = []
    embedding_model = "unknown"
    progress = Progress("ingest", args.repeats * len(batches), "batches")
    as_stored = [[embedding_text_of(text, {"speaker": _SPEAKER}) for text in batch] for batch in batches]
    for round_index in range(args.repeats):
        with (
            tempfile.TemporaryDirectory(prefix="memoryscope-ingest-") as folder,
            MemoryScope(args.config, overrides={"memory_store.path": str(Path(folder) / "model.db")}) as scope,
        ):
            model = scope.store.embedding_model  # type: ignore[union-attr]  # every shipped store keeps its model
            embedding_model, dimension = model.model_name, int(model.dimension)
            hashed = {
                "memory_store.path": str(Path(folder) / "hash.db"),
                "model.embedding_model": {"class": "benchmarks._hash_embedding.HashEmbedding", "dimension": dimension},
            }
            with MemoryScope(args.config, overrides=hashed) as without_model:
                measured = _round(scope, without_model, model, batches, as_stored, round_index, progress)
        rounds.append({name: round(len(texts) / seconds, 2) for name, seconds in measured.items()})
    progress.close()

    ingest = statistics.median(r["ingest"] for r in rounds)
    bare = statistics.median(r["bare"] for r in rounds)
    without = statistics.median(r["no_embedding"] for r in rounds)
    as_stored_rate = statistics.median(r["as_stored"] for r in rounds)
    ratios = [r["ingest"] / r["bare"] for r in rounds]
    ratios_as_stored = [r["ingest"] / r["as_stored"] for r in rounds]
    result: dict[str, Any] = {
        "config": args.config,
        "embedding_model": embedding_model,
        "texts": "locomo turns" if args.data else "synthetic sentences",
        "turns": len(texts),
        "batch": args.batch,
        "repeats": args.repeats,
        "ingest_turns_per_s": ingest,
        "ingest_without_embedding_turns_per_s": without,
        "embedding_passages_per_s": bare,
        "embedding_as_stored_per_s": as_stored_rate,
        "ratio": round(statistics.median(ratios), 3),
        "ratio_as_stored": round(statistics.median(ratios_as_stored), 3),
        "target_ratio": TARGET_RATIO,
        "store_and_workflow_ms_per_turn": round(1000.0 / without, 3),
        "rounds": rounds,
        "date": run_stamp(),
        "machine": machine(),
    }
    result["meets_target"] = result["ratio"] >= TARGET_RATIO
    write_json(args.out, result)
    print(f"\ningest throughput — config {args.config} ({embedding_model}), {len(texts)} turns in batches of {args.batch}")
    print_table(
        ["measurement", "turns/s (median)"],
        [
            ["read_message, with embedding", ingest],
            ["read_message, embedding excluded", without],
            ["embedding model alone (bare batches)", bare],
            ["embedding model alone, texts as stored", as_stored_rate],
        ],
    )
    print(f"ratio ingest / bare embedding = {result['ratio']} (target >= {TARGET_RATIO})")
    print(f"ratio ingest / embedding of the texts as stored = {result['ratio_as_stored']}")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ingest", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="where to write the JSON result")
    parser.add_argument("--config", default="default", help="config name or YAML path (default: default)")
    parser.add_argument("--data", help="folder of LoCoMo JSON files to take turns from (default: synthetic text)")
    parser.add_argument("--turns", type=int, default=640, help="how many turns per measurement")
    parser.add_argument("--batch", type=int, default=64, help="messages per read_message call")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; medians are reported")
    return parser


def _texts(data: str | None, count: int) -> list[str]:
    if data:
        turns = [t.content for c in load_conversations(data) for t in c.turns if t.content.strip()]
        if len(turns) < count:
            print(f"note: only {len(turns)} turns in {data}", file=sys.stderr)
        return turns[:count]
    return SyntheticText().sentences(count, np.random.default_rng(0))


MEASUREMENTS = ("ingest", "bare", "as_stored", "no_embedding")


def _round(
    scope: MemoryScope,
    without_model: MemoryScope,
    model: Any,
    batches: Sequence[Sequence[str]],
    as_stored: Sequence[Sequence[str]],
    round_index: int,
    progress: Progress,
) -> dict[str, float]:
    """Seconds spent on each measurement over all batches. They take turns batch by batch, in an
    order that rotates from one batch to the next: the machine's speed drifts over seconds, and
    each measurement sees the same drift."""
    spent = dict.fromkeys(MEASUREMENTS, 0.0)
    for index, batch in enumerate(batches):
        messages = tuple(_messages(batch, round_index, first=index * len(batches[0])))
        steps: dict[str, Callable[[], object]] = {
            "ingest": partial(scope.default_service.run_operation, "read_message", _USER, messages=messages),
            "bare": partial(model.embed_passages, list(batch)),
            "as_stored": partial(model.embed_passages, list(as_stored[index])),
            "no_embedding": partial(without_model.default_service.run_operation, "read_message", _USER, messages=messages),
        }
        turn = index % len(MEASUREMENTS)
        for name in MEASUREMENTS[turn:] + MEASUREMENTS[:turn]:
            started = time.perf_counter()
            steps[name]()
            spent[name] += time.perf_counter() - started
        progress.advance()
    return spent


def _messages(batch: Sequence[str], round_index: int, first: int) -> list[Message]:
    """One batch's chat messages, a minute apart, with ids fresh in each round."""
    start = datetime(2024, 1, 1, 12, 0)
    return [
        Message("user", text, start + timedelta(minutes=number), _SPEAKER, f"r{round_index}-m{number}")
        for number, text in enumerate(batch, start=first)
    ]


if __name__ == "__main__":
    sys.exit(main())
