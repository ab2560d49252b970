"""`memoryscope mcp` over stdio, driven by the official SDK's client against a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_session import run_client, seed, stdio_server, text_of

from memoryscope.testing.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.slow  # an MCP server subprocess per test; `-m "not slow"` leaves it out


def test_tools_are_listed_with_schemas_and_no_user_argument(llm: FakeOpenAIServer, store: Path) -> None:
    async def body(client: Client) -> None:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {
            "add_memory",
            "retrieve_memory",
            "get_user_profile",
            "list_memory",
            "delete_memory",
            "consolidate_memory",
        }
        add = tools["add_memory"].input_schema
        assert add["required"] == ["user_input"] and set(add["properties"]) == {"user_input", "agent_response"}
        retrieve = tools["retrieve_memory"].input_schema["properties"]
        assert set(retrieve) == {"query", "since", "until", "top_k", "threshold"}
        assert retrieve["top_k"]["default"] == 10 and retrieve["top_k"]["minimum"] == 1
        assert retrieve["threshold"]["anyOf"][0]["maximum"] == 1 and retrieve["threshold"]["default"] is None
        assert "ISO 8601" in retrieve["since"]["description"]
        assert set(tools["list_memory"].input_schema["properties"]["type"]["anyOf"][0]["enum"]) >= {"observation", "insight"}
        assert tools["delete_memory"].input_schema["required"] == ["memory_id"]
        for tool in tools.values():
            assert tool.description and len(tool.description) > 40
            assert not {"user", "user_id", "user_name"} & set(tool.input_schema.get("properties", {}))

    run_client(stdio_server(store, llm, "--user", "ann"), body)


def test_add_retrieve_list_profile_and_delete_for_the_user_of_the_command_line(llm: FakeOpenAIServer, store: Path) -> None:
    bobs = seed(store, "bob", "bob keeps bees")
    seed(store, "ann", "ann is a devoted cellist")

    async def body(client: Client) -> None:
        added = await client.call_tool("add_memory", {"user_input": "I play the guitar every evening", "agent_response": "Nice!"})
        assert not added.is_error and "Stored 2 messages" in text_of(added)
        # a forged user argument is ignored: the user is the command line's
        found = await client.call_tool("retrieve_memory", {"query": "guitar", "user_id": "bob"})
        assert not found.is_error
        assert "I play the guitar every evening" in text_of(found) and "bees" not in text_of(found)
        assert text_of(found).startswith("[")  # time-stamped

        listed = text_of(await client.call_tool("list_memory", {}))
        assert "ann is a devoted cellist" in listed and "guitar" in listed and "bees" not in listed
        only = text_of(await client.call_tool("list_memory", {"type": "obs_customized", "limit": 5}))
        assert "cellist" in only and "guitar" not in only

        profile = await client.call_tool("get_user_profile", {})
        assert not profile.is_error and "No profile yet" in text_of(profile)

        refused = await client.call_tool("delete_memory", {"memory_id": bobs})
        assert refused.is_error and f"no memory has the id {bobs!r}" in text_of(refused)
        own = only.split("(id: ")[1].split(";")[0]
        deleted = await client.call_tool("delete_memory", {"memory_id": own})
        assert not deleted.is_error and "cellist" in text_of(deleted)
        assert "cellist" not in text_of(await client.call_tool("list_memory", {}))

    run_client(stdio_server(store, llm, "--user", "ann"), body)
    from memoryscope.app import MemoryScope

    with MemoryScope("default", overrides={"memory_store.path": str(store)}) as scope:
        assert scope.get(bobs) is not None  # bob's memory survived
        assert [r.memory for r in scope.get_all("bob")] == ["bob keeps bees"]


def test_a_bad_time_is_a_tool_error_and_the_server_keeps_answering(llm: FakeOpenAIServer, store: Path) -> None:
    async def body(client: Client) -> None:
        await client.call_tool("add_memory", {"user_input": "I went hiking last Saturday"})
        bad = await client.call_tool("retrieve_memory", {"query": "hiking", "since": "last tuesday-ish"})
        assert bad.is_error and "'last tuesday-ish' is not an ISO 8601 time" in text_of(bad)
        backwards = await client.call_tool("retrieve_memory", {"query": "hiking", "since": "2030-01-02", "until": "2030-01-01"})
        assert backwards.is_error and "after until" in text_of(backwards)
        window = await client.call_tool("retrieve_memory", {"query": "hiking", "since": "2000-01-01", "until": "2001-01-01"})
        assert not window.is_error and "No memory matches" in text_of(window)
        now = await client.call_tool("retrieve_memory", {"query": "hiking", "since": "2000-01-01T00:00:00"})
        assert "I went hiking last Saturday" in text_of(now)
        invalid = await client.call_tool("retrieve_memory", {"query": "hiking", "top_k": 0})
        assert invalid.is_error

    run_client(stdio_server(store, llm, "--user", "ann"), body)


def test_the_user_defaults_to_the_services_human_name(llm: FakeOpenAIServer, store: Path) -> None:
    async def body(client: Client) -> None:
        await client.call_tool("add_memory", {"user_input": "I grow tomatoes"})

    run_client(stdio_server(store, llm), body)
    from memoryscope.app import MemoryScope

    with MemoryScope("default", overrides={"memory_store.path": str(store)}) as scope:
        human = scope.default_service.params.human_name
        assert [r.memory for r in scope.get_all(human)] == ["I grow tomatoes"]
        assert human != "ann"


def test_a_lone_surrogate_and_a_broken_line_are_answered(llm: FakeOpenAIServer, store: Path) -> None:
    """JSON-RPC lines as a client writes them: one with half a UTF-16 pair (`\\ud800`, which the SDK's
    own client cannot even send) and one that is not JSON. Each gets its JSON-RPC error at once
    (the SDK alone answers neither: its caller waits forever), nothing is stored, and the server
    goes on answering."""
    server = stdio_server(store, llm, "--user", "ann")
    process = subprocess.Popen(
        [server.command, *server.args], env={**os.environ, **(server.env or {})},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    answers: dict[Any, dict[str, Any]] = {}
    reader = threading.Thread(target=lambda: answers.update((m.get("id"), m) for m in map(json.loads, process.stdout)))
    try:
        assert process.stdin is not None and process.stdout is not None
        reader.start()
        hello = {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        lines = [
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add_memory", '
            '"arguments": {"user_input": "I keep bees \\ud800"}}}',
            '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": ',
            json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                        "params": {"name": "retrieve_memory", "arguments": {"query": "bees"}}}),
        ]  # fmt: skip
        process.stdin.write(("\n".join(lines) + "\n").encode())
        process.stdin.flush()
        deadline = time.monotonic() + 60
        while 4 not in answers and time.monotonic() < deadline:
            time.sleep(0.05)
        assert answers[2]["error"]["code"] == -32602 and "not valid Unicode" in answers[2]["error"]["message"]
        assert answers[None]["error"]["code"] == -32700  # the broken line: no id to answer to
        assert "keep bees" not in json.dumps(answers[4]["result"])
    finally:
        process.kill()
        process.wait(timeout=30)
        reader.join(timeout=30)
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()
