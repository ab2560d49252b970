"""The report of `benchmarks.locomo_qa`: its JSON, built from the records of the details file,
and the printed table.

Scores in the JSON are fractions (0-1); the table shows them in percent, as papers quote them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from benchmarks._common import print_table
from benchmarks._qa_ingest import USAGE_FIELDS
from benchmarks._qa_metrics import CORRECT, spread

__all__ = ["ANCHORS", "CATEGORIES", "CATEGORY_NAMES", "categories_table", "ingest_summary", "answering_summary", "print_report"]

CATEGORIES = (1, 2, 3, 4)  # 5 (adversarial) is skipped: its questions have no answer to score
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ANCHORS = {
    "J, full context (mem0 paper)": 72.9,
    "J, mem0 (mem0 paper)": 66.9,
    "J, Memobase": 75.8,
    "F1, MemoryOS (its paper), 4.9 LLM calls per turn": 36.2,
}


def categories_table(questions: Sequence[dict[str, Any]], judge_runs: int) -> dict[str, dict[str, Any]]:
    """Per category (`"1"`..`"4"`) and over all (`"all"`): count, mean F1, BLEU-1, J (mean and
    standard deviation of the per-run accuracies), unparseable judge replies, memory tokens."""
    table: dict[str, dict[str, Any]] = {}
    for label in [*map(str, CATEGORIES), "all"]:
        chosen = [q for q in questions if label == "all" or str(q["category"]) == label]
        runs = [float(np.mean([q["judge"][run] == CORRECT for q in chosen])) for run in range(judge_runs) if chosen]
        j = spread(runs)
        table[label] = {
            "name": CATEGORY_NAMES[int(label)] if label != "all" else "categories 1-4",
            "count": len(chosen),
            "f1": _mean(q["f1"] for q in chosen),
            "bleu1": _mean(q["bleu1"] for q in chosen),
            "j_mean": j["mean"],
            "j_std": j["std"],
            "j_runs": [round(value, 4) for value in runs],
            "judge_unparseable": sum(q["judge_unparseable"] for q in chosen),
            "memory_tokens_per_question": _mean((q["memory_tokens"] for q in chosen), digits=1),
            "memories_per_question": _mean((q["memories"] for q in chosen), digits=2),
        }
    return table


def ingest_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """LLM calls and tokens of ingest (backend operations included), in all and per turn."""
    turns = sum(r["turns"] for r in records)
    llm = {field: sum(r["llm"][field] for r in records) for field in USAGE_FIELDS}
    runs: dict[str, int] = {}
    errors: dict[str, int] = {}
    for record in records:
        for name, count in record["backend_runs"].items():
            runs[name] = runs.get(name, 0) + count
        for name, count in record["backend_errors"].items():
            errors[name] = errors.get(name, 0) + count
    seconds = sum(r["seconds"] for r in records)
    return {
        "conversations": len(records),
        "turns": turns,
        "llm_calls": llm["calls"],
        "llm_errors": llm["errors"],
        "prompt_tokens": llm["prompt_tokens"],
        "completion_tokens": llm["completion_tokens"],
        "llm_calls_per_turn": _ratio(llm["calls"], turns, 4),
        "prompt_tokens_per_turn": _ratio(llm["prompt_tokens"], turns, 1),
        "completion_tokens_per_turn": _ratio(llm["completion_tokens"], turns, 1),
        "backend_runs": runs,
        "backend_errors": errors,
        "seconds": round(seconds, 2),
        "turns_per_s": _ratio(turns, seconds, 2),
    }


def answering_summary(records: Sequence[dict[str, Any]], judge_runs: int) -> dict[str, Any]:
    """Calls and tokens of answering, judging and retrieval's own LLM steps, per question; from the
    answering segments whose counts were recorded (`questions_counted`: a run stopped midway
    keeps its answers but loses the counts of its last segment)."""
    counted = sum(r["questions"] for r in records)
    summary: dict[str, Any] = {"questions_counted": counted}
    for part in ("answer", "judge", "retrieval"):
        usage = {field: sum(r[part][field] for r in records) for field in USAGE_FIELDS}
        per = counted * judge_runs if part == "judge" else counted
        unit = "judgement" if part == "judge" else "question"
        summary[part] = {
            **usage,
            f"calls_per_{unit}": _ratio(usage["calls"], per, 3),
            f"prompt_tokens_per_{unit}": _ratio(usage["prompt_tokens"], per, 1),
            f"completion_tokens_per_{unit}": _ratio(usage["completion_tokens"], per, 1),
        }
    return summary


def print_report(result: dict[str, Any]) -> None:
    answer, judge = result["answer_model"], result["judge_model"]
    print(
        f"\nLoCoMo question answering — config {result['config']}, {result['conversations']} conversations, "
        f"top_k {result['top_k']}, answer model {answer['model']}, judge {judge['model']} × {result['judge_runs']} runs"
    )
    rows = []
    for label, row in result["categories"].items():
        name = f"{label} {row['name']}" if label != "all" else "all (1-4)"
        j = "" if row["j_mean"] is None else f"{100 * row['j_mean']:.1f} ± {100 * row['j_std']:.1f}"
        tokens = "" if row["memory_tokens_per_question"] is None else f"{row['memory_tokens_per_question']:.0f}"
        rows.append([name, row["count"], _percent(row["f1"]), _percent(row["bleu1"]), j, tokens])
    print_table(["category", "questions", "F1", "BLEU-1", "J (mean ± std)", "memory tokens/q"], rows)
    ingest, answering = result["ingest"], result["answering"]
    print(
        f"\ningest: {ingest['turns']} turns, {ingest['llm_calls_per_turn']} LLM calls and "
        f"{ingest['prompt_tokens_per_turn']} prompt tokens per turn (backend runs {ingest['backend_runs']}); "
        f"answering: {answering['answer']['calls_per_question']} calls and "
        f"{answering['answer']['prompt_tokens_per_question']} prompt tokens per question; "
        f"judge replies unparseable: {result['categories']['all']['judge_unparseable']}"
    )


def _mean(values: Iterable[float], digits: int = 4) -> float | None:
    listed = list(values)
    return round(float(np.mean(listed)), digits) if listed else None


def _ratio(numerator: float, denominator: float, digits: int) -> float | None:
    return round(numerator / denominator, digits) if denominator else None


def _percent(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.1f}"
