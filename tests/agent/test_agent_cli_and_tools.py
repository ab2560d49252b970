"""`memoryscope agent` (MemGPT's commands, over a pipe) and `memoryscope.tools` (the memory
functions for agents people build themselves), against the fake OpenAI-compatible server."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from agent_stage import NO_SCHEDULER, call, say, step

from memoryscope.app import MemoryScope
from memoryscope.cli.agent import run_agent
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.tools import TOOL_NAMES, memory_tools


def write_config(tmp_path: Path) -> str:
    path = tmp_path / "agent-test.yaml"
    store = f"memory_store:\n  path: {tmp_path / 'cli.db'}\n"
    no_scheduler = "memory_service:\n  memoryscope_service:\n    enable_scheduler: false\n"
    path.write_text(f"extends: agent\n{store}{no_scheduler}", encoding="utf-8")
    return str(path)


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> FakeOpenAIServer:
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", fake_openai.base_url)
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-agent-cli")
    monkeypatch.setenv("MEMORYSCOPE_LLM_MODEL", "fake-qwen")
    return fake_openai


def run(config: str, lines: list[str]) -> str:
    out = io.StringIO()
    assert run_agent(config, "ann", stdin=io.StringIO("".join(f"{line}\n" for line in lines)), stdout=out) == 0
    return out.getvalue()


def test_the_agent_command_runs_memgpts_commands(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    config = write_config(tmp_path)
    llm.queue_replies(
        step(call("core_memory_append", heartbeat=True, label="human", content="Plays the cello."), thought="Worth keeping."),
        say("Lovely, Ann!"),
        say("Again: lovely!"),  # /retry
        say("Heartbeat answered."),  # /heartbeat
        say("I will save what matters."),  # /memorywarning
    )
    shown = run(config, [
        "I play the cello", "/memory", "/dump 2", "/rethink Keep it short.", "/rewrite Lovely indeed!", "/save first",
        "/retry", "/heartbeat", "/memorywarning", "/pop 2", "/load first", "/save", "/nonsense", "/help", "/exit",
    ])  # fmt: skip
    assert "(thinks) Worth keeping." in shown and "-> core_memory_append(" in shown
    assert "assistant: Lovely, Ann!" in shown
    assert "[human] 16/2000 characters" in shown and "Plays the cello." in shown
    assert "recall memory: 2 messages" in shown
    dumped = [line for line in shown.splitlines() if line.startswith("{")]
    assert len(dumped) == 2 and all(json.loads(line)["role"] in ("assistant", "tool", "user") for line in dumped)
    assert "the last inner monologue now reads: Keep it short." in shown
    assert "the last message sent now reads: Lovely indeed!" in shown
    assert "saved checkpoint 'first'" in shown and "loaded checkpoint 'first'" in shown
    assert "assistant: Again: lovely!" in shown and "assistant: Heartbeat answered." in shown
    assert "assistant: I will save what matters." in shown
    assert "removed 2 messages" in shown
    assert "checkpoints: first (" in shown
    assert "unknown command /nonsense" in shown and "/memorywarning" in shown


def test_the_agent_command_needs_an_agent_config(tmp_path: Path, llm: FakeOpenAIServer) -> None:
    from memoryscope.errors import MemoryScopeError

    path = tmp_path / "plain.yaml"
    path.write_text(f"extends: default\nmemory_store:\n  path: {tmp_path / 'plain.db'}\n", encoding="utf-8")
    with pytest.raises(MemoryScopeError, match="no agent_memory_chat"):
        run(str(path), ["hi"])


@pytest.fixture
def scope(tmp_path: Path) -> MemoryScope:
    opened = MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "tools.db"), NO_SCHEDULER: False})
    yield opened  # type: ignore[misc]
    opened.close(timeout=5)


def test_tools_for_your_own_agent(scope: MemoryScope) -> None:
    tools = memory_tools(scope, "lin")
    assert [schema["function"]["name"] for schema in tools.schemas] == list(TOOL_NAMES)
    appended = '{"label": "human", "content": "Lin likes tea."}'
    as_dict = {"id": "call_1", "type": "function", "function": {"name": "core_memory_append", "arguments": appended}}
    result = tools.execute(as_dict)
    assert (result["role"], result["tool_call_id"], json.loads(result["content"])["status"]) == ("tool", "call_1", "OK")
    assert tools.core_memory.get("human").value == "Lin likes tea."

    sdk_like = SimpleNamespace(
        id="call_2", function=SimpleNamespace(name="archival_memory_insert", arguments='{"content": "Lin has a dog"}')
    )
    assert json.loads(tools.execute(sdk_like)["content"])["status"] == "OK"
    found = json.loads(
        tools.execute({"id": "c3", "function": {"name": "archival_memory_search", "arguments": '{"query": "dog"}'}})["content"]
    )
    assert any("Lin has a dog" in line for line in found["results"])

    bad = json.loads(tools.execute({"id": "c4", "function": {"name": "core_memory_append", "arguments": "{oops"}})["content"])
    assert bad["status"] == "Failed" and "not valid JSON" in bad["message"]


def test_a_toolkit_offers_only_the_functions_chosen(scope: MemoryScope) -> None:
    tools = memory_tools(scope, "lin", functions=["archival_memory_insert", "archival_memory_search"])
    assert [schema["function"]["name"] for schema in tools.schemas] == ["archival_memory_insert", "archival_memory_search"]
    refused = json.loads(tools.execute({"id": "c", "function": {"name": "core_memory_append", "arguments": "{}"}})["content"])
    assert refused["status"] == "Failed" and "archival_memory_insert" in refused["message"]


def test_llama_index_function_tools(scope: MemoryScope) -> None:
    tools = memory_tools(scope, "lin").llama_index_tools()
    by_name = {tool.metadata.name: tool for tool in tools}
    assert set(by_name) == set(TOOL_NAMES)
    output = by_name["core_memory_append"].call(label="persona", content="I am Lin's helper.")
    assert json.loads(str(output))["status"] == "OK"
    described = by_name["core_memory_replace"].metadata.to_openai_tool()["function"]
    assert described["name"] == "core_memory_replace"
    assert {"label", "old_content", "new_content", "request_heartbeat"} <= set(described["parameters"]["properties"])
    assert set(described["parameters"]["required"]) == {"label", "old_content", "new_content", "request_heartbeat"}
