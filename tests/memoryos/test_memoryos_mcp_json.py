"""The MemoryOS MCP tools: MemoryOS's arguments honoured and its JSON answers (the shapes of its
`server_new.py`), in process through the SDK's client and over stdio from MemoryOS's own
`config.json` (`memoryscope mcp --config config.json`); and `threshold` on MemoryScope's own
retrieve_memory."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP tests need the mcp extra: pip install 'memoryscope[mcp]'")

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult
from memoryos_scripted_llm import Script

from memoryscope import MemoryScope
from memoryscope.door import Door
from memoryscope.errors import ConfigError, InvalidInputError
from memoryscope.mcp import build_mcp, fixed_user
from memoryscope.mcp.tools import McpToolHandlers
from memoryscope.memoryos import Memoryos, read_mcp_config
from memoryscope.testing.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.slow  # an MCP server subprocess; `-m "not slow"` leaves it out

RETRIEVED = {
    "status", "query", "timestamp", "user_profile", "short_term_memory", "short_term_count", "retrieved_pages",
    "retrieved_user_knowledge", "retrieved_assistant_knowledge", "total_pages_found", "total_user_knowledge_found",
    "total_assistant_knowledge_found",
}  # fmt: skip


def answer(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result
    text = "\n".join(getattr(part, "text", "") for part in result.content)
    return json.loads(text)


def run_client(server: Any, body: Callable[[Client], Awaitable[None]]) -> None:
    async def main() -> None:
        with anyio.fail_after(60):
            async with Client(server) as client:
                await body(client)

    anyio.run(main)


@pytest.fixture
def scope(tmp_path: Path, fake_openai: FakeOpenAIServer, script: Script) -> Iterator[MemoryScope]:
    overrides = {
        "memory_store.path": str(tmp_path / "m.db"),
        "model.generation_model.api_base": fake_openai.base_url,
        "model.generation_model.api_key": "test-key",
        "worker.memoryos_add_page.short_term_capacity": 1,
        "worker.memoryos_mid_term.short_term_capacity": 1,
        "worker.memoryos_long_term.mid_term_heat_threshold": 1.5,
    }
    with MemoryScope("memoryos", overrides=overrides) as built:
        yield built


def test_the_memoryos_tools_take_its_arguments_and_answer_its_json(scope: MemoryScope, script: Script) -> None:
    script.analysis["assistant_knowledge"] = ["The assistant recommends sencha"]
    server = build_mcp(scope, fixed_user("ann"), target="tutor")

    async def body(client: Client) -> None:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) >= {"add_memory", "retrieve_memory", "get_user_profile"}
        add = tools["add_memory"].input_schema
        assert add["required"] == ["user_input", "agent_response"]
        assert set(add["properties"]) == {"user_input", "agent_response", "timestamp", "meta_data"}
        retrieve = tools["retrieve_memory"].input_schema["properties"]
        assert set(retrieve) == {"query", "relationship_with_user", "style_hint", "max_results"}
        assert retrieve["max_results"]["default"] == 10
        profile_args = tools["get_user_profile"].input_schema["properties"]
        assert set(profile_args) == {"include_knowledge", "include_assistant_knowledge"}

        first = {"user_input": "I drink green tea every morning", "agent_response": "Green tea is lovely."}
        added = answer(
            await client.call_tool("add_memory", {**first, "timestamp": "2024-10-26 12:00:00", "meta_data": {"mood": "calm"}})
        )
        assert added == {
            "status": "success",
            "message": "Memory has been successfully added to MemoryOS",
            "timestamp": "2024-10-26 12:00:00",
            "details": {"user_input_length": 31, "agent_response_length": 20, "has_meta_data": True},
        }
        second = {"user_input": "My bicycle got a flat tyre yesterday", "agent_response": "Oh no!"}
        added = answer(await client.call_tool("add_memory", {**second, "timestamp": "2024-10-26 12:01:00"}))
        assert added["details"]["has_meta_data"] is False  # and the tea page moved to mid term: hot at 1.5, promoted
        refused = answer(await client.call_tool("add_memory", {"user_input": "hi", "agent_response": ""}))
        assert refused == {"status": "error", "message": "user_input and agent_response are required"}
        bad_time = answer(await client.call_tool("add_memory", {**first, "timestamp": "yesterday-ish"}))
        assert bad_time["status"] == "error" and bad_time["message"].startswith("Error adding memory: invalid_request:")

        found = answer(await client.call_tool("retrieve_memory", {"query": "green tea", "max_results": 1}))
        assert set(found) == RETRIEVED and found["status"] == "success" and found["query"] == "green tea"
        assert found["user_profile"] == "Ann loves green tea."
        assert found["short_term_memory"] == [
            {"user_input": second["user_input"], "agent_response": "Oh no!", "timestamp": "2024-10-26 12:01:00"}
        ]
        assert found["short_term_count"] == 1
        assert found["retrieved_pages"] == [
            {**first, "timestamp": "2024-10-26 12:00:00", "meta_info": "I drink green tea every morning"}
        ]
        assert [k["knowledge"] for k in found["retrieved_user_knowledge"]] == ["Ann drinks green tea"]
        assert set(found["retrieved_user_knowledge"][0]) == {"knowledge", "timestamp"}
        assert found["total_pages_found"] == 1 and found["total_user_knowledge_found"] == 1
        assert answer(await client.call_tool("retrieve_memory", {"query": ""}))["status"] == "error"

        profile = answer(await client.call_tool("get_user_profile", {}))
        assert set(profile) == {"status", "timestamp", "user_id", "assistant_id", "user_profile", "user_knowledge",
                                "user_knowledge_count"}  # fmt: skip
        assert (profile["user_id"], profile["assistant_id"], profile["user_profile"]) == ("ann", "tutor", "Ann loves green tea.")
        assert profile["user_knowledge_count"] == 1
        both = answer(
            await client.call_tool("get_user_profile", {"include_knowledge": False, "include_assistant_knowledge": True})
        )
        assert "user_knowledge" not in both and both["assistant_knowledge_count"] == 1
        assert both["assistant_knowledge"][0]["knowledge"] == "The assistant recommends sencha"

    run_client(server, body)
    door = scope.door
    [tea] = [r for r in door.get_all(door.caller("ann", target="tutor"), types=["memoryos_page"]) if "tea" in r.memory]
    assert tea.metadata == {"mood": "calm"}  # meta_data kept, for the assistant the server serves
    assert door.get_all(door.caller("ann"), types=["memoryos_page"]) == []


def test_a_user_without_a_profile_gets_memoryos_words(scope: MemoryScope) -> None:
    server = build_mcp(scope, fixed_user("bob"))

    async def body(client: Client) -> None:
        profile = answer(await client.call_tool("get_user_profile", {}))
        assert profile["user_profile"] == "No detailed user profile" and profile["user_knowledge"] == []

    run_client(server, body)


def memoryos_config(tmp_path: Path, fake: FakeOpenAIServer, **changes: Any) -> Path:
    """MemoryOS's own memoryos-mcp/config.json, pointed at the fake server and tmp_path."""
    config = {
        "user_id": "test_user_001",
        "openai_api_key": "",
        "openai_base_url": fake.base_url,
        "data_storage_path": str(tmp_path / "memoryos_data"),
        "assistant_id": "memoryos_assistant",
        "short_term_capacity": 2,
        "mid_term_capacity": 2000,
        "embedding_model_name": "BAAI/bge-m3",
        "long_term_knowledge_capacity": 100,
        "retrieval_queue_capacity": 7,
        "mid_term_heat_threshold": 7.0,
        "mid_term_similarity_threshold": 0.6,
        "llm_model": "gpt-4o-mini",
        **changes,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def test_memoryscope_mcp_serves_memoryos_from_its_config_json(tmp_path: Path) -> None:
    with FakeOpenAIServer(api_key="sk-from-env") as fake:  # answers 401 to any other key
        config = memoryos_config(tmp_path, fake)
        environment = {"OPENAI_API_KEY": "sk-from-env"}  # the file's key is empty: read where MemoryOS reads it
        server = StdioServerParameters(command=sys.executable, args=["-m", "memoryscope.cli", "mcp", "--config", str(config)],
                                       env=environment)  # fmt: skip
        fake.add_rule("Summaries of all", json.dumps({"segments": []}), target="prompt")

        async def body(client: Client) -> None:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"add_memory", "retrieve_memory", "get_user_profile"} <= names
            turn = {"user_input": "I keep bees in Kyoto", "agent_response": "How many hives?"}
            assert answer(await client.call_tool("add_memory", turn))["status"] == "success"
            found = answer(await client.call_tool("retrieve_memory", {"query": "bees"}))
            assert found["short_term_memory"][0]["user_input"] == "I keep bees in Kyoto"
            profile = answer(await client.call_tool("get_user_profile", {}))
            assert (profile["user_id"], profile["assistant_id"]) == ("test_user_001", "memoryos_assistant")
            listed = await client.call_tool("list_memory", {})  # MemoryScope's own tools: the same user and assistant
            assert "I keep bees in Kyoto" in "\n".join(getattr(part, "text", "") for part in listed.content)

        run_client(server, body)
    with Memoryos(
        "test_user_001", "k", tmp_path / "memoryos_data", "http://127.0.0.1:9/v1", assistant_id="memoryos_assistant"
    ) as memo:
        assert [page["user_input"] for page in memo.short_term_memory.get_all()] == ["I keep bees in Kyoto"]


