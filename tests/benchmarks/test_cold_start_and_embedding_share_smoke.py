"""`benchmarks.cold_start` and `benchmarks.locomo_retrieval --embedding-share` run end to end on
tiny inputs and write their JSON. Numbers are checked for shape and range only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.test_benchmarks_smoke import CONVERSATION

pytestmark = pytest.mark.slow  # benchmarks run end to end; `-m "not slow"` leaves them out

REPO = Path(__file__).resolve().parents[2]


def _run(module: str, *args: str) -> str:
    """Run the benchmark as its command line; its stderr."""
    completed = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    if completed.returncode != 0:
        pytest.fail(f"benchmarks.{module} failed ({completed.returncode}):\n{completed.stdout}\n{completed.stderr}")
    return completed.stderr


def test_embedding_share_times_the_bare_query_call_beside_each_retrieve(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "tiny.json").write_text(json.dumps(CONVERSATION), encoding="utf-8")
    out = tmp_path / "locomo.json"
    _run("locomo_retrieval", "--data", str(data), "--no-baselines", "--embedding-share", "--out", str(out))
    share = json.loads(out.read_text(encoding="utf-8"))["embedding_share"]
    bare, whole = share["bare_query_embedding_ms"], share["retrieve_ms"]
    assert 0 < bare["p50"] <= bare["p95"] and 0 < whole["p50"] <= whole["p95"]
    assert share["ratio_p50"] == round(whole["p50"] / bare["p50"], 3)
    assert share["ratio_p95"] == round(whole["p95"] / bare["p95"], 3)


def test_cold_start_fills_once_then_times_each_server_start(tmp_path: Path) -> None:
    folder, first, second = tmp_path / "store", tmp_path / "first.json", tmp_path / "second.json"
    assert "cold_start: insert" in _run(
        "cold_start", "--size", "200", "--folder", str(folder), "--runs", "1", "--out", str(first)
    )
    # compiled modules kept apart from the sources (cached, the default), as an installed package keeps them
    assert any((folder / "pycache").rglob("app.*.pyc"))
    # the store is kept: a second run only starts servers
    assert "insert" not in _run(
        "cold_start", "--size", "200", "--folder", str(folder), "--runs", "1", "--out", str(second), "--bytecode", "none"
    )
    for out, bytecode in ((first, "cached"), (second, "none")):
        result = json.loads(out.read_text(encoding="utf-8"))
        assert result["bytecode"] == bytecode
        [run] = result["runs"]
        assert 0 < run["healthz_s"] < run["first_search_s"] and run["memories"] == 10
        assert 0 < run["healthz_cpu_s"] <= run["first_search_cpu_s"]
        assert result["first_search_s_median"] == run["first_search_s"] and result["met"] == (run["first_search_s"] <= 2.0)
        assert result["size"] == 200
