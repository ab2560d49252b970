"""A read on a store file that does not exist says so, naming the file, and creates nothing (no
folder, no database); a write creates the file, and its missing folders, as the default
`~/.memoryscope/` is created on first use."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryscope.cli import main


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


READS = [
    ["run", "list_memory", "--user", "ann"],
    ["run", "retrieve_memory", "--user", "ann", "--query", "bees"],
    ["search", "bees", "--user", "ann"],
    ["get", "0123"],
    ["history", "--user", "ann"],
    ["status", "--user", "ann"],
    ["profile", "--user", "ann"],
]


@pytest.mark.parametrize("argv", READS, ids=lambda argv: " ".join(argv[:2]))
def test_a_read_of_a_store_that_does_not_exist_names_it_and_creates_nothing(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nonexistent" / "dir" / "x.db"
    assert main([*argv, "--store", str(path)]) == 1  # not found
    err = capsys.readouterr().err
    assert f"error: memory store {path} does not exist" in err
    assert "Traceback" not in err
    assert not (tmp_path / "nonexistent").exists()


def test_a_read_of_the_config_store_that_does_not_exist_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "list_memory", "--user", "ann"]) == 1
    default = tmp_path / "home" / ".memoryscope" / "default.db"
    assert f"error: memory store {default} does not exist" in capsys.readouterr().err
    assert not default.parent.exists()


def test_a_write_creates_the_store_and_its_folders_then_reads_find_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "new" / "dir" / "x.db"
    assert main(["add", "Ann keeps bees", "--user", "ann", "--no-infer", "--store", str(path)]) == 0
    assert path.exists()
    capsys.readouterr()
    assert main(["run", "list_memory", "--user", "ann", "--store", str(path)]) == 0
    assert "Ann keeps bees" in capsys.readouterr().out


def test_export_of_a_store_that_does_not_exist_names_it_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "nonexistent" / "x.db"
    monkeypatch.setenv("MEMORYSCOPE_STORE_PATH", str(path))
    assert main(["export", "--out", str(tmp_path / "out.jsonl")]) != 0
    assert f"error: memory store {path} does not exist" in capsys.readouterr().err
    assert not path.parent.exists() and not (tmp_path / "out.jsonl").exists()
