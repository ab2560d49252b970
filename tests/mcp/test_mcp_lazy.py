"""`/mcp` as `create_app` routes it: the MCP SDK is not imported until the first MCP call that
passes the checks, then the SDK's own client works through it. A real uvicorn; the import check
runs in a fresh interpreter (this one has imported the SDK already)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from mcp import Client
from mcp_session import connect, llm_env, run_client, seed, text_of

from memoryscope.app import MemoryScope
from memoryscope.server.access import ApiKey, KeyRing
from memoryscope.server.app import create_app
from memoryscope.server.mcp_endpoint import McpEndpoint
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.testing.live_server import LiveServer

pytestmark = pytest.mark.slow  # a real uvicorn and a second interpreter

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}  # fmt: skip
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

# In a fresh interpreter: serve an app, call /mcp without a key, then with one; print which of the
# SDK's modules were imported at each step and the statuses.
_PROBE = textwrap.dedent(
    """
    import hashlib, json, sys
    import requests
    from memoryscope.app import MemoryScope
    from memoryscope.server.access import ApiKey, KeyRing
    from memoryscope.server.app import create_app
    from memoryscope.testing.live_server import LiveServer

    def sdk():
        return sorted(name for name in sys.modules if name == "mcp" or name.startswith("mcp."))

    initialize, headers = json.loads(sys.argv[2]), json.loads(sys.argv[3])
    keys = KeyRing.of(ApiKey("ann-app", hashlib.sha256(b"ann-key").digest(), users=frozenset({"ann"})))
    scope = MemoryScope("default", overrides={"memory_store.path": sys.argv[1]})
    seen = {"built": sdk()}
    with LiveServer(create_app(scope, keys=keys)) as server:
        seen["started"] = sdk()
        seen["health"] = requests.get(server.url + "/healthz", timeout=30).status_code
        seen["no_key"] = requests.post(server.url + "/mcp", json=initialize, headers=headers, timeout=30).status_code
        seen["after_refusal"] = sdk()
        keyed = {**headers, "Authorization": "Bearer ann-key"}
        seen["keyed"] = requests.post(server.url + "/mcp", json=initialize, headers=keyed, timeout=60).status_code
        seen["after_call"] = "mcp.server.mcpserver" in sys.modules
    print(json.dumps(seen))
    """
)


def key(name: str, secret: str, users: set[str]) -> ApiKey:
    return ApiKey(name, hashlib.sha256(secret.encode()).digest(), users=frozenset(users))


def test_the_sdk_is_imported_at_the_first_call_that_passes_the_checks(llm: FakeOpenAIServer, store: Path) -> None:
    arguments = [str(store), json.dumps(INITIALIZE), json.dumps(MCP_HEADERS)]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *arguments], capture_output=True, text=True, timeout=120, env=_env(llm), check=False
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["built"] == [] and seen["started"] == [], "the MCP SDK was imported before any MCP call"
    assert seen["health"] == 200
    assert seen["no_key"] == 401 and seen["after_refusal"] == [], "a refused call must not import the SDK"
    assert seen["keyed"] == 200 and seen["after_call"] is True


@pytest.fixture
def live(llm: FakeOpenAIServer, store: Path) -> Iterator[LiveServer]:
    seed(store, "bob", "bob keeps bees")
    keys = KeyRing.of(key("ann-app", "ann-key", {"ann"}))
    app = create_app(MemoryScope("default", overrides={"memory_store.path": str(store)}), keys=keys)
    server = LiveServer(app).start()
    yield server
    server.stop()


def test_the_sdk_client_works_through_the_endpoint_built_at_first_call(live: LiveServer, store: Path) -> None:
    """No `mount_mcp`: the endpoint `create_app` routed builds the server at the first call, and
    the key still reaches only its user."""

    async def body(client: Client) -> None:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert {"retrieve_memory", "add_memory"} <= tools
        added = await client.call_tool("add_memory", {"user_input": "I play the guitar", "user_id": "bob"})
        assert not added.is_error, text_of(added)
        listed = text_of(await client.call_tool("list_memory", {}))
        assert "I play the guitar" in listed and "bees" not in listed

    run_client(connect(live, Authorization="Bearer ann-key"), body)
    with MemoryScope("default", overrides={"memory_store.path": str(store)}) as scope:
        assert [r.memory for r in scope.get_all("ann")] == ["I play the guitar"]
        assert [r.memory for r in scope.get_all("bob")] == ["bob keeps bees"]


def test_a_build_that_fails_fails_the_calls_not_the_server(llm: FakeOpenAIServer, store: Path) -> None:
    """A broken install surfaces as a 500 on `/mcp`, while the rest of the API keeps answering."""
    scope = MemoryScope("default", overrides={"memory_store.path": str(store)})
    app = create_app(scope)
    endpoint = app.state.memoryscope_mcp_endpoint
    assert isinstance(endpoint, McpEndpoint)

    def broken() -> None:
        raise ImportError("no module named 'mcp.server.mcpserver'")

    endpoint._build = broken  # the SDK's import, as a half-installed SDK fails it (the endpoint itself is real)
    with LiveServer(app) as server:
        failed = requests.post(f"{server.url}/mcp", json=INITIALIZE, headers=MCP_HEADERS, timeout=30)
        assert failed.status_code == 500
        assert requests.get(f"{server.url}/healthz", timeout=30).status_code == 200
        again = requests.post(f"{server.url}/mcp", json=INITIALIZE, headers=MCP_HEADERS, timeout=30)
        assert again.status_code == 500


def _env(llm: FakeOpenAIServer) -> dict[str, str]:
    return {**os.environ, **llm_env(llm)}
