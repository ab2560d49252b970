"""`python -m benchmarks.llm_cost` on a two-session conversation: counts come from the fake server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a benchmark run end to end; `-m "not slow"` leaves it out

REPO = Path(__file__).resolve().parents[2]
CONVERSATION = {
    "speaker_a": "Ann",
    "speaker_b": "Bo",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a grey kitten called Pebble last Saturday."},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "Congrats! I just started pottery classes."},
        {"speaker": "Ann", "dia_id": "D1:3", "text": "My work at the library keeps me busy."},
        {"speaker": "Bo", "dia_id": "D1:4", "text": "My bowl cracked in the kiln."},
    ],
    "qa": [],
}


def test_llm_cost_counts_calls_and_tokens_per_operation(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    turns = [dict(turn) for turn in CONVERSATION["session_1"]] * 3  # enough user messages to fire the triggers
    conversation = {**CONVERSATION, "session_1": [{**turn, "dia_id": f"D1:{i + 1}"} for i, turn in enumerate(turns)]}
    (data / "tiny.json").write_text(json.dumps(conversation), encoding="utf-8")
    out = tmp_path / "cost.json"
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.llm_cost", "--data", str(data), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["user_messages"] == 6
    consolidate = report["operations"]["consolidate_memory"]
    assert consolidate["runs"] >= 1
    assert consolidate["llm_calls"] >= consolidate["runs"]
    assert consolidate["prompt_tokens"] > 0
    assert consolidate["calls_per_message"] == round(consolidate["llm_calls"] / 6, 4)
    assert set(report["operations"]) == {"consolidate_memory", "reflect_and_reconsolidate"}
