"""Scores a caller can threshold (BENCHMARKS.md §8), through the door's `search` on LoCoMo.

    python -m benchmarks.locomo_scores --data DIR [--config NAME|PATH] [--store FILE] \
        [--thresholds 0.3 0.5] --out FILE.json

Every turn is ingested as `benchmarks.locomo_retrieval` does (`--store FILE` reuses a store that
run or this one filled). Each question of categories 1-4 is then searched through
`MemoryScope.search` (the door's verb every face uses) with `top_k` 25, and reported:

- `auc`: among one question's results, the share of (evidence turn, non-evidence turn) pairs
  whose evidence scores higher (ties count half), averaged over the questions that have both
  (`per_question`); and over all such pairs of all questions together (`pooled`: what one fixed
  threshold for every query needs);
- `lone_hit`: the score of an evidence turn stored alone for a user of its own (one per question,
  `--lone` questions), whose search finds only it: it must not be 0;
- `unrelated_top`: the best score an off-topic query (`OFF_TOPIC`, nothing from LoCoMo) gets from
  each conversation;
- `recall@10` without a threshold and with each of `--thresholds` (results below it dropped).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import Progress, config_overrides, machine, print_table, run_stamp, write_json
from benchmarks._locomo import Conversation, load_conversations
from benchmarks.locomo_retrieval import CATEGORIES, _holds, _ingest, _TurnLookup, _user
from memoryscope import MemoryScope

__all__ = ["main", "pair_auc"]

TOP_K = 25
# Queries about nothing a chat between friends is about.
OFF_TOPIC = (
    "How do I configure a Kubernetes ingress controller?",
    "What is the boiling point of mercury?",
    "Which torque wrench fits a car's wheel nuts?",
    "When is the quarterly tax filing deadline for corporations?",
)


def pair_auc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """The share of (positive, negative) pairs ordered rightly, ties half; None without pairs."""
    if not positives or not negatives:
        return None
    pos = np.asarray(positives, dtype=float)[:, None]
    neg = np.asarray(negatives, dtype=float)[None, :]
    return float(((pos > neg).sum() + 0.5 * (pos == neg).sum()) / (pos.size * neg.size))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    conversations = load_conversations(args.data)
    with tempfile.TemporaryDirectory(prefix="memoryscope-scores-") as folder:
        path = Path(args.store) if args.store else Path(folder) / "memories.db"
        overrides = {**config_overrides(args.overrides), "memory_store.path": str(path), "global.output_memory_max_count": TOP_K}
        with MemoryScope(args.config, overrides=overrides) as scope:
            if not _holds(scope, conversations):
                _ingest(scope, conversations)
            result = _measure(scope, conversations, args.thresholds, args.lone)
    result.update({"config": args.config, "overrides": args.overrides, "date": run_stamp(), "machine": machine()})
    write_json(args.out, result)
    _print(result)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _measure(scope: MemoryScope, conversations: Sequence[Conversation], thresholds: Sequence[float], lone: int) -> dict[str, Any]:
    asked = [(c, q) for c in conversations for q in c.questions if q.category in CATEGORIES]
    lookups = {c.name: _TurnLookup(c) for c in conversations}
    per_question: list[float] = []
    positives: list[float] = []
    negatives: list[float] = []
    recall: dict[str, list[float]] = {"none": [], **{str(t): [] for t in thresholds}}
    progress = Progress("search", len(asked), "questions")
    for conversation, question in asked:
        hits = scope.search(question.text, user_id=_user(conversation), top_k=TOP_K, query_time=conversation.last_session_time)
        lookup = lookups[conversation.name]
        nodes = {node.memory_id: node for node in scope.store.get([hit.id for hit in hits])}
        turns = [lookup.dia_ids(nodes[hit.id]) for hit in hits]
        is_evidence = [any(dia_id in question.evidence for dia_id in ids) for ids in turns]
        scores = [float(hit.score or 0.0) for hit in hits]
        mine = [s for s, e in zip(scores, is_evidence, strict=True) if e]
        others = [s for s, e in zip(scores, is_evidence, strict=True) if not e]
        auc = pair_auc(mine, others)
        if auc is not None:
            per_question.append(auc)
        positives += mine
        negatives += others
        recall["none"].append(_recall(question.evidence, turns[:10]))
        for threshold in thresholds:
            kept = [ids for ids, score in zip(turns[:10], scores[:10], strict=True) if score >= threshold]
            recall[str(threshold)].append(_recall(question.evidence, kept))
        progress.advance()
    progress.close()
    return {
        "questions": len(asked),
        "auc": {"per_question": _round(np.mean(per_question)), "questions_with_pairs": len(per_question),
                "pooled": _round(pair_auc(positives, negatives))},
        "score_median": {"evidence": _round(np.median(positives)), "non_evidence": _round(np.median(negatives))},
        "lone_hit": _lone_hits(scope, asked[:: max(1, len(asked) // lone)][:lone]),
        "unrelated_top": _off_topic(scope, conversations),
        "recall@10": {name: _round(np.mean(values)) for name, values in recall.items()},
    }  # fmt: skip


def _lone_hits(scope: MemoryScope, sample: Sequence[tuple[Conversation, Any]]) -> dict[str, Any]:
    """Each question's first evidence turn stored alone for a user of its own, then searched."""
    scores: list[float] = []
    for index, (conversation, question) in enumerate(sample):
        turn = next(t for t in conversation.turns if t.dia_id == question.evidence[0])
        user = f"lone-hit-{index}"
        scope.delete_all(user_id=user)
        scope.add(turn.content, user_id=user, infer=False)
        hits = scope.search(question.text, user_id=user, top_k=5)
        scores.append(float(hits[0].score or 0.0) if hits else 0.0)
        scope.delete_all(user_id=user)
    return {"questions": len(scores), "median": _round(np.median(scores)), "min": _round(min(scores, default=0.0)),
            "zero": sum(1 for score in scores if score == 0.0)}  # fmt: skip


