"""Fixtures for the one-door parity suite: per config, one MemoryScope on a SQLite file served by a
real uvicorn (REST, the client, MCP at /mcp, with API keys scoped to ann and to bob), the fake
OpenAI-compatible server as its LLM; the Python face is that MemoryScope, the CLI runs on its file."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the parity suite drives MCP: pip install 'memoryscope[mcp]'")
sys.path.insert(0, str(Path(__file__).parent))

from door_faces import ZONE, ServedDoor, api_key

from memoryscope.app import MemoryScope
from memoryscope.server.access import KeyRing
from memoryscope.server.app import create_app
from memoryscope.server.routes_mcp import mount_mcp
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.testing.live_server import LiveServer


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def _served(config: str, tmp: Path, llm: FakeOpenAIServer) -> Iterator[ServedDoor]:
    # the environment only while the scope is built (it is read then): a module-scoped fixture
    # holding it set would leak it into whatever runs before its teardown
    environment: dict[str, str | None] = {
        "MEMORYSCOPE_STORE_PATH": None, "MEMORYSCOPE_LLM_MODEL": None, "MEMORYSCOPE_LLM_API_BASE": llm.base_url,
        "MEMORYSCOPE_LLM_API_KEY": "sk-test-llm", "MEMORYSCOPE_TIMEZONE": ZONE,
    }  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environment.items():
            patch.delenv(name, raising=False) if value is None else patch.setenv(name, value)
        store = tmp / f"{config}.db"
        scope = MemoryScope(config, overrides={"memory_store.path": str(store)})
    app = create_app(scope, keys=KeyRing.of(api_key("ann"), api_key("bob")))
    mount_mcp(app, app.state.memoryscope)
    server = LiveServer(app).start()
    try:
        yield ServedDoor(config, scope, server, store, environment)
    finally:
        server.stop()
        scope.close(timeout=5)


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory, llm: FakeOpenAIServer) -> Iterator[ServedDoor]:
    """The `default` config, served."""
    yield from _served("default", tmp_path_factory.mktemp("door"), llm)


@pytest.fixture(scope="module", params=["default", "memoryos", "agent"])
def policy_door(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, llm: FakeOpenAIServer
) -> Iterator[ServedDoor]:
    """Each memory policy's config, served."""
    yield from _served(request.param, tmp_path_factory.mktemp(request.param), llm)
