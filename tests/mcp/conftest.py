"""Fixtures for the MCP tests: the SDK's own clients against a real `memoryscope mcp` subprocess
(stdio) and a real uvicorn (streamable HTTP), the fake OpenAI-compatible server as the LLM."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP tests need the mcp extra: pip install 'memoryscope[mcp]'")


from mcp_session import LLM_ENV, llm_env  # helpers shared with the test modules

from memoryscope.testing.fake_openai import FakeOpenAIServer


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> FakeOpenAIServer:
    """The fake server as this process's LLM too (for scopes built in the test)."""
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in llm_env(fake_openai).items():
        monkeypatch.setenv(name, value)
    return fake_openai


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "mcp.db"
