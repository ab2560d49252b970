"""`python -m benchmarks.fairness` on tiny inputs: a real `memoryscope serve` on `default`, a small
add while another user searches. Checks the JSON's shape and that the add's messages were stored
exactly once. Speed is the benchmark's business: no timing is asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a server process under load; `-m "not slow"` leaves it out

pytest.importorskip("fastapi", reason="the fairness benchmark needs the server extra: pip install 'memoryscope[server]'")

REPO = Path(__file__).resolve().parents[2]


def test_fairness_runs_and_stores_the_add_exactly_once(tmp_path: Path) -> None:
    out = tmp_path / "fairness.json"
    command = [sys.executable, "-m", "benchmarks.fairness", "--messages", "6", "--chars", "300", "--searches", "5"]
    completed = subprocess.run([*command, "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=240, check=False)
    assert completed.returncode == 0, f"{completed.stdout}\n{completed.stderr}"
    result = json.loads(out.read_text(encoding="utf-8"))["result"]
    assert result["add"]["status"] == 201 and result["messages"] == 6
    assert result["stored"] == {"messages": 6, "each_exactly_once": True, "missing": 0, "duplicated": 0}
    for figures in (result["idle_search_ms"], result["during_add_search_ms"]):
        assert 0 < figures["p50"] <= figures["p95"] <= figures["p99"] and figures["count"] >= 1
    assert result["target_ratio"] == 3.0 and isinstance(result["target_met"], bool)
    assert "p95 ratio" in completed.stderr
