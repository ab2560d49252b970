"""The `memoryscope` command, driven through its entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memoryscope.cli import main
from memoryscope.config import shipped_config_names


def test_check_config_passes_every_shipped_config(capsys: pytest.CaptureFixture[str]) -> None:
    names = shipped_config_names()
    assert main(["check-config", *names]) == 0
    out = capsys.readouterr().out
    assert all(f"ok   {name}" in out for name in names)


def test_check_config_reports_every_problem_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "extends: default\nglobal: {language: fr}\nworker:\n  semantic_rank: {class: semantic_rank, top_kk: 3}\n",
        encoding="utf-8",
    )
    assert main(["check-config", "default", str(broken)]) == 1
    captured = capsys.readouterr()
    assert "ok   default" in captured.out
    assert f"FAIL {broken}" in captured.err
    assert "global.language" in captured.err
    assert "worker.semantic_rank.top_kk: unknown key. Did you mean 'top_k'?" in captured.err


def test_errors_are_one_clear_line_without_traceback(tmp_path: Path) -> None:
    unwritable = tmp_path / "file"
    unwritable.write_text("x", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "memoryscope.cli", "run", "add_memory", "--text", "x", "--config", "default"],
        capture_output=True,
        text=True,
        env={"MEMORYSCOPE_STORE_PATH": str(unwritable / "sub" / "m.db"), "PATH": "/usr/bin:/bin"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 3  # the store failed (not a misuse, 2): the door's table of failures
    assert done.stderr.startswith("error: ")
    assert "Traceback" not in done.stderr
    assert str(unwritable / "sub") in done.stderr


def test_run_add_list_and_retrieve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MEMORYSCOPE_STORE_PATH", str(tmp_path / "m.db"))
    assert main(["run", "add_memory", "--user", "ann", "--text", "Ann plays the cello in an orchestra"]) == 0
    assert main(["run", "add_memory", "--user", "bob", "--text", "Bob collects stamps"]) == 0
    capsys.readouterr()
    assert main(["run", "retrieve_memory", "--user", "ann", "--query", "which instrument does she play?"]) == 0
    out = capsys.readouterr().out
    assert "cello" in out
    assert "stamps" not in out
    assert main(["run", "list_memory", "--user", "bob"]) == 0
    assert "Bob collects stamps" in capsys.readouterr().out
