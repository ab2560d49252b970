"""MemoryScope 0.1.x's English and Chinese flag forms (0.1.1's README: OpenAI models in English,
DashScope models in Chinese) each start, one after the other, without a `store_path`: the
default SQLite file is one per embedding model, since vectors of two models cannot be searched
together. When a store does refuse another embedding model, the fix it prints runs as printed.
Models are reached over HTTP at the fake OpenAI-compatible server."""

from __future__ import annotations

import io
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryscope.cli import main
from memoryscope.testing.fake_openai import FakeOpenAIServer


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer, tmp_path: Path) -> Iterator[FakeOpenAIServer]:
    for name in ("OPENAI_API_BASE", "MEMORYSCOPE_STORE_PATH", "MEMORYSCOPE_LLM_API_BASE", "language"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-flags-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-dashscope-test")
    yield fake_openai


def english(server: FakeOpenAIServer) -> list[str]:
    return [
        "--language=en", "--memory_chat_class=cli_memory_chat", "--human_name=user", "--assistant_name=AI",
        "--generation_backend=openai_generation", "--generation_model=gpt-4o",
        "--embedding_backend=openai_embedding", "--embedding_model=text-embedding-3-small", "--enable_ranker=False",
    ]  # fmt: skip


def chinese(server: FakeOpenAIServer) -> list[str]:
    endpoint = f"--embedding_params={{'api_base': '{server.base_url}'}}"  # DashScope's, at the fake server
    return [
        "--language=cn", "--memory_chat_class=cli_memory_chat", "--human_name=用户", "--assistant_name=AI",
        "--generation_backend=dashscope_generation", "--generation_model=qwen-max",
        "--embedding_backend=dashscope_embedding", "--embedding_model=text-embedding-v2", endpoint,
        "--enable_ranker=False",
    ]  # fmt: skip


def chat(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], script: str, argv: list[str]) -> tuple[int, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(script))
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def test_the_english_and_chinese_flag_forms_both_start_and_keep_their_memories(
    server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = chat(monkeypatch, capsys, "/add_memory query=I keep bees\n/exit\n", english(server))
    assert status == 0, out
    status, out = chat(monkeypatch, capsys, "/add_memory query=我养蜜蜂\n/exit\n", chinese(server))
    assert status == 0, out
    folder = tmp_path / "home" / ".memoryscope"
    assert sorted(path.name for path in folder.glob("*.db")) == [
        "memory_index.text-embedding-3-small.db",
        "memory_index.text-embedding-v2.db",
    ]
    status, out = chat(monkeypatch, capsys, "/list_memory\n/exit\n", english(server))  # the first one's, still there
    assert status == 0 and "I keep bees" in out and "我养蜜蜂" not in out


def test_a_store_path_shared_by_two_embedding_models_is_refused_with_a_fix_that_runs(
    server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = f"--store_path={tmp_path / 'shared.db'}"
    assert chat(monkeypatch, capsys, "/exit\n", [*english(server), shared])[0] == 0
    status, out = chat(monkeypatch, capsys, "/exit\n", [*chinese(server), shared])
    assert status != 0
    assert "holds vectors made by embedding model 'text-embedding-3-small'" in out
    assert "reembed --config ..." not in out  # no command that needs a config file the user does not have
    assert f"mv {tmp_path / 'shared.db'} {tmp_path / 'shared.db'}.bak" in out and "--store_path=" in out


def test_a_config_store_opened_with_another_model_prints_a_reembed_command_that_runs(
    server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "m.db"
    assert main(["run", "add_memory", "--user", "ann", "--text", "Ann keeps bees", "--store", str(store)]) == 0
    config = tmp_path / "remote.yaml"
    config.write_text(
        "extends: default\nmodel:\n  embedding_model:\n    class: llama_index_embedding_model\n"
        f"    module_name: bge_embedding\n    model_name: text-embedding-3-small\n    api_base: {server.base_url}\n"
        "    api_key_env: OPENAI_API_KEY\n",
        encoding="utf-8",
    )
    capsys.readouterr()
    assert main(["run", "list_memory", "--user", "ann", "--config", str(config), "--store", str(store)]) == 3
    err = capsys.readouterr().err
    command = err.split("`memoryscope ")[1].split("`")[0]
    assert command == f"reembed --config {config} --store {store}"
    assert main(shlex.split(command)) == 0  # runs as printed
    capsys.readouterr()
    assert main(["run", "list_memory", "--user", "ann", "--config", str(config), "--store", str(store)]) == 0
    assert "Ann keeps bees" in capsys.readouterr().out


def test_a_file_kept_by_an_earlier_build_is_named_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Before one file per embedding model, the default was `~/.memoryscope/<index>.db`: a run that
    does not find its own file yet says where the earlier one is and how to go on with it."""
    import logging

    from memoryscope.compat.arguments import _name_the_earlier_file

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".memoryscope").mkdir()
    (tmp_path / ".memoryscope" / "memory_index.db").write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="memoryscope"):
        _name_the_earlier_file("memory_index", "~/.memoryscope/memory_index.e5.db")
    [record] = [r for r in caplog.records if "earlier build" in r.getMessage()]
    assert str(tmp_path / ".memoryscope" / "memory_index.db") in record.getMessage()
    assert "store_path=" in record.getMessage()
    caplog.clear()
    (tmp_path / ".memoryscope" / "memory_index.e5.db").write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="memoryscope"):
        _name_the_earlier_file("memory_index", "~/.memoryscope/memory_index.e5.db")
    assert not [r for r in caplog.records if "earlier build" in r.getMessage()]
