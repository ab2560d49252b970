"""Keys as the environment stands: a keyless local server is used (with a notice, never dropped
silently), a refusal says no key was sent, and check-config warns about unset key variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryscope import MemoryScope
from memoryscope.cli import main
from memoryscope.errors import MemoryScopeError, ModelError
from memoryscope.models.base import ChatMessage
from memoryscope.testing.fake_openai import FakeOpenAIServer

LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH", "LOCAL_LLM_KEY")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)


def config_with_llm(tmp_path: Path, api_base: str, required: bool) -> Path:
    path = tmp_path / "local.yaml"
    path.write_text(
        "extends: default\n"
        "model:\n"
        "  generation_model:\n"
        f"    api_base: {api_base}\n"
        "    api_key_env: LOCAL_LLM_KEY\n"
        f"    required: {str(required).lower()}\n"
        f"memory_store: {{path: {tmp_path / 'keys.db'}}}\n",
        encoding="utf-8",
    )
    return path


def test_a_base_url_without_a_key_is_used_with_a_notice(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with FakeOpenAIServer(default_reply="Hello from a keyless server.") as server:
        with MemoryScope(str(config_with_llm(tmp_path, server.base_url, required=False))) as ms:
            assert ms.has_generation_model
            reply = ms.default_memory_chat.chat_with_memory("hi there")
        assert reply.message.content == "Hello from a keyless server."
        assert any(r.path.endswith("/chat/completions") for r in server.requests)
    notice = [record.getMessage() for record in caplog.records if "called without a key" in record.getMessage()]
    assert notice and "LOCAL_LLM_KEY" in notice[0] and record_level(caplog, notice[0]) == "WARNING"


def record_level(caplog: pytest.LogCaptureFixture, message: str) -> str:
    return next(record.levelname for record in caplog.records if record.getMessage() == message)


def test_a_server_that_wants_a_key_says_none_was_sent(tmp_path: Path) -> None:
    with (
        FakeOpenAIServer(api_key="sk-wanted-1234") as server,
        MemoryScope(str(config_with_llm(tmp_path, server.base_url, required=False))) as ms,
    ):
        model = ms.env.generation_model("generation_model", "test")
        assert model is not None
        with pytest.raises(ModelError, match="no API key was sent"):
            model.chat([ChatMessage("user", "hi")])


def test_a_required_model_without_its_key_stops_the_start_naming_the_variable(tmp_path: Path) -> None:
    with pytest.raises(MemoryScopeError, match="LOCAL_LLM_KEY"):
        MemoryScope(str(config_with_llm(tmp_path, "http://127.0.0.1:9/v1", required=True)))


def test_check_config_warns_about_unset_key_variables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    required = config_with_llm(tmp_path, "http://127.0.0.1:9/v1", required=True)
    assert main(["check-config", str(required)]) == 0
    out = capsys.readouterr().out
    assert "warning: model.generation_model is required, but environment variable LOCAL_LLM_KEY is not set" in out
    optional = config_with_llm(tmp_path, "http://127.0.0.1:9/v1", required=False)
    assert main(["check-config", str(optional)]) == 0
    assert "LOCAL_LLM_KEY is not set, so http://127.0.0.1:9/v1 is called without a key" in capsys.readouterr().out


def test_check_config_is_quiet_when_the_key_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOCAL_LLM_KEY", "sk-local-5678")
    assert main(["check-config", str(config_with_llm(tmp_path, "http://127.0.0.1:9/v1", required=True))]) == 0
    assert "warning" not in capsys.readouterr().out
