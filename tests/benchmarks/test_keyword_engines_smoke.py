"""`benchmarks.keyword_engines` runs end to end on a tiny LoCoMo-format file and a 400-memory
user, writes its JSON, and says what to install when tantivy or bm25s is missing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.test_benchmarks_smoke import CONVERSATION, REPO

pytestmark = pytest.mark.slow  # a benchmark command end to end

pytest.importorskip("tantivy", reason="benchmark extra: pip install -e .[bench]")
pytest.importorskip("bm25s", reason="benchmark extra: pip install -e .[bench]")


def test_every_engine_is_timed_and_the_store_ranks_as_fts5(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "tiny.json").write_text(json.dumps(CONVERSATION), encoding="utf-8")
    out = tmp_path / "engines.json"
    cache = tmp_path / "cache"
    command = [sys.executable, "-m", "benchmarks.keyword_engines", "--data", str(data), "--sizes", "400"]
    command += ["--queries", "20", "--cache", str(cache), "--out", str(out)]
    for _ in range(2):  # the second run reuses the FTS5 file and the tantivy index
        completed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert completed.returncode == 0, completed.stderr
    assert "reusing" in completed.stderr
    result = json.loads(out.read_text(encoding="utf-8"))
    locomo = result["locomo"]["engines"]
    assert result["locomo"]["questions"] == 3  # category 5 has no evidence to recall
    assert set(locomo) == {"fts5", "userwords", "tantivy", "bm25s"}
    assert locomo["userwords"]["top10_identical_to_fts5"] == 1.0 == locomo["fts5"]["top10_identical_to_fts5"]
    assert all(0.0 <= values["recall_at_10"]["all"] <= 1.0 for values in locomo.values())
    case = result["sizes"]["400"]["engines"]
    assert case["userwords"]["top166_identical_to_fts5"] == 1.0
    assert case["fts5"]["build_reused"] and case["tantivy"]["build_reused"]
    assert not case["userwords"]["build_reused"] and not case["bm25s"]["build_reused"]  # in memory: built every run
    for values in case.values():
        assert 0 < values["query_ms"]["p50"] <= values["query_ms"]["p95"]
        assert values["insert_ms"] > 0 and values["delete_ms"] > 0 and values["memory_mb"] >= 0
        assert 0.5 < values["top166_overlap_with_fts5"] <= 1.0


def test_a_missing_package_names_what_to_install(tmp_path: Path) -> None:
    """Run as if tantivy were not installed (a `None` in `sys.modules` hides a module from imports)."""
    script = (
        "import sys; sys.modules['tantivy'] = None; from benchmarks.keyword_engines import main; "
        f"main(['--sizes', '--out', {str(tmp_path / 'x.json')!r}])"
    )
    completed = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert completed.returncode != 0
    assert "tantivy not installed" in completed.stderr and "pip install -e .[bench]" in completed.stderr
    assert "--engines fts5 userwords bm25s" in completed.stderr
    assert not (tmp_path / "x.json").exists()
