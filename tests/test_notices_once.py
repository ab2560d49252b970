"""What start-up has to say is said once: an unused rank model (the ranker off) is not built and
not warned about, and a keyless model's warning is logged, not printed again as a chat's note."""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path

import pytest

from memoryscope.app import MemoryScope
from memoryscope.cli import main
from memoryscope.testing.fake_openai import FakeOpenAIServer

LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH", "RANK_KEY_NOT_SET")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)


def test_an_unused_rank_model_is_not_built_nor_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    overrides = {
        "memory_store.path": str(tmp_path / "rank.db"),
        "global.enable_ranker": False,
        "model.rank_model": {
            "class": "llama_index_rank_model", "module_name": "bge_rank", "model_name": "BAAI/bge-reranker-v2-m3",
            "api_base": "http://127.0.0.1:9/v1", "api_key_env": "RANK_KEY_NOT_SET", "required": False,
        },
    }  # fmt: skip
    with caplog.at_level(logging.INFO, logger="memoryscope"), MemoryScope("default", overrides=overrides) as ms:
        assert "rank_model" not in ms.models
        assert [notice for notice in ms.notices if "rank_model" in notice] == [
            "model.rank_model is not used: global.enable_ranker is false"
        ]
        assert ms.search("anything", user_id="lin") == []  # retrieval runs without it
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "rank_model" in r.getMessage()]


def test_a_keyless_model_is_warned_about_once_in_a_chat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with FakeOpenAIServer(default_reply="Hello.") as server:
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", server.base_url)  # and no key: called without one
        monkeypatch.setenv("MEMORYSCOPE_STORE_PATH", str(tmp_path / "chat.db"))
        monkeypatch.setattr(sys, "stdin", io.StringIO("/exit\n"))
        with caplog.at_level(logging.WARNING, logger="memoryscope"):
            assert main(["chat", "--user", "ann"]) == 0
    printed = capsys.readouterr().out
    logged = [r.getMessage() for r in caplog.records if "called without a key" in r.getMessage()]
    assert len(logged) == 1 and "MEMORYSCOPE_LLM_API_KEY" in logged[0]
    assert "called without a key" not in printed  # not a second time as a note
    assert "MemoryScope chat with ann's memories" in printed
