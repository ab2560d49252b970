"""The chat remembers both sides of a turn (MemoryScope 0.1.x did): the user's message and the
assistant's reply are stored as conversation memories, so "what did you recommend last time?"
can be answered. Through the public chat API, the fake OpenAI-compatible server over real HTTP
and the real SQLite store."""

from __future__ import annotations

import _thread
import asyncio
import io
import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryscope.app import MemoryScope
from memoryscope.chat.api_memory_chat import ApiMemoryChat
from memoryscope.memory import MemoryNode, MemoryType, embedding_text
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.transfer import export_memories

pytestmark = pytest.mark.slow  # whole chats through the fake model; `-m "not slow"` leaves it out

SHANGHAI = timezone(timedelta(hours=8))
T0 = datetime(2024, 10, 26, 21, 26, 20, tzinfo=SHANGHAI)
LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL")
ASK_BOOK = "Can you recommend a novel set in Kyoto?"
RECOMMENDATION = "I recommend The Old Capital by Yasunari Kawabata."
INTERRUPTED = "this question is interrupted"


@pytest.fixture
def server(fake_openai: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    fake = fake_openai
    fake.add_rule("recommend a novel", RECOMMENDATION)
    yield fake


def open_scope(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeOpenAIServer, **overrides: Any) -> MemoryScope:
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", server.base_url)
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-test-1234")
    monkeypatch.setenv("MEMORYSCOPE_LLM_MODEL", "fake-qwen")
    base = {"memory_store.path": str(tmp_path / "m.db"), "global.timezone": "Asia/Shanghai"}
    return MemoryScope("default", overrides={**base, **overrides})


@pytest.fixture
def online(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeOpenAIServer) -> Iterator[MemoryScope]:
    with open_scope(tmp_path, monkeypatch, server) as scope:
        assert scope.has_generation_model
        yield scope


def chat_of(scope: MemoryScope) -> ApiMemoryChat:
    chat = scope.default_memory_chat
    assert isinstance(chat, ApiMemoryChat)
    return chat


def conversation(scope: MemoryScope, user: str) -> list[MemoryNode]:
    """The user's stored messages in the order they were said."""
    assert scope.store is not None
    nodes = scope.store.scan(MemoryFilter(user_name=user, memory_types=(MemoryType.CONVERSATION,)), newest_first=False)
    return sorted(nodes, key=lambda node: (node.message_time or node.created_at, node.created_at))


def said(scope: MemoryScope, user: str) -> list[tuple[str, str]]:
    return [(str(node.meta["role"]), node.content) for node in conversation(scope, user)]


def reply_prompts(server: FakeOpenAIServer) -> list[list[dict[str, str]]]:
    """The messages of every reply request (those that start with the chat's system prompt)."""
    bodies = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    return [body["messages"] for body in bodies if body["messages"][0]["role"] == "system"]


# -- both sides are stored -----------------------------------------------------------------------


def test_an_export_after_a_chat_holds_the_users_messages_and_the_assistants_replies(online: MemoryScope) -> None:
    """The report: an export after 9 turns held 9 user messages and 0 assistant messages."""
    chat = chat_of(online)
    for minute in range(3):
        chat.chat_with_memory(f"message number {minute}", query_time=T0 + timedelta(minutes=minute))
    assert online.store is not None
    out = io.StringIO()
    export_memories(online.store, out, user_name=chat.user_name)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    roles = [row["meta"]["role"] for row in rows if row.get("memory_type") == "conversation"]
    assert sorted(roles) == ["assistant"] * 3 + ["user"] * 3


def test_the_reply_is_stored_after_the_message_with_its_role_speaker_and_time(online: MemoryScope) -> None:
    chat = chat_of(online)
    chat.chat_with_memory(ASK_BOOK, query_time=T0)
    message, reply = conversation(online, chat.user_name)
    assert (message.content, message.meta["role"], message.meta["speaker"]) == (ASK_BOOK, "user", chat.user_name)
    assert (reply.content, reply.meta["role"], reply.meta["speaker"]) == (RECOMMENDATION, "assistant", chat.assistant_name)
    assert reply.message_time == message.message_time == T0
    assert message.created_at < reply.created_at  # the order they were said in
    assert chat.turns[-1].stored_ids == (message.memory_id, reply.memory_id)
    assert chat.turns[-1].reply_ids == (reply.memory_id,)


def test_both_messages_are_stored_by_one_run_of_the_store_operation(online: MemoryScope) -> None:
    chat = chat_of(online)
    chat.chat_with_memory(ASK_BOOK, query_time=T0)
    assert online.store is not None
    created = [change for change in online.store.history(user_name=chat.user_name) if change.action == "created"]
    assert len(created) == 2
    assert {(change.operation, change.run_id) for change in created} == {("read_message", created[0].run_id)}


def test_what_did_you_recommend_finds_the_earlier_reply(online: MemoryScope, server: FakeOpenAIServer) -> None:
    chat = chat_of(online)
    chat.chat_with_memory(ASK_BOOK, query_time=T0)
    later = chat.for_user(chat.user_name)  # a new session: the reply can only come from memory
    response = later.chat_with_memory("What did you recommend last time?", query_time=T0 + timedelta(days=2))
    assert any(line.endswith(f"] assistant: {RECOMMENDATION}") for line in response.meta_data["memory_lines"])
    sent = reply_prompts(server)[-1]
    assert [message["role"] for message in sent] == ["system", "user"]  # no earlier turns were sent
    assert RECOMMENDATION in sent[0]["content"]


def test_streamed_whole_and_closed_early_replies_are_stored_as_far_as_they_were_read(online: MemoryScope) -> None:
    chat = chat_of(online)
    pieces = list(chat.chat_with_memory(ASK_BOOK, stream=True, query_time=T0))
    assert "".join(piece.delta for piece in pieces) == RECOMMENDATION
    stream = chat.chat_with_memory(ASK_BOOK, stream=True, query_time=T0 + timedelta(minutes=1))
    first = next(stream)
    stream.close()  # the reader stopped after the first piece
    assert first.message.content.strip() and first.message.content != RECOMMENDATION
    assert said(online, chat.user_name) == [
        ("user", ASK_BOOK),
        ("assistant", RECOMMENDATION),
        ("user", ASK_BOOK),
        ("assistant", first.message.content.strip()),
    ]


def test_async_whole_and_streamed_replies_are_stored(online: MemoryScope) -> None:
    chat = chat_of(online)

    async def ask() -> list[str]:
        await chat.achat_with_memory(ASK_BOOK, query_time=T0)
        stream = await chat.achat_with_memory(ASK_BOOK, stream=True, query_time=T0 + timedelta(minutes=1))
        return [piece.delta async for piece in stream]

    assert "".join(asyncio.run(ask())) == RECOMMENDATION
    assert said(online, chat.user_name) == [("user", ASK_BOOK), ("assistant", RECOMMENDATION)] * 2


def test_remember_response_false_stores_neither_side(online: MemoryScope) -> None:
    chat = chat_of(online)
    response = chat.chat_with_memory(ASK_BOOK, remember_response=False)
    assert response.message.content == RECOMMENDATION
    assert said(online, chat.user_name) == []
    assert chat.turns == []


def test_pop_turns_forgets_the_message_and_the_reply(online: MemoryScope) -> None:
    chat = chat_of(online)
    chat.chat_with_memory("hello there", query_time=T0)
    chat.chat_with_memory(ASK_BOOK, query_time=T0 + timedelta(minutes=1))
    chat.pop_turns(1)
    assert said(online, chat.user_name) == [("user", "hello there"), ("assistant", "This is a fake reply.")]


def test_retrying_a_good_turn_replaces_its_stored_reply(online: MemoryScope, server: FakeOpenAIServer) -> None:
    chat = chat_of(online)
    chat.chat_with_memory(ASK_BOOK, query_time=T0)
    server.clear_rules()
    server.add_rule("recommend a novel", "Try Snow Country instead.")
    chat.retry(stream=False)
    assert said(online, chat.user_name) == [("user", ASK_BOOK), ("assistant", "Try Snow Country instead.")]


def test_without_an_llm_only_the_message_is_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The memories listed instead of a reply are not a reply: storing them would echo memories."""
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    with MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "m.db")}) as scope:
        chat = chat_of(scope)
        chat.chat_with_memory(ASK_BOOK, query_time=T0)
        assert said(scope, chat.user_name) == [("user", ASK_BOOK)]


def test_the_reply_vector_is_the_one_the_store_would_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeOpenAIServer
) -> None:
    """With a remote embedding model: one request embeds the query and the message before
    retrieval, one the reply after it; each stored vector is what the store itself would make."""
    monkeypatch.setenv("MEMORYSCOPE_TEST_EMBEDDING_KEY", "sk-test-embed")
    remote = {
        "model.embedding_model.module_name": "bge_embedding",
        "model.embedding_model.model_name": "fake-bge",
        "model.embedding_model.api_base": server.base_url,
        "model.embedding_model.api_key_env": "MEMORYSCOPE_TEST_EMBEDDING_KEY",
    }
    with open_scope(tmp_path, monkeypatch, server, **remote) as scope:
        chat = chat_of(scope)
        server.clear_requests()
        chat.chat_with_memory(ASK_BOOK, query_time=T0)
        assert len([r for r in server.requests if r.path.endswith("/embeddings")]) == 2
        store = scope.store
        assert store is not None
        nodes = conversation(scope, chat.user_name)
        assert [node.meta["role"] for node in nodes] == ["user", "assistant"]
        stored = store.get_vectors([node.memory_id for node in nodes])
        fresh = store.embedding_model.embed_passages([embedding_text(node) for node in nodes])
        for node, vector in zip(nodes, fresh, strict=True):
            np.testing.assert_allclose(stored[node.memory_id], vector, atol=1e-6)


# -- Ctrl-C while the reply is awaited ------------------------------------------------------------


def interrupt_the_caller(_: dict[str, Any]) -> str:
    """A reply that arrives only after the caller pressed Ctrl-C (a SIGINT for the main thread)."""
    _thread.interrupt_main()
    return "too late"


def test_ctrl_c_during_a_reply_keeps_the_message_and_retry_asks_it_again(online: MemoryScope, server: FakeOpenAIServer) -> None:
    chat = chat_of(online)
    server.add_rule(INTERRUPTED, interrupt_the_caller)
    with pytest.raises(KeyboardInterrupt):
        chat.chat_with_memory(INTERRUPTED, query_time=T0)
    assert chat.turns == []
    assert said(online, chat.user_name) == [("user", INTERRUPTED)]  # it was said
    server.remove_rule(INTERRUPTED)
    server.add_rule(INTERRUPTED, "Answered at last.")
    assert chat.retry(stream=False).message.content == "Answered at last."
    assert said(online, chat.user_name) == [("user", INTERRUPTED), ("assistant", "Answered at last.")]
    assert len(chat.turns[-1].stored_ids) == 2


def test_ctrl_c_during_an_async_reply_keeps_the_message_and_retry_asks_it_again(
    online: MemoryScope, server: FakeOpenAIServer
) -> None:
    chat = chat_of(online)
    server.add_rule(INTERRUPTED, interrupt_the_caller)
    with pytest.raises(KeyboardInterrupt):  # asyncio.run turns Ctrl-C into a cancelled task, then re-raises it
        asyncio.run(chat.achat_with_memory(INTERRUPTED, query_time=T0))
    assert chat.turns == []
    assert said(online, chat.user_name) == [("user", INTERRUPTED)]
    server.remove_rule(INTERRUPTED)
    server.add_rule(INTERRUPTED, "Answered at last.")
    assert chat.retry(stream=False).message.content == "Answered at last."
    assert said(online, chat.user_name) == [("user", INTERRUPTED), ("assistant", "Answered at last.")]
