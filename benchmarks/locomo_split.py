"""LoCoMo recall by split, from `locomo_retrieval --details` files: the tuning split (the first
four conversations, the only ones a change may be tuned on) and the held-out split (the other
three), for an ablation table.

    python -m benchmarks.locomo_split /tmp/base_details.jsonl /tmp/stemmer_details.jsonl
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

TUNING = frozenset({"conv-26", "conv-30", "conv-41", "conv-42"})
SPLITS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("tuning", lambda name: name in TUNING),
    ("held-out", lambda name: name not in TUNING),
    ("all", lambda name: True),
)


def recall(row: dict[str, Any], k: int) -> float:
    """The share of a question's evidence turns among its top `k` (as `locomo_retrieval` counts)."""
    found = {dia_id for ids in row["ranked"][:k] for dia_id in ids}
    return sum(1 for dia_id in row["evidence"] if dia_id in found) / len(row["evidence"])


def table_rows(path: str) -> list[str]:
    with open(path, encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    out = []
    for split, keep in SPLITS:
        part = [row for row in rows if keep(row["conversation"]) and row["evidence"]]
        cells = [f"r@{k} {_mean([recall(row, k) for row in part]):.3f}" for k in (5, 10)]
        for category in (1, 2, 3, 4):
            cells.append(f"c{category}@10 {_mean([recall(r, 10) for r in part if r['category'] == category]):.3f}")
        out.append(f"{path.rsplit('/', 1)[-1]:28} {split:9} n={len(part):4}  " + "  ".join(cells))
    return out


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def main(paths: Sequence[str]) -> int:
    if not paths:
        print("usage: python -m benchmarks.locomo_split DETAILS.jsonl [DETAILS.jsonl ...]", file=sys.stderr)
        return 2
    for path in paths:
        print("\n".join(table_rows(path)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
