"""`memoryscope export | import | migrate | reembed` as a user types them, with YAML config files."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from memoryscope.cli.transfer import add_transfer_commands
from memoryscope.memory import MemoryNode
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.testing.store_contract import unit_vectors
from memoryscope.transfer.stores import open_store

LOCAL = {"class": "llama_index_embedding_model", "module_name": "local_embedding"}


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="memoryscope")
    add_transfer_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.handler(args))


def write_config(path: Path, store_path: Path, model: dict[str, Any] = LOCAL) -> str:
    raw = {
        "model": {"embedding_model": model},
        "memory_store": {"class": "sqlite_memory_store", "path": str(store_path), "embedding_model": "embedding_model"},
    }
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return str(path)


@pytest.fixture
def source_config(tmp_path: Path) -> str:
    config = write_config(tmp_path / "source.yaml", tmp_path / "source.db")
    with open_store(config) as store:
        nodes = [
            MemoryNode(user_name=user, content=f"{user} fact {n}", memory_id=f"{user}-{n}")
            for user in ("ann", "bob", "cy")
            for n in range(2)
        ]
        store.upsert(nodes, vectors=unit_vectors(len(nodes), int(store.dimension)))
    return config


def test_export_then_import(tmp_path: Path, source_config: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "memories.jsonl"
    assert run("export", "--config", source_config, "--out", str(out), "--vectors") == 0
    err = capsys.readouterr().err
    assert f"exported 6 memories to {out}" in err and "export: 6/6 (100%)" in err
    assert "vector" in json.loads(out.read_text(encoding="utf-8").splitlines()[1])

    target = write_config(tmp_path / "target.yaml", tmp_path / "target.db")
    assert run("import", str(out), "--config", target, "--batch", "4") == 0
    assert "imported 6 memories into SqliteMemoryStore" in capsys.readouterr().err
    with open_store(target) as store:
        assert store.user_counts() == {"ann": 2, "bob": 2, "cy": 2}


def test_export_one_user_to_stdout(source_config: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("export", "--config", source_config, "--out", "-", "--user", "cy") == 0
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines()]
    assert [line.get("memory_id") for line in lines[1:-1] if "change" not in line] == ["cy-0", "cy-1"]
    assert "exported 2 memories to stdout" in captured.err


def test_import_of_a_bad_file_is_one_error_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"user_name": "ann", "content": "fine"}\n{"user_name": "ann"}\n', encoding="utf-8")
    target = write_config(tmp_path / "target.yaml", tmp_path / "target.db")
    assert run("import", str(bad), "--config", target) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == f"error: {bad}, line 2: the memory has no 'content'"


def test_migrate_then_resume_and_restart(tmp_path: Path, source_config: str, capsys: pytest.CaptureFixture[str]) -> None:
    target = write_config(tmp_path / "target.yaml", tmp_path / "target.db")
    assert run("migrate", "--from", source_config, "--to", target, "--batch", "4") == 0
    assert "migrated 6 memories of 3 users" in capsys.readouterr().err
    assert run("migrate", "--from", source_config, "--to", target) == 0
    assert "(0 written, 6 already there); counts verified" in capsys.readouterr().err
    assert run("migrate", "--from", source_config, "--to", target, "--restart") == 0
    assert "(6 written, 0 already there)" in capsys.readouterr().err
    assert run("migrate", "--from", source_config, "--to", source_config) == 2
    assert "the source and the target are the same store" in capsys.readouterr().err


def test_an_interrupted_migrate_says_how_to_resume(
    tmp_path: Path, source_config: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr("memoryscope.transfer.stores.migrate", interrupted)
    target = write_config(tmp_path / "target.yaml", tmp_path / "target.db")
    assert run("migrate", "--from", source_config, "--to", target) == 130
    assert "interrupted; run the same command again to resume" in capsys.readouterr().err


def test_reembed_after_changing_the_model(tmp_path: Path, source_config: str, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAIServer(embedding_dimension=32) as server:
        model = {"class": "llama_index_embedding_model", "module_name": "bge_embedding", "model_name": "fake-embedding",
                 "api_base": server.base_url}  # fmt: skip
        changed = write_config(tmp_path / "changed.yaml", tmp_path / "source.db", model)
        assert run("export", "--config", changed, "--out", str(tmp_path / "x.jsonl")) == 2
        assert "re-embed it with `memoryscope reembed --config ...`" in capsys.readouterr().err
        assert run("reembed", "--config", changed) == 0
        err = capsys.readouterr().err
        assert "re-embedding with 'fake-embedding' (dimension 32)" in err and "re-embedded 6 memories" in err
        assert run("reembed", "--config", changed) == 0
        assert "nothing to do" in capsys.readouterr().err
        assert run("export", "--config", changed, "--out", str(tmp_path / "x.jsonl")) == 0


def test_batch_must_be_positive(source_config: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        run("export", "--config", source_config, "--out", "x", "--batch", "0")
    assert exited.value.code == 2
    assert "expected a positive integer, got 0" in capsys.readouterr().err
