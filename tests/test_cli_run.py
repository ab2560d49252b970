"""`memoryscope run` behaves: each memory once, JSON only with --json, misuse is a one-line error
with a non-zero exit, an unknown id fails, `--store`, `--version`, and `| head` ends quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memoryscope import __version__
from memoryscope.app import MemoryScope
from memoryscope.cli import main
from memoryscope.memory import MemoryNode

LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    path = str(tmp_path / "run.db")
    assert (
        main(["run", "add_memory", "--store", path, "--user", "ann", "--text", "Ann keeps bees", "--text", "Ann is vegetarian"])
        == 0
    )
    return path


def test_list_memory_shows_each_memory_once(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["run", "list_memory", "--store", store, "--user", "ann"]) == 0
    out = capsys.readouterr().out
    assert out.count("Ann keeps bees") == 1 and out.count("Ann is vegetarian") == 1


def test_json_output_is_json_only(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["run", "list_memory", "--store", store, "--user", "ann", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sorted(json.loads(line)["content"] for line in lines) == ["Ann is vegetarian", "Ann keeps bees"]


@pytest.mark.parametrize(
    ("operation", "needs"),
    [("add_memory", "--text TEXT"), ("delete_memory", "--id ID"), ("retrieve_memory", "--query TEXT")],
)
def test_an_operation_without_its_input_is_a_one_line_error(
    store: str, operation: str, needs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["run", operation, "--store", store, "--user", "ann"]) == 2
    assert capsys.readouterr().err.strip() == f"error: `memoryscope run {operation}` needs {needs}"


def test_deleting_an_unknown_id_fails(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["run", "delete_memory", "--store", store, "--user", "ann", "--id", "no-such-id"]) == 1
    assert "no-such-id" in capsys.readouterr().out


def test_store_flag_picks_the_file(store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    other = tmp_path / "other.db"
    assert main(["run", "add_memory", "--store", str(other), "--user", "ann", "--text", "Ann rows"]) == 0
    capsys.readouterr()
    assert main(["run", "list_memory", "--store", str(other), "--user", "ann"]) == 0
    out = capsys.readouterr().out
    assert "Ann rows" in out and "Ann keeps bees" not in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"memoryscope {__version__}"


def test_a_closed_pipe_ends_quietly(store: str) -> None:
    # ~200 KB to list, far beyond a pipe's buffer; stored with vectors given (embedding 40,000
    # tokens would take a minute, and what is listed is all this test is about)
    nodes = [MemoryNode(user_name="ann", content=f"memory {index} " + "long " * 400) for index in range(100)]
    with MemoryScope("default", overrides={"memory_store.path": store}) as scope:
        assert scope.store is not None
        scope.store.upsert(nodes, vectors=np.eye(len(nodes), scope.store.embedding_model.dimension, dtype=np.float32))
    command = f"{sys.executable} -m memoryscope.cli run list_memory --store {store} --user ann | head -n 1"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=120, env=env)
    assert done.stdout.count("\n") == 1
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr
