"""MemoryScope built from the shipped default config: offline, and with an LLM on the fake server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memoryscope.app import MemoryScope
from memoryscope.context import Message
from memoryscope.errors import MemoryScopeError, UnknownNameError
from memoryscope.memory import MemoryType
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.fake_openai import FakeOpenAIServer

T0 = datetime(2024, 10, 26, 21, 26, 20, tzinfo=timezone(timedelta(hours=8)))


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryScope]:
    for name in ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with MemoryScope(
        "default", overrides={"memory_store.path": str(tmp_path / "m.db"), "global.timezone": "Asia/Shanghai"}
    ) as scope:
        yield scope


def remember(scope: MemoryScope, user: str, *texts: str) -> None:
    messages = tuple(Message("user", text, T0 + timedelta(minutes=i), name=user) for i, text in enumerate(texts))
    scope.default_service.run_operation("read_message", user, messages=messages)


def test_without_an_llm_the_generation_model_is_left_out_with_one_notice(offline: MemoryScope) -> None:
    assert not offline.has_generation_model
    assert "generation_model" not in offline.models
    assert any("model.generation_model left out" in notice for notice in offline.notices)


def test_retrieval_returns_the_users_memories_time_stamped(offline: MemoryScope) -> None:
    remember(offline, "ann", "I play the cello in a community orchestra", "I am allergic to shellfish")
    remember(offline, "bob", "I play the drums")
    found = offline.default_service.run_operation("retrieve_memory", "ann", query="what instrument do I play?")
    assert found.context.memories[0].content == "I play the cello in a community orchestra"
    assert all(memory.user_name == "ann" for memory in found.context.memories)
    assert found.context.memories[0].format("en", offline.config.settings.tzinfo) == (
        "[2024-10-26 21:26:20 Sat] I play the cello in a community orchestra"
    )
    assert [name for name, _ in found.timings] == [
        "set_query",
        "extract_time",
        "retrieve_obs_ins",
        "semantic_rank",
        "fuse_rerank",
    ]


def test_chat_without_an_llm_shows_the_memories_instead_of_a_reply(offline: MemoryScope) -> None:
    chat = offline.default_memory_chat
    remember(offline, chat.user_name, "My cat is called Mochi")
    response = chat.chat_with_memory(query="what is my cat called?")
    assert "No LLM is configured" in response.message.content
    assert "Mochi" in response.meta_data["memory_lines"][0]
    assert "Mochi" in response.message.content


def test_concurrent_operations_never_see_each_others_users(offline: MemoryScope) -> None:
    users = [f"user{i}" for i in range(6)]
    for user in users:
        remember(offline, user, f"{user} keeps a pet named Pet-{user}")
    failures: list[str] = []

    def ask(user: str) -> None:
        for _ in range(5):
            found = offline.default_service.run_operation("retrieve_memory", user, query="what is my pet's name?")
            if any(memory.user_name != user for memory in found.context.memories) or not found.context.memories:
                failures.append(user)

    threads = [threading.Thread(target=ask, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_unknown_operation_and_inputs_are_clear_errors(offline: MemoryScope) -> None:
    with pytest.raises(UnknownNameError, match="Did you mean 'retrieve_memory'"):
        offline.default_service.run_operation("retreive_memory", "ann")
    with pytest.raises(MemoryScopeError, match="unknown inputs \\['querry'\\]"):
        offline.default_service.run_operation("retrieve_memory", "ann", querry="x")


def test_chat_with_an_llm_on_the_fake_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAIServer() as server:
        server.add_rule("what is my cat called", "Your cat is called Mochi.")
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", server.base_url)
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-test-1234")
        monkeypatch.setenv("MEMORYSCOPE_LLM_MODEL", "fake-qwen")
        with MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "m.db")}) as scope:
            assert scope.has_generation_model
            chat = scope.default_memory_chat
            remember(scope, chat.user_name, "My cat is called Mochi")
            response = chat.chat_with_memory(query="what is my cat called?")
            assert response.message.content == "Your cat is called Mochi."
            request = [r for r in server.requests if r.path.endswith("/chat/completions")][-1]
            assert request.body["model"] == "fake-qwen"
            assert request.api_key_suffix == "1234"
            system = request.body["messages"][0]["content"]
            assert "My cat is called Mochi" in system
            assert scope.usage()["generation_model"]["calls"] == 1

            deltas = [piece.meta_data["delta"] for piece in chat.chat_with_memory(query="what is my cat called?", stream=True)]
            assert "".join(deltas) == "Your cat is called Mochi."
            assert len(chat.history) == 4


def test_backend_operations_without_an_llm_are_skipped_and_leave_messages_pending(offline: MemoryScope) -> None:
    remember(offline, "ann", "I play the cello", "I live in Lyon")
    result = offline.default_service.run_operation("consolidate_memory", "ann")
    assert "consolidate_memory needs an LLM" in result.stopped
    assert "info_filter" in result.stopped
    store = offline.store
    assert store is not None
    pending = MemoryFilter(user_name="ann", memory_types=(MemoryType.CONVERSATION,), reflected=False)
    assert store.count(pending) == 2
    assert "consolidate_memory" not in offline.default_service.scheduler.operations
