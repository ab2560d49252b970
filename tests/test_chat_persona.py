"""A persona per chat (`memory_chat.<name>.system_prompt`) and per call (`system_prompt=`), as the
system prompt the fake OpenAI-compatible server receives."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memoryscope.app import MemoryScope
from memoryscope.errors import ConfigError
from memoryscope.testing.fake_openai import FakeOpenAIServer

T0 = datetime(2024, 10, 26, 21, 26, 20, tzinfo=timezone(timedelta(hours=8)))
CAT = "My cat is called Mochi and she is three years old"
PERSONA = 'You are {assistant}, a pirate who helps {user}. It is {now}. Answer as JSON: {"answer": "..."} about {topic}.'


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    fake = fake_openai
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", fake.base_url)
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-test-1234")
    monkeypatch.setenv("MEMORYSCOPE_LLM_MODEL", "fake-qwen")
    yield fake


def open_scope(tmp_path: Path, **overrides: Any) -> MemoryScope:
    base = {"memory_store.path": str(tmp_path / "m.db"), "global.timezone": "Asia/Shanghai"}
    return MemoryScope("default", overrides={**base, **overrides})


def last_system_prompt(server: FakeOpenAIServer) -> str:
    bodies = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    prompt: str = [body for body in bodies if body["messages"][0]["role"] == "system"][-1]["messages"][0]["content"]
    return prompt


def test_the_chats_persona_introduces_every_turn_with_its_placeholders_filled(tmp_path: Path, server: FakeOpenAIServer) -> None:
    with open_scope(tmp_path, **{"memory_chat.api_memory_chat.system_prompt": PERSONA}) as scope:
        chat = scope.default_memory_chat.for_user("ann")
        chat.run_service_operation("add_memory", new_memories=(CAT,))
        chat.chat_with_memory("what is my cat called?", query_time=T0)
        first = last_system_prompt(server)
        chat.chat_with_memory("and how old is she?", query_time=T0 + timedelta(minutes=1))
        second = last_system_prompt(server)
    expected = 'You are assistant, a pirate who helps ann. It is 2024-10-26 21:26:20 Sat. Answer as JSON: {"answer": "..."}'
    assert first.startswith(expected + " about {topic}.\n")  # unknown braces are left as written
    assert "a helpful assistant with long-term memory" not in first  # the default introduction is replaced
    assert CAT in first  # the memories still follow it
    assert second.startswith("You are assistant, a pirate who helps ann. It is 2024-10-26 21:27:20 Sat.")


def test_a_calls_system_prompt_replaces_the_chats_persona_for_that_call(tmp_path: Path, server: FakeOpenAIServer) -> None:
    with open_scope(tmp_path, **{"memory_chat.api_memory_chat.system_prompt": PERSONA}) as scope:
        chat = scope.default_memory_chat
        chat.chat_with_memory("hello", system_prompt="You are a cat called {assistant}.", query_time=T0)
        assert last_system_prompt(server).startswith("You are a cat called assistant.\n")
        assert "pirate" not in last_system_prompt(server)
        asyncio.run(chat.achat_with_memory("hello again", query_time=T0))  # the next call: the chat's persona again
        assert last_system_prompt(server).startswith("You are assistant, a pirate who helps user.")


def test_without_a_persona_the_default_introduction_stays(tmp_path: Path, server: FakeOpenAIServer) -> None:
    with open_scope(tmp_path) as scope:
        scope.default_memory_chat.chat_with_memory("hello", query_time=T0)
    assert last_system_prompt(server).startswith(
        "You are assistant, a helpful assistant with long-term memory of the user, user.\n"
        "The current time is 2024-10-26 21:26:20 Sat."
    )


def test_a_misspelt_persona_key_names_its_yaml_path(tmp_path: Path, server: FakeOpenAIServer) -> None:
    with pytest.raises(ConfigError, match=r"memory_chat\.api_memory_chat\.system_promt"):
        open_scope(tmp_path, **{"memory_chat.api_memory_chat.system_promt": PERSONA})
