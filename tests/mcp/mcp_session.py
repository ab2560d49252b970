"""What the MCP tests share: the stdio server's parameters, an SDK client session, the streamable-HTTP
transport to a live server, tool-result text, a seeded store."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP tests need the mcp extra: pip install 'memoryscope[mcp]'")

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult

from memoryscope.app import MemoryScope
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.testing.live_server import LiveServer

LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL", "MEMORYSCOPE_STORE_PATH")


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(part, "text", "") for part in result.content)


def llm_env(fake: FakeOpenAIServer) -> dict[str, str]:
    return {
        "MEMORYSCOPE_LLM_API_BASE": fake.base_url,
        "MEMORYSCOPE_LLM_API_KEY": "sk-test-llm",
        "MEMORYSCOPE_LLM_MODEL": "fake-qwen",
    }


def stdio_server(store: Path, fake: FakeOpenAIServer, *extra: str) -> StdioServerParameters:
    """`python -m memoryscope.cli mcp` on `store`, its LLM the fake server."""
    args = ["-m", "memoryscope.cli", "mcp", "--config", "default", "--store", str(store), *extra]
    return StdioServerParameters(command=sys.executable, args=args, env=llm_env(fake))


def run_client(server: Any, body: Callable[[Client], Awaitable[None]]) -> None:
    """Connect the SDK's client to `server` (stdio parameters or a transport) and run `body` with it."""

    async def main() -> None:
        with anyio.fail_after(60):
            async with Client(server) as client:
                await body(client)

    anyio.run(main)


def seed(store: Path, user: str, text: str) -> str:
    """Store `text` as one memory of `user` in the store file, as given; its id."""
    with MemoryScope("default", overrides={"memory_store.path": str(store)}) as scope:
        return scope.add(text, user_id=user, infer=False)[0].id


@asynccontextmanager
async def connect(live: LiveServer, **headers: str) -> AsyncIterator[Any]:
    """The SDK's streamable-HTTP transport to `/mcp`, sending `headers`; its HTTP client closed after."""
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(f"{live.url}/mcp", http_client=http) as streams,
    ):
        yield streams
