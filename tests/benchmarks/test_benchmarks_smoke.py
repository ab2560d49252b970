"""The benchmark commands run end to end on tiny inputs and write their JSON contracts.

Each runs as the real command line (`python -m benchmarks.NAME` from the repository root), on a
two-session LoCoMo-format file or a 200-memory store, in a few seconds. Numbers are only checked
for shape and range: speed is measured by the benchmarks themselves, never asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # benchmark commands run end to end; `-m "not slow"` leaves it out

REPO = Path(__file__).resolve().parents[2]

CONVERSATION: dict[str, Any] = {
    "speaker_a": "Ann",
    "speaker_b": "Bo",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo! I adopted a grey kitten called Pebble last Saturday."},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "Congrats! I just started pottery classes downtown."},
        {
            "speaker": "Ann",
            "dia_id": "D1:3",
            "text": "Look at this",
            "img_url": ["x"],
            "blip_caption": "a photo of a kitten on a sofa",
        },
        {"speaker": "Bo", "dia_id": "D1:4", "text": "So cute. My bowl cracked in the kiln though."},
    ],
    "session_2_date_time": "10:37 am on 27 June, 2023",
    "session_2": [
        {"speaker": "Bo", "dia_id": "D2:1", "text": "I finished my first vase at pottery class yesterday!"},
        {"speaker": "Ann", "dia_id": "D2:2", "text": "Wonderful. Pebble learned to open the kitchen door."},
        {"speaker": "Bo", "dia_id": "D2:3", "text": "Ha, clever cat. Are you still running on Sundays?"},
    ],
    # dates of sessions without turns appear in real files: they must not move the query time
    "session_3_date_time": "9:00 am on 1 January, 2030",
    "qa": [
        {"question": "What is the name of Ann's kitten?", "answer": "Pebble", "evidence": ["D1:1"], "category": 4},
        {"question": "When did Bo finish a vase?", "answer": "26 June 2023", "evidence": ["D2:1"], "category": 2},
        # malformed evidence as found in LoCoMo: two ids in one string, and a stray "D"
        {"question": "What does Bo make?", "answer": "bowl, vase", "evidence": ["D1:4; D2:1", "D"], "category": 1},
        {"question": "What is Bo's dog called?", "adversarial_answer": "Rex", "evidence": [], "category": 5},
    ],
}


CONTRACT_KEYS = {"config", "embedding_model", "conversations", "questions", "recall", "latency_ms", "ingest_turns_per_s"}


def _run(module: str, *args: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    if completed.returncode != 0:
        pytest.fail(f"benchmarks.{module} failed ({completed.returncode}):\n{completed.stdout}\n{completed.stderr}")


def _percentiles(values: dict[str, float]) -> None:
    assert set(values) >= {"p50", "p95"}
    assert 0 < values["p50"] <= values["p95"]


def test_locomo_retrieval_writes_its_contract(tmp_path: Path) -> None:
    """Recall is complete at k=25 on 7 turns, so turns map back to their dia_ids, malformed ones too."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "tiny.json").write_text(json.dumps(CONVERSATION), encoding="utf-8")
    out = tmp_path / "locomo.json"
    _run("locomo_retrieval", "--data", str(data), "--k", "5", "10", "25", "--out", str(out))
    result = json.loads(out.read_text(encoding="utf-8"))
    assert set(result) >= CONTRACT_KEYS
    assert (result["conversations"], result["questions"]) == (1, 3)
    assert set(result["recall"]) == {"5", "10", "25"}
    for row in result["recall"].values():
        assert set(row) == {"all", "1", "2", "3", "4"}
        assert row["3"] is None  # no open-domain question in the file
        assert all(0.0 <= row[key] <= 1.0 for key in ("all", "1", "2", "4"))
    assert result["recall"]["25"]["all"] == 1.0
    assert result["recall"]["5"]["all"] <= result["recall"]["10"]["all"] <= result["recall"]["25"]["all"]
    _percentiles(result["latency_ms"])
    assert result["ingest_turns_per_s"] > 0
    assert result["checks"]["retrieved_memories_not_mapped_to_a_turn"] == 0
    assert set(result["baselines"]) == {"bm25", "dense", "rrf"}
    assert result["baselines"]["dense"]["recall"]["25"]["all"] == 1.0  # dense ranks every turn


