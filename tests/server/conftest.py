"""Fixtures for the server tests: a real MemoryScope on a temp SQLite file, the fake
OpenAI-compatible server as its LLM, served by a real uvicorn on 127.0.0.1 (`LiveServer`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the server tests need the server extra: pip install 'memoryscope[server]'")

from memoryscope.app import MemoryScope
from memoryscope.server.access import KeyRing
from memoryscope.server.app import create_app
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.testing.live_server import LiveServer

LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL", "MEMORYSCOPE_STORE_PATH")

ScopeFactory = Callable[..., MemoryScope]
ServeFactory = Callable[..., LiveServer]


@pytest.fixture
def make_scope(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> Iterator[ScopeFactory]:
    """`make_scope(**overrides)`: the `default` config on a temp SQLite file, its LLM the fake
    server (`llm=False`: no LLM, as offline). Closed at the end unless a server closed it."""
    made: list[MemoryScope] = []

    def make(llm: bool = True, **overrides: Any) -> MemoryScope:
        for name in LLM_ENV:
            monkeypatch.delenv(name, raising=False)
        if llm:
            monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", fake_openai.base_url)
            monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-test-llm")
            monkeypatch.setenv("MEMORYSCOPE_LLM_MODEL", "fake-qwen")
        base = {"memory_store.path": str(tmp_path / f"server-{len(made)}.db")}
        scope = MemoryScope("default", overrides={**base, **overrides})
        made.append(scope)
        return scope

    yield make
    for scope in made:
        scope.close(timeout=5)  # closing twice is harmless


@pytest.fixture
def serve(make_scope: ScopeFactory) -> Iterator[ServeFactory]:
    """`serve(scope=None, keys=None, **server_settings)`: a real uvicorn serving the app; stopped at the end."""
    running: list[LiveServer] = []

    def start(scope: MemoryScope | None = None, keys: KeyRing | None = None, **settings: Any) -> LiveServer:
        scope = scope or make_scope()
        server_settings = scope.config.server.model_copy(update=settings) if settings else None
        live = LiveServer(create_app(scope, settings=server_settings, keys=keys)).start()
        running.append(live)
        return live

    yield start
    for live in running:
        live.stop()
