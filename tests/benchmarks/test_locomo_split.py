"""`benchmarks.locomo_split`: recall by the tuning and held-out splits, from a details file."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.locomo_split import main, recall, table_rows


def test_recall_by_split(tmp_path: Path, capsys: object) -> None:
    rows = [
        {"conversation": "conv-26", "category": 1, "evidence": ["D1:1", "D1:2"], "ranked": [["D1:1"], ["D9:9"]]},
        {"conversation": "conv-43", "category": 4, "evidence": ["D2:1"], "ranked": [["D9:9"]] * 10 + [["D2:1"]]},
        {"conversation": "conv-43", "category": 2, "evidence": [], "ranked": []},  # no usable evidence: skipped
    ]
    details = tmp_path / "details.jsonl"
    details.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert recall(rows[0], 1) == 0.5 and recall(rows[1], 10) == 0.0 and recall(rows[1], 11) == 1.0
    tuning, held_out, both = table_rows(str(details))
    assert "tuning" in tuning and "n=   1" in tuning and "r@10 0.500" in tuning and "c1@10 0.500" in tuning
    assert "held-out" in held_out and "n=   1" in held_out and "r@10 0.000" in held_out
    assert "n=   2" in both and "r@10 0.250" in both
    assert main([]) == 2 and main([str(details)]) == 0