def test_locomo_scores_writes_its_result(tmp_path: Path) -> None:
    """The door's scores on a tiny conversation: every figure present and in range, a lone hit not 0."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "tiny.json").write_text(json.dumps(CONVERSATION), encoding="utf-8")
    out = tmp_path / "scores.json"
    _run("locomo_scores", "--data", str(data), "--lone", "3", "--thresholds", "0.5", "--out", str(out))
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["questions"] == 3
    assert 0.5 < result["auc"]["per_question"] <= 1.0
    assert result["lone_hit"]["questions"] == 3 and result["lone_hit"]["zero"] == 0 and result["lone_hit"]["min"] > 0
    assert result["unrelated_top"]["queries"] == 4 and 0.0 <= result["unrelated_top"]["max"] < 1.0
    assert set(result["recall@10"]) == {"none", "0.5"}
    assert result["recall@10"]["none"] == 1.0 >= result["recall@10"]["0.5"]


def test_locomo_retrieval_reuses_a_kept_store_and_takes_config_changes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "tiny.json").write_text(json.dumps(CONVERSATION), encoding="utf-8")
    store, first, second = tmp_path / "kept.db", tmp_path / "first.json", tmp_path / "second.json"
    common = ("--data", str(data), "--no-baselines", "--store", str(store))
    _run("locomo_retrieval", *common, "--out", str(first))
    # keyword search only: the questions still find their turns, without the stored vectors
    _run("locomo_retrieval", *common, "--out", str(second), "--set", "worker.retrieve_obs_ins.search_mode=keyword")
    made, reused = (json.loads(path.read_text(encoding="utf-8")) for path in (first, second))
    assert (made["store_reused"], reused["store_reused"]) == (False, True)
    assert made["ingest_turns_per_s"] > 0 and reused["ingest_turns_per_s"] is None
    assert reused["overrides"] == ["worker.retrieve_obs_ins.search_mode=keyword"]
    assert reused["checks"]["retrieved_memories_not_mapped_to_a_turn"] == 0
    assert 0 < reused["recall"]["25"]["all"] <= 1.0
    sideways = ("--out", str(second), "--set", "worker.retrieve_obs_ins.search_mode=sideways")
    refused = subprocess.run(
        [sys.executable, "-m", "benchmarks.locomo_retrieval", *common, *sideways],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert refused.returncode != 0 and "worker.retrieve_obs_ins.search_mode" in refused.stderr


def test_scale_writes_its_contract(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    _run(
        "scale", "--sizes", "200", "--queries", "20", "--out", str(out),
        "--crowd", "--crowd-total", "600", "--crowd-user-size", "200",
    )  # fmt: skip
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["config"] == "default"
    assert list(result["sizes"]) == ["200"]
    cases = [result["sizes"]["200"], result["crowd"]["alone"], result["crowd"]["crowded"]]
    for case in cases:
        assert {"store_search_ms", "retrieve_ms", "overhead_ratio", "insert_per_s", "disk_mb", "rss_mb"} <= set(case)
        _percentiles(case["store_search_ms"])
        _percentiles(case["retrieve_ms"])
        assert case["overhead_ratio"] > 0 and case["insert_per_s"] > 0 and case["disk_mb"] > 0 and case["rss_mb"] > 0
        assert case["embedding_calls_during_timing"] == 0
        assert case["embedding_calls_during_fill"] == 0
        before, after = case["load_average_1m"]  # the machine's load beside the figures
        assert before >= 0 and after >= 0
    assert result["sizes"]["200"]["memories_of_user"] == 200
    assert result["crowd"]["crowded"]["memories_total"] == 600


def test_scale_measures_the_approximate_index_against_exact_search(tmp_path: Path) -> None:
    out = tmp_path / "scale-ann.json"
    _run("scale", "--sizes", "300", "--queries", "10", "--ann", "on", "--vectors", "clustered", "--out", str(out))
    result = json.loads(out.read_text(encoding="utf-8"))
    assert (result["ann"], result["vectors"]) == ("on", "clustered")
    ann = result["sizes"]["300"]["ann"]
    assert ann["setting"] == "on" and 0.9 <= ann["recall_at_50"] <= 1.0 and ann["recall_at_50_min"] <= ann["recall_at_50"]
    assert ann["build"]["build_s"] > 0 and ann["build"]["graph_mb"] > 0


def test_ingest_writes_its_result(tmp_path: Path) -> None:
    out = tmp_path / "ingest.json"
    _run("ingest", "--turns", "16", "--batch", "8", "--repeats", "1", "--out", str(out))
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["turns"] == 16
    rates = ("ingest_turns_per_s", "ingest_without_embedding_turns_per_s", "embedding_passages_per_s")
    rates += ("embedding_as_stored_per_s",)
    for key in (*rates, "ratio", "ratio_as_stored"):
        assert result[key] > 0
    # with the model's time taken out, the ingest path must be faster than with it
    assert result["ingest_without_embedding_turns_per_s"] > result["ingest_turns_per_s"]


def test_retrieve_loop_fills_a_store_then_retrieves_from_it(tmp_path: Path) -> None:
    store = tmp_path / "loop.db"
    _run("retrieve_loop", "--store", str(store), "--size", "200", "--fill")
    assert store.exists()
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.retrieve_loop", "--store", str(store), "--queries", "3"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    said = completed.stderr.strip().splitlines()[-1]  # "3 retrieves, N memories returned"
    assert said.startswith("3 retrieves, ") and int(said.split()[2]) > 0
    refused = subprocess.run(
        [sys.executable, "-m", "benchmarks.retrieve_loop", "--store", str(store), "--fill"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert refused.returncode != 0 and "exists already" in refused.stderr  # never fills over a store


def test_rebuild_stall_times_a_small_user_in_quiet_and_rebuild_windows(tmp_path: Path) -> None:
    out = tmp_path / "rebuild.json"
    _run(
        "rebuild_stall", "--size", "300", "--rounds", "2", "--window", "0.2", "--interval-ms", "20",
        "--set", "memory_store.keyword_in_memory_from=100", "--out", str(out),
    )  # fmt: skip
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["large_user_memories"] == 300 and result["rounds"] == 2 and result["interval_ms"] == 20
    for window in ("quiet", "rebuild"):
        timed = result["small_user_retrieve_ms"][window]
        _percentiles(timed)
        assert timed["max"] >= timed["p95"] and timed["count"] >= 2 * 10  # due every 20 ms for 0.2 s, twice
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.rebuild_stall", "--size", "150", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert completed.returncode != 0 and "keyword_in_memory_from" in completed.stderr  # no lists below it (200): refused
