"""`api_memory_chat`: replies with memories, streaming, async, retry/undo, without an LLM and with
one on the fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, ClassVar

import pytest

from memoryscope.app import MemoryScope
from memoryscope.chat.api_memory_chat import ApiMemoryChat
from memoryscope.config.source import read_config_source
from memoryscope.context import MemoryContext
from memoryscope.errors import ModelError, UnknownNameError
from memoryscope.memory import MemoryType
from memoryscope.models.base import ChatMessage
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.worker import Worker, register_worker

SHANGHAI = timezone(timedelta(hours=8))
T0 = datetime(2024, 10, 26, 21, 26, 20, tzinfo=SHANGHAI)
LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL")
CAT = "My cat is called Mochi and she is three years old"
REPLY = "Your cat is called Mochi."


def overrides(tmp_path: Path) -> dict[str, Any]:
    return {"memory_store.path": str(tmp_path / "m.db"), "global.timezone": "Asia/Shanghai"}


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryScope]:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    with MemoryScope("default", overrides=overrides(tmp_path)) as scope:
        yield scope


@pytest.fixture
def server(fake_openai: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    fake = fake_openai
    fake.add_rule("what is my cat called", REPLY)
    yield fake


@pytest.fixture
def online(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeOpenAIServer) -> Iterator[MemoryScope]:
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", server.base_url)
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-test-1234")
    monkeypatch.setenv("MEMORYSCOPE_LLM_MODEL", "fake-qwen")
    with MemoryScope("default", overrides=overrides(tmp_path)) as scope:
        assert scope.has_generation_model
        yield scope


def chat_of(scope: MemoryScope) -> ApiMemoryChat:
    chat = scope.default_memory_chat
    assert isinstance(chat, ApiMemoryChat)
    return chat


def stored_messages(scope: MemoryScope, user: str) -> list[str]:
    assert scope.store is not None
    nodes = scope.store.scan(MemoryFilter(user_name=user, memory_types=(MemoryType.CONVERSATION,)))
    return sorted(node.content for node in nodes)


def chat_requests(server: FakeOpenAIServer) -> list[Any]:
    return [request for request in server.requests if request.path.endswith("/chat/completions")]


# -- without an LLM ----------------------------------------------------------------------------


def test_without_an_llm_the_reply_lists_the_memories_with_one_notice(offline: MemoryScope) -> None:
    chat = chat_of(offline)
    chat.run_service_operation("add_memory", new_memories=(CAT,))
    first = chat.chat_with_memory("what is my cat called?", query_time=T0)
    assert first.message.content.startswith("No LLM is configured")
    assert any("Mochi" in line for line in first.meta_data["memory_lines"])
    assert CAT in first.message.content
    second = chat.chat_with_memory("how old is my cat?", query_time=T0 + timedelta(minutes=1))
    assert "No LLM is configured" not in second.message.content  # said once per chat
    assert second.message.content.startswith("What I remember that fits your message:")
    assert CAT in second.message.content
    assert "notice" in second.meta_data
    assert stored_messages(offline, chat.user_name) == ["how old is my cat?", "what is my cat called?"]
    assert [message.role for message in chat.history] == ["user", "assistant", "user", "assistant"]


def test_without_an_llm_streaming_and_async_still_answer(offline: MemoryScope) -> None:
    chat = chat_of(offline)
    chat.run_service_operation("add_memory", new_memories=(CAT,))
    pieces = list(chat.chat_with_memory("what is my cat called?", stream=True))
    assert len(pieces) == 1
    assert pieces[0].meta_data["delta"] == pieces[0].message.content
    assert CAT in pieces[0].message.content

    async def ask() -> tuple[Any, list[Any]]:
        whole = await chat.achat_with_memory("tell me about my cat")
        streamed = [piece async for piece in await chat.achat_with_memory("and her age?", stream=True)]
        return whole, streamed

    whole, streamed = asyncio.run(ask())
    assert CAT in whole.message.content
    assert len(streamed) == 1 and CAT in streamed[0].meta_data["delta"]
    assert len(chat.turns) == 3


# -- with an LLM on the fake server --------------------------------------------------------------


def test_reply_uses_memories_and_the_current_time(online: MemoryScope, server: FakeOpenAIServer) -> None:
    chat = chat_of(online)
    chat.run_service_operation("add_memory", new_memories=(CAT,))
    response = chat.chat_with_memory("what is my cat called?", query_time=T0)
    assert response.message.content == REPLY
    assert any(CAT in line for line in response.meta_data["memory_lines"])
    timings = response.meta_data["timings"]
    assert {"set_query", "retrieve_obs_ins", "fuse_rerank", "retrieve_memory", "generation"} <= set(timings)
    system = chat_requests(server)[-1].body["messages"][0]["content"]
    assert "The current time is 2024-10-26 21:26:20 Sat." in system
    assert CAT in system
    assert stored_messages(online, chat.user_name) == [REPLY, "what is my cat called?"]  # both sides


def test_streaming_yields_deltas_that_add_up_to_the_reply(online: MemoryScope) -> None:
    chat = chat_of(online)
    pieces = list(chat.chat_with_memory("what is my cat called?", stream=True))
    deltas = [piece.meta_data["delta"] for piece in pieces]
    assert len(deltas) > 1
    assert "".join(deltas) == REPLY
    assert pieces[-1].message.content == REPLY
    assert chat.turns[-1].reply == REPLY
    assert stored_messages(online, chat.user_name) == [REPLY, "what is my cat called?"]


def test_async_chat_whole_and_streamed(online: MemoryScope, server: FakeOpenAIServer) -> None:
    chat = chat_of(online)
    chat.run_service_operation("add_memory", new_memories=(CAT,))

    async def ask() -> tuple[Any, list[str]]:
        whole = await chat.achat_with_memory("what is my cat called?", query_time=T0)
        stream = await chat.achat_with_memory("what is my cat called, again?", stream=True)
        return whole, [piece.meta_data["delta"] async for piece in stream]

    whole, deltas = asyncio.run(ask())
    assert whole.message.content == REPLY
    assert any(CAT in line for line in whole.meta_data["memory_lines"])
    assert "".join(deltas) == REPLY and len(deltas) > 1
    assert len(chat.turns) == 2
    assert len(chat_requests(server)) == 2
    assert stored_messages(online, chat.user_name) == [REPLY, REPLY, "what is my cat called, again?", "what is my cat called?"]


def test_given_history_replaces_the_chats_own_turns_in_the_prompt(online: MemoryScope, server: FakeOpenAIServer) -> None:
    chat = chat_of(online)
    chat.chat_with_memory("hello there")
    history = [ChatMessage("user", "I just got back from Kyoto"), {"role": "assistant", "content": "Welcome back!"}]
    chat.chat_with_memory("what is my cat called?", history=history)
    sent = chat_requests(server)[-1].body["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "I just got back from Kyoto"),
        ("assistant", "Welcome back!"),
        ("user", "what is my cat called?"),
    ]
    chat.chat_with_memory("what is my cat called?")  # own turns again: both earlier turns
    assert [m["content"] for m in chat_requests(server)[-1].body["messages"][1:]][:2] == ["hello there", "This is a fake reply."]


def test_a_failed_reply_keeps_the_message_and_retry_asks_it_again(online: MemoryScope, server: FakeOpenAIServer) -> None:
    chat = chat_of(online)
    server.fail_next(status=400)  # not retried by the client
    with pytest.raises(ModelError):
        chat.chat_with_memory("what is my cat called?")
    assert chat.turns == []
    assert stored_messages(online, chat.user_name) == ["what is my cat called?"]  # it was said
    response = chat.retry(stream=False)
    assert response.message.content == REPLY
    assert len(chat.turns) == 1
    assert stored_messages(online, chat.user_name) == [REPLY, "what is my cat called?"]
    assert len(chat.turns[0].stored_ids) == 2  # the message stored when the reply failed, and the reply
    again = chat.retry(stream=False)  # retry a good turn: it is replaced, not added
    assert again.message.content == REPLY
    assert len(chat.turns) == 1
    assert stored_messages(online, chat.user_name) == [REPLY, "what is my cat called?"]  # same time: stored once
    chat.pop_turns(1)  # forgets both, the message stored before the retry included
    assert stored_messages(online, chat.user_name) == []


def test_pop_turns_undoes_turns_and_forgets_their_messages(online: MemoryScope) -> None:
    chat = chat_of(online)
    chat.chat_with_memory("first message")
    chat.chat_with_memory("second message")
    chat.chat_with_memory("third message")
    removed = chat.pop_turns(2)
    assert [turn.query for turn in removed] == ["second message", "third message"]
    assert [turn.query for turn in chat.turns] == ["first message"]
    assert stored_messages(online, chat.user_name) == ["This is a fake reply.", "first message"]
    assert chat.pop_turns(5) and chat.turns == []
    assert chat.retry() is None


def test_run_service_operation_returns_readable_text(online: MemoryScope) -> None:
    chat = chat_of(online)
    assert chat.run_service_operation("add_memory", new_memories=(CAT,)) == "added 1 memory"
    found = chat.run_service_operation("retrieve_memory", query="what is my cat called?")
    assert found.startswith("[") and CAT in found
    listing = chat.run_service_operation("list_memory")
    assert "added memory (1)" in listing and CAT in listing
    with pytest.raises(UnknownNameError, match="Did you mean 'list_memory'"):
        chat.run_service_operation("list_memroy")


def test_for_user_chats_with_another_users_memories(online: MemoryScope) -> None:
    ann = chat_of(online).for_user("ann")
    bob = chat_of(online).for_user("bob")
    ann.run_service_operation("add_memory", new_memories=(CAT,))
    assert CAT in ann.run_service_operation("list_memory")
    assert CAT not in bob.run_service_operation("list_memory")


# -- chat turns feed the scheduler ------------------------------------------------------------

SEEN: list[str] = []
SEEN_EVENT = threading.Event()


@register_worker("chat_test_consolidate")
class RecordingWorker(Worker):
    """Stands in for consolidation: notes whose messages it was run for."""

    writes: ClassVar[tuple[str, ...]] = ("result",)

    def run(self, ctx: MemoryContext) -> None:
        SEEN.append(ctx.user_name)
        SEEN_EVENT.set()
        ctx.result = "consolidated"


def test_each_turn_stores_the_message_and_the_scheduler_fires(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    raw, _ = read_config_source("default", overrides(tmp_path))
    operations = raw["memory_service"]["memoryscope_service"]["memory_operations"]
    operations["consolidate_memory"] = {"workflow": "chat_test_consolidate", "trigger_messages": 2}
    SEEN.clear()
    SEEN_EVENT.clear()
    with MemoryScope(config=raw) as scope:
        chat = chat_of(scope).for_user("ann")
        chat.chat_with_memory("I moved to Lisbon last month")
        assert scope.default_service.scheduler.wait_idle(10)
        assert SEEN == []
        chat.chat_with_memory("I work as a nurse there")
        assert SEEN_EVENT.wait(10)
        assert scope.default_service.scheduler.wait_idle(10)
        assert SEEN == ["ann"]
        record = scope.default_service.scheduler.status().last_runs[("ann", "consolidate_memory")]
        assert record.trigger == "2 pending messages (trigger_messages: 2)"