def _off_topic(scope: MemoryScope, conversations: Sequence[Conversation]) -> dict[str, Any]:
    tops = [
        float(hits[0].score or 0.0)
        for conversation in conversations
        for query in OFF_TOPIC
        if (hits := scope.search(query, user_id=_user(conversation), top_k=1, query_time=conversation.last_session_time))
    ]
    return {"queries": len(tops), "median": _round(np.median(tops)), "max": _round(max(tops, default=0.0))}


def _recall(evidence: Sequence[str], ranked: Sequence[Sequence[str]]) -> float:
    found = {dia_id for ids in ranked for dia_id in ids}
    return sum(1 for dia_id in evidence if dia_id in found) / len(evidence)


def _round(value: Any) -> float | None:
    return None if value is None or not np.isfinite(value) else round(float(value), 4)


def _print(result: dict[str, Any]) -> None:
    auc, lone, off = result["auc"], result["lone_hit"], result["unrelated_top"]
    rows = [
        ["AUC per question (evidence over non-evidence)", auc["per_question"]],
        ["AUC pooled over all questions", auc["pooled"]],
        ["median score: evidence / non-evidence", "{evidence} / {non_evidence}".format(**result["score_median"])],
        [f"lone hit: median (min, zeros) of {lone['questions']}", f"{lone['median']} ({lone['min']}, {lone['zero']})"],
        [f"off-topic query's best hit: median / max of {off['queries']}", f"{off['median']} / {off['max']}"],
        *([f"recall@10, threshold {name}", value] for name, value in result["recall@10"].items()),
    ]  # fmt: skip
    print_table(["scores", "value"], rows)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.locomo_scores", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="folder of LoCoMo JSON files (any names)")
    parser.add_argument("--config", default="default", help="config name or YAML path (default: default)")
    parser.add_argument("--store", help="keep the store in this file (a store filled before is reused)")
    parser.add_argument("--thresholds", type=float, nargs="*", default=[0.3, 0.5], help="recall@10, results below each dropped")
    parser.add_argument("--lone", type=int, default=50, help="questions whose evidence is stored alone (default 50)")
    parser.add_argument("--out", required=True, help="where to write the JSON result")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="change one config key")
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