def test_read_mcp_config_names_what_is_wrong(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    settings = read_mcp_config(memoryos_config(tmp_path, fake_openai))
    assert settings["user_id"] == "test_user_001" and settings["short_term_capacity"] == 2
    assert "mid_term_similarity_threshold" not in settings  # as MemoryOS's server, which does not pass it on
    with pytest.raises(ConfigError, match="user_id: missing") as missing:
        read_mcp_config(_without(tmp_path, "user_id"))
    assert "config.json" in str(missing.value)
    with pytest.raises(ConfigError, match="user_name: unknown key"):
        read_mcp_config(memoryos_config(tmp_path, fake_openai, user_name="ann"))
    with pytest.raises(ConfigError, match=r"openai_api_key: has the wrong type or value: \(hidden\)"):
        read_mcp_config(memoryos_config(tmp_path, fake_openai, openai_api_key=12345))
    with pytest.raises(ConfigError, match="short_term_capacity: has the wrong type or value: 0"):
        read_mcp_config(memoryos_config(tmp_path, fake_openai, short_term_capacity=0))


def _without(tmp_path: Path, key: str) -> Path:
    path = tmp_path / "partial.json"
    path.write_text(json.dumps({"openai_api_key": "", "data_storage_path": "./d"}), encoding="utf-8")
    assert key not in json.loads(path.read_text())
    return path


def test_retrieve_memory_keeps_results_at_or_above_the_threshold(tmp_path: Path) -> None:
    with MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "d.db")}) as scope:
        for text in ("ann keeps bees in Kyoto", "ann plays the cello", "ann bakes rye bread"):
            scope.add(text, user_id="ann", infer=False)
        door: Door = scope.door
        tools = McpToolHandlers(scope)
        ranked = door.search(door.caller("ann"), "bees in Kyoto", top_k=10)
        cut = ranked[1].score  # the second best's: the best two kept
        assert cut is not None and 0 <= cut <= 1
        kept = [record.memory for record in ranked if record.score is not None and record.score >= cut]

        listed = tools.retrieve_memory("ann", "bees in Kyoto", threshold=cut)

        assert [line.split("] ", 1)[1].split("  (id:")[0] for line in listed.splitlines()] == kept
        assert "keeps bees" in listed and len(kept) == 2
        assert len(tools.retrieve_memory("ann", "bees in Kyoto", threshold=0.0).splitlines()) == len(ranked)
        with pytest.raises(InvalidInputError, match=r"threshold 1\.5 is out of range.*from 0 to 1"):
            tools.retrieve_memory("ann", "bees", threshold=1.5)


def test_the_client_config_block_for_a_memoryos_config_json(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    from memoryscope.mcp.client_config import client_config

    config = memoryos_config(tmp_path, fake_openai)
    entry = client_config(str(config))["mcpServers"]["memoryos"]
    assert entry["args"][-2:] == ["--config", str(config)] and entry["env"] == {"OPENAI_API_KEY": "<your OPENAI_API_KEY>"}
    with pytest.raises(ConfigError, match="user_name: unknown key"):
        client_config(str(memoryos_config(tmp_path, fake_openai, user_name="ann")))
