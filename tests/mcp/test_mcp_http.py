"""The MCP server at `/mcp` of the FastAPI app over streamable HTTP: a real uvicorn, the SDK's client."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from mcp import Client
from mcp_session import connect, run_client, seed, text_of

from memoryscope.app import MemoryScope
from memoryscope.server.access import ApiKey, KeyRing
from memoryscope.server.app import create_app
from memoryscope.server.routes_mcp import mount_mcp
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.testing.live_server import LiveServer

pytestmark = pytest.mark.slow  # a real uvicorn; `-m "not slow"` leaves it out

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}  # fmt: skip
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def key(name: str, secret: str, users: set[str]) -> ApiKey:
    return ApiKey(name, hashlib.sha256(secret.encode()).digest(), users=frozenset(users))


@pytest.fixture
def live(llm: FakeOpenAIServer, store: Path) -> Iterator[LiveServer]:
    seed(store, "bob", "bob keeps bees")
    keys = KeyRing.of(key("ann-app", "ann-key", {"ann"}), key("team", "team-key", {"ann", "carl"}))
    scope = MemoryScope("default", overrides={"memory_store.path": str(store)})
    app = create_app(scope, keys=keys)
    mount_mcp(app, app.state.memoryscope)
    server = LiveServer(app).start()
    yield server
    server.stop()


def test_a_key_reaches_only_its_user_whatever_the_arguments(live: LiveServer, store: Path) -> None:
    async def body(client: Client) -> None:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert "retrieve_memory" in tools and "delete_memory" in tools
        added = await client.call_tool("add_memory", {"user_input": "I play the guitar", "user_id": "bob"})
        assert not added.is_error, text_of(added)
        listed = text_of(await client.call_tool("list_memory", {"user_id": "bob", "user": "bob"}))
        assert "I play the guitar" in listed and "bees" not in listed
        bobs = await client.call_tool("retrieve_memory", {"query": "bees", "user_id": "bob"})
        assert "bees" not in text_of(bobs)

    run_client(connect(live, Authorization="Bearer ann-key"), body)
    with MemoryScope("default", overrides={"memory_store.path": str(store)}) as scope:
        assert [r.memory for r in scope.get_all("bob")] == ["bob keeps bees"]
        assert [r.memory for r in scope.get_all("ann")] == ["I play the guitar"]


def test_the_user_header_is_checked_against_the_keys_scope(live: LiveServer) -> None:
    url = f"{live.url}/mcp"
    outside = requests.post(url, json=INITIALIZE, headers={**MCP_HEADERS, "X-API-Key": "ann-key", "X-MemoryScope-User": "bob"})
    assert outside.status_code == 403 and outside.json()["error"]["code"] == "forbidden"
    several = requests.post(url, json=INITIALIZE, headers={**MCP_HEADERS, "X-API-Key": "team-key"})
    assert several.status_code == 422 and "X-MemoryScope-User" in several.json()["error"]["message"]

    async def body(client: Client) -> None:
        await client.call_tool("add_memory", {"user_input": "I like jazz"})

    run_client(connect(live, Authorization="Bearer team-key", **{"X-MemoryScope-User": "carl"}), body)
    listed = requests.get(f"{live.url}/v1/users/carl/memories", headers={"X-API-Key": "team-key"}, timeout=30).json()
    assert [m["memory"] for m in listed["memories"]] == ["I like jazz"]


def test_without_a_valid_key_the_endpoint_answers_401(live: LiveServer) -> None:
    url = f"{live.url}/mcp"
    missing = requests.post(url, json=INITIALIZE, headers=MCP_HEADERS, timeout=30)
    assert missing.status_code == 401 and missing.headers["WWW-Authenticate"] == "Bearer"
    wrong = requests.post(url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Bearer nope"}, timeout=30)
    assert wrong.status_code == 401 and "nope" not in wrong.text
    right = requests.post(url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Bearer ann-key"}, timeout=30)
    assert right.status_code == 200, right.text


def test_mounting_twice_keeps_one_endpoint(llm: FakeOpenAIServer, store: Path) -> None:
    scope = MemoryScope("default", overrides={"memory_store.path": str(store)})
    app = create_app(scope)
    first = mount_mcp(app, app.state.memoryscope)
    assert mount_mcp(app, app.state.memoryscope) is first
    assert [getattr(route, "path", None) for route in app.router.routes].count("/mcp") == 1
    scope.close()


def test_a_model_failure_hides_its_detail_from_a_users_key(live: LiveServer, llm: FakeOpenAIServer) -> None:
    """The upstream model's answer and host stay in the server's log; the tool error says the kind and an incident."""

    async def body(client: Client) -> None:
        await client.call_tool("add_memory", {"user_input": "I play the guitar"})
        llm.fail_next(count=20, status=400, body="upstream says: quota of org-7731 exceeded")
        failed = await client.call_tool("consolidate_memory", {})
        text = text_of(failed)
        assert failed.is_error and "model_error: the server failed on this call (incident " in text
        assert "org-7731" not in text and "127.0.0.1" not in text

    run_client(connect(live, Authorization="Bearer ann-key"), body)
