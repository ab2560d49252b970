"""The door's `blocks` and `set_block` verbs over an agent's core memory (the `agent` config, a real
SQLite store; no model call is needed): each block by name with its text, size and limit; a block
set whole, within the same limit the agent's tools keep; the agent REPL's `/set`; and a config
without an agent, refused with a reason."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from agent_stage import opened

from memoryscope.app import MemoryScope
from memoryscope.cli.agent import run_agent
from memoryscope.errors import InvalidInputError
from memoryscope.testing.fake_openai import FakeOpenAIServer


def test_blocks_by_name_and_a_block_set_within_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer
) -> None:
    with opened(tmp_path / "agent.db", monkeypatch, fake_openai) as scope:
        blocks = scope.blocks("ann")
        assert [(block.name, block.limit) for block in blocks] == [("persona", 2000), ("human", 2000)]
        assert blocks[0].value.startswith("I am ") and blocks[0].to_dict()["size"] == len(blocks[0].value)

        saved = scope.set_block("human", "Ann plays the viola.", "ann")
        assert (saved.name, saved.value, saved.to_dict()["size"]) == ("human", "Ann plays the viola.", 20)
        agent = scope.chats["agent_memory_chat"].agent_for("ann")
        assert agent.core.get("human").value == "Ann plays the viola."  # what the agent's next prompt holds
        assert scope.blocks("bob")[1].value != "Ann plays the viola."  # another user's agent, other blocks

        with pytest.raises(InvalidInputError, match="over its limit of 2,000"):
            scope.set_block("human", "x" * 2001, "ann")
        with pytest.raises(InvalidInputError, match="persona"):
            scope.set_block("diary", "hi", "ann")
        assert scope.blocks("ann")[1].value == "Ann plays the viola."  # refused edits changed nothing


def test_the_agent_repl_sets_a_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> None:
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", fake_openai.base_url)
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-agent-cli")
    monkeypatch.setenv("MEMORYSCOPE_LLM_MODEL", "fake-qwen")
    config = tmp_path / "agent.yaml"
    config.write_text(f"extends: agent\nmemory_store:\n  path: {tmp_path / 'repl.db'}\n", encoding="utf-8")
    out = io.StringIO()
    lines = "/set human Ann keeps bees.\n/set diary hello\n/set\n/memory\n/exit\n"
    assert run_agent(str(config), "ann", stdin=io.StringIO(lines), stdout=out) == 0
    shown = out.getvalue()
    assert "[human] 15/2000 characters" in shown and "  Ann keeps bees." in shown
    assert "/set failed: " in shown and "usage: /set NAME TEXT" in shown


def test_a_config_without_an_agent_has_no_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORYSCOPE_STORE_PATH", raising=False)
    with MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "plain.db")}) as scope:
        with pytest.raises(InvalidInputError, match="no core memory blocks"):
            scope.blocks("ann")
        with pytest.raises(InvalidInputError, match="no core memory blocks"):
            scope.set_block("human", "hi", "ann")
