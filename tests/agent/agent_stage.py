"""Helpers for the agent tests: a scope on the `agent` config whose LLM is the fake
OpenAI-compatible server, and shorthands for scripting the model's steps."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from memoryscope.app import MemoryScope
from memoryscope.testing.fake_openai import FakeOpenAIServer, FakeToolCalls

NO_SCHEDULER = "memory_service.memoryscope_service.enable_scheduler"


def agent_scope(
    path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeOpenAIServer, config: str = "agent", **overrides: Any
) -> MemoryScope:
    """The `agent` config on the SQLite file `path`, its model the fake server; no background
    runs unless asked (they would take the scripted replies)."""
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", fake.base_url)
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-agent-test")
    monkeypatch.setenv("MEMORYSCOPE_LLM_MODEL", "fake-qwen")
    settings = {"memory_store.path": str(path), NO_SCHEDULER: False, **overrides}
    return MemoryScope(config, overrides=settings)


@contextmanager
def opened(path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeOpenAIServer, **overrides: Any) -> Iterator[MemoryScope]:
    scope = agent_scope(path, monkeypatch, fake, **overrides)
    try:
        yield scope
    finally:
        scope.close(timeout=5)


def call(name: str, heartbeat: bool = False, **arguments: Any) -> tuple[str, dict[str, Any]]:
    return name, {**arguments, "request_heartbeat": heartbeat}


def step(*calls: tuple[str, Any], thought: str = "") -> FakeToolCalls:
    return FakeToolCalls(calls=calls, content=thought)


def say(message: str, thought: str = "") -> FakeToolCalls:
    return step(call("send_message", message=message), thought=thought)


def agent_requests(fake: FakeOpenAIServer) -> list[dict[str, Any]]:
    """The bodies of the requests that offered tools (the agent's steps), in order."""
    return [
        r.body for r in fake.requests if r.path.endswith("/chat/completions") and isinstance(r.body, dict) and r.body.get("tools")
    ]


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results a request carried, their content parsed."""
    return [{**m, "content": json.loads(m["content"])} for m in body["messages"] if m.get("role") == "tool"]
