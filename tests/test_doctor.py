"""`memoryscope doctor --config C`: a full check of the config's store, a readable report, and a
non-zero exit when something is damaged. Real SQLite files; the damage done with sqlite3."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memoryscope.cli import main
from memoryscope.testing.store_contract import make_node
from memoryscope.transfer.stores import open_store


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default config's store, in a temporary file holding two memories of ann and one of bob."""
    path = tmp_path / "m.db"
    monkeypatch.setenv("MEMORYSCOPE_STORE_PATH", str(path))
    with open_store("default") as store:
        store.upsert([make_node("Ann likes green tea", memory_id="m-tea"), make_node("Ann plays the guitar")])
        store.upsert([make_node("Bob collects stamps", user_name="bob")])
    return path


def _foreign_write(path: Path, sql: str, *params: object) -> None:
    connection = sqlite3.connect(path)
    try:
        connection.execute(sql, params)
        connection.commit()
    finally:
        connection.close()


def test_a_healthy_store_passes(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--config", "default"]) == 0
    out = capsys.readouterr().out
    assert str(store_path) in out
    assert "3 memories of 2 users" in out
    assert "ok" in out and "damaged" not in out


def test_a_damaged_row_fails_naming_it(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _foreign_write(store_path, "UPDATE memories SET access_count = 'abc' WHERE memory_id = 'm-tea'")
    assert main(["doctor", "--config", "default"]) == 1
    out = capsys.readouterr().out
    assert "m-tea" in out and "access_count" in out and "'abc'" in out


def test_a_damaged_vector_fails_naming_it(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    row_id = "(SELECT row_id FROM memories WHERE memory_id = 'm-tea')"
    _foreign_write(store_path, f"UPDATE memory_vectors SET vector = x'0102' WHERE row_id = {row_id}")
    assert main(["doctor", "--config", "default"]) == 1
    out = capsys.readouterr().out
    assert "m-tea" in out and "vector" in out and "memoryscope reembed" in out


def test_a_damaged_file_fails_with_the_integrity_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.db"
    monkeypatch.setenv("MEMORYSCOPE_STORE_PATH", str(path))
    with open_store("default") as store:
        store.upsert([make_node(f"memory number {number}") for number in range(300)])
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.seek(size // 4096 // 2 * 4096)
        file.write(b"\xa5" * 3 * 4096)
    assert main(["doctor", "--config", "default"]) == 1
    out = capsys.readouterr().out
    assert str(path) in out and "integrity_check" in out and "backup" in out


def test_a_missing_file_is_not_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "none.db"
    monkeypatch.setenv("MEMORYSCOPE_STORE_PATH", str(path))
    assert main(["doctor", "--config", "default"]) == 1
    assert "no such file" in capsys.readouterr().out
    assert not path.exists()
