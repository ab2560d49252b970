"""`python -m benchmarks.serve_load --quick`: a real `memoryscope serve` (one worker) and the fake
LLM as subprocesses, a handful of users and clients, a 300-memory store for the retrieve
comparison. Checks the JSON's shape, that every request succeeded and that no answer named
another user. Speed is the benchmark's business: no timing is asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a server process under load; `-m "not slow"` leaves it out

pytest.importorskip("fastapi", reason="the serving benchmark needs the server extra: pip install 'memoryscope[server]'")

REPO = Path(__file__).resolve().parents[2]
ENDPOINTS = {"store", "search", "chat"}


def _percentiles(values: dict[str, float]) -> None:
    assert set(values) == {"p50", "p95", "p99"}
    assert 0 < values["p50"] <= values["p95"] <= values["p99"]


def test_serve_load_quick_run_has_no_errors_and_no_cross_user_answers(tmp_path: Path) -> None:
    out = tmp_path / "serve_load.json"
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.serve_load", "--quick", "--requests", "40", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert completed.returncode == 0, f"{completed.stdout}\n{completed.stderr}"
    result = json.loads(out.read_text(encoding="utf-8"))

    assert list(result["runs"]) == ["1"]
    run = result["runs"]["1"]
    assert run["workers"] == 1
    assert run["requests_timed"] == 40 and run["stopped_by"] == "requests"
    assert run["errors"] == 0, run["errors_by_kind"]
    assert run["cross_user_responses"] == 0
    assert run["requests_per_s"] > 0
    assert set(run["endpoints"]) == ENDPOINTS
    assert sum(endpoint["requests"] for endpoint in run["endpoints"].values()) == 40
    for endpoint in run["endpoints"].values():
        assert endpoint["errors"] == 0
        if endpoint["requests"]:
            _percentiles(endpoint["latency_ms"])
    searched = run["endpoints"]["search"]
    assert searched["answers_with_own_memories"] == searched["requests"]  # every user's own token comes back
    assert run["server_log"]["errors"] == 0 and run["server_log"]["database_locked"] == 0
    assert set(run["cpu_seconds"]) == {"server", "client", "wall"}

    at_size = result["retrieve_10k"]
    assert at_size["user_memories"] == 300 and at_size["queries_timed"] == 20
    for key in ("http_ms", "in_process_ms", "in_process_search_api_ms", "http_healthz_ms", "query_embedding_ms"):
        _percentiles(at_size[key])
    assert set(at_size["route_pieces_ms"]) == {"user_count", "serialize"}
    for piece in at_size["route_pieces_ms"].values():
        _percentiles(piece)
    assert at_size["in_process_embedding_calls"] == 0  # the in-process side is given the query vector
    assert at_size["memories_returned_p50"] == {"http": at_size["top_k"], "in_process": at_size["top_k"]}
    assert at_size["p95_difference_ms"] == round(at_size["http_ms"]["p95"] - at_size["in_process_ms"]["p95"], 3)
    assert isinstance(at_size["meets_target"], bool) and at_size["target_ms"] == 3.0
