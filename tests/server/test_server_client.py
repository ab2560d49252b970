"""`memoryscope.client` against a real server: uvicorn on 127.0.0.1 serving the default config on a
temp SQLite file, with the fake OpenAI-compatible server as its models."""

from __future__ import annotations

import asyncio
import pickle
import socket
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from memoryscope.client import (
    AsyncMemoryScopeClient,
    ChatResult,
    MemoryScopeClient,
    MemoryScopeClientError,
    RemoteMemory,
)
from memoryscope.errors import MemoryScopeError
from memoryscope.server.access import ApiKey, KeyRing, hash_key
from memoryscope.testing.fake_openai import FakeOpenAIServer
from tests.server.conftest import ServeFactory

pytestmark = pytest.mark.slow  # a real uvicorn; `-m "not slow"` leaves it out

SAID_AT = datetime(2024, 10, 26, 21, 26, 20, tzinfo=timezone(timedelta(hours=8)))
TEA_REPLY = "You drink green tea, every morning."


def raised(call: Any, *args: Any, **kwargs: Any) -> MemoryScopeClientError:
    with pytest.raises(MemoryScopeClientError) as caught:
        call(*args, **kwargs)
    return caught.value


def closed_port_url() -> str:
    """A loopback URL no one listens on (bound for a moment to get a free port, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# -- the memory verbs -----------------------------------------------------------------------------


def test_memory_verbs_round_trip(serve: ServeFactory) -> None:
    """add (as given) → get/search/get_all as typed records → update → history → delete."""
    with MemoryScopeClient(serve().url) as client:
        added = client.add(
            ["prefers green tea", "plays the cello"], "ann", infer=False, time=SAID_AT, metadata={"source": "crm", "rating": 4}
        )
        assert [memory.memory for memory in added] == ["prefers green tea", "plays the cello"]
        tea = added[0]
        assert isinstance(tea, RemoteMemory) and tea.user_id == "ann" and tea.memory_type == "obs_customized"
        assert tea.message_time == SAID_AT and isinstance(tea.created_at, datetime)
        assert tea.metadata == {"source": "crm", "rating": 4} and tea.status == "valid"

        assert client.get(tea.id) == tea
        assert {memory.id for memory in client.get_all("ann")} == {memory.id for memory in added}
        assert [memory.memory for memory in client.get_all("ann", limit=1)] == ["plays the cello"]  # newest first

        hits = client.search("what tea does ann drink?", "ann", top_k=1)
        assert [hit.id for hit in hits] == [tea.id] and hits[0].score is not None
        assert "green tea" in hits[0].text
        assert client.search("tea", "ann", filters={"source": "web"}) == []
        since = client.search("tea", "ann", time_range=(SAID_AT + timedelta(days=1), None))
        assert since == []

        updated = client.update(tea.id, "prefers oolong tea", metadata={"rating": None, "mood": "calm"})
        assert updated.memory == "prefers oolong tea" and updated.metadata == {"source": "crm", "mood": "calm"}
        assert client.get(tea.id) == updated
        assert [change["action"] for change in client.history(tea.id)][:2] == ["created", "updated"]

        assert client.delete(tea.id) is True
        assert client.get(tea.id) is None
        assert client.delete(tea.id) is False
        error = raised(client.update, tea.id, "anything")
        assert (error.status, error.code) == (404, "unknown_memory") and tea.id in error.message
        assert isinstance(error, MemoryScopeError)


def test_add_with_infer_stores_the_conversation(serve: ServeFactory) -> None:
    with MemoryScopeClient(serve().url) as client:
        stored = client.add(
            [{"role": "user", "content": "I moved to Hangzhou"}, {"role": "assistant", "content": "How is it?"}],
            "lin",
            time=SAID_AT,
        )
        assert [(memory.memory, memory.role) for memory in stored] == [
            ("I moved to Hangzhou", "user"),
            ("How is it?", "assistant"),
        ]
        assert {memory.memory_type for memory in stored} == {"conversation"}
        assert all(memory.message_time == SAID_AT for memory in stored)
        assert len(client.get_all("lin", types=["conversation"])) == 2
        assert client.get_all("lin", types=["insight"]) == []
        error = raised(client.add, [{"content": "hi", "mood": "x"}], "lin")
        assert (error.status, error.code) == (422, "invalid_request") and "mood" in error.message


def test_unknown_user_has_no_memories_and_delete_all_counts(serve: ServeFactory) -> None:
    with MemoryScopeClient(serve().url) as client:
        assert client.get_all("nobody") == []
        assert client.search("anything", "nobody") == []
        assert client.profile("nobody") == []
        assert client.delete_all("nobody") == 0
        client.add(["one", "two"], "bob", infer=False)
        client.add(["elsewhere"], "bob", infer=False, workspace="acme")
        assert client.delete_all("bob") == 2
        assert client.get_all("bob") == []
        assert [memory.memory for memory in client.get_all("bob", workspace="acme")] == ["elsewhere"]


def test_user_ids_are_quoted_in_paths(serve: ServeFactory) -> None:
    """Spaces, `?`, `#`, `%` and a bare `..` (which URL normalisation would resolve away) reach their user."""
    with MemoryScopeClient(serve().url) as client:
        for user in ("ann lee", "ü?#&=%", ".."):
            client.add(f"{user} likes jazz", user, infer=False)
            assert [(memory.user_id, memory.memory) for memory in client.get_all(user)] == [(user, f"{user} likes jazz")]


def test_a_user_id_with_a_slash_is_refused_not_misrouted(serve: ServeFactory) -> None:
    """The router reads decoded paths: `a/b` would reach user `a` and another route. It is refused instead."""
    with MemoryScopeClient(serve().url) as client:
        client.add("likes jazz", "a", infer=False)
        for user in ("a/b", "a/memories", "a\\b"):
            error = raised(client.add, "likes blues", user, infer=False)
            assert (error.status, error.code) == (422, "slash_in_id") and "'/'" in error.message
        assert [memory.memory for memory in client.get_all("a")] == ["likes jazz"]  # nothing reached user a


def test_get_all_filters_on_metadata(serve: ServeFactory) -> None:
    with MemoryScopeClient(serve().url) as client:
        client.add("likes tea", "ann", infer=False, metadata={"rating": 2})
        client.add("likes coffee", "ann", infer=False, metadata={"rating": 5})
        assert [memory.memory for memory in client.get_all("ann", filters={"rating": {"gte": 3}})] == ["likes coffee"]


def test_history_of_a_deleted_memory(serve: ServeFactory) -> None:
    """The library's history(id) of a deleted memory lists its creation and its deletion."""
    with MemoryScopeClient(serve().url) as client:
        memory = client.add("likes jazz", "ann", infer=False)[0]
        client.delete(memory.id)
        assert [change["action"] for change in client.history(memory.id)] == ["created", "deleted"]


def test_server_errors_carry_code_and_message(serve: ServeFactory) -> None:
    with MemoryScopeClient(serve().url + "/v1/") as client:  # an OpenAI-style base URL works too
        assert client.health() == {"status": "ok"}
        error = raised(client.search, "tea", "ann", top_k=0)
        assert (error.status, error.code) == (422, "invalid_request") and "top_k" in error.message
        client.add("x", "ann", infer=False)
        error = raised(client.search, "tea", "ann", top_k=101)
        assert (error.status, error.code) == (422, "top_k_too_large")
        error = raised(client.run_operation, "no_such_operation", "ann")
        assert (error.status, error.code) == (404, "unknown_operation") and "retrieve_memory" in error.message
        memory = client.get_all("ann")[0]
        error = raised(client.update, memory.id)  # neither text nor metadata
        assert (error.status, error.code) == (422, "invalid_request") and "text=" in error.message
        error = raised(client.get, "")
        assert (error.status, error.code) == (None, "invalid_argument")


# -- operations, profile, status, export, health -------------------------------------------------------


def test_operation_status_export_and_health(serve: ServeFactory, fake_openai: FakeOpenAIServer) -> None:
    with MemoryScopeClient(serve().url) as client:
        added = client.add(["prefers green tea", "plays the cello"], "ann", infer=False)
        summary = client.run_operation("retrieve_memory", "ann", query="what tea?", query_time=SAID_AT)
        assert summary["operation"] == "retrieve_memory" and summary["timings"]
        assert any("green tea" in memory["content"] for memory in summary["memories"])

        status = client.status("ann")
        assert status["user"] == "ann" and status["running"] == [] and "scheduler" in status

        lines = list(client.export("ann"))
        header, *rest, end = lines
        memories = [line for line in rest if "change" not in line]  # then the history, as `change` lines
        assert header["format"] and header["user_name"] == "ann" and len(rest) == len(memories) + end["changes"]
        assert {memory["memory_id"] for memory in memories} == {memory.id for memory in added}
        assert end["end"] is True and end["count"] == 2
        error = raised(list, client.export("nobody"))
        assert (error.status, error.code) == (404, "unknown_user")

        ready = client.ready()
        assert ready["ready"] is True and ready["checks"]["store"]["ok"] is True
        fake_openai.stop()  # the models' host is gone: 503, answered as {"ready": False, ...}
        ready = client.ready()
        assert ready["ready"] is False and not ready["checks"]["model.generation_model"]["ok"]


# -- chat -------------------------------------------------------------------------------------------


def test_chat_returns_the_reply_and_the_memories_used(serve: ServeFactory, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.add_rule("what do I drink", TEA_REPLY)
    with MemoryScopeClient(serve().url) as client:
        tea = client.add("prefers green tea", "ann", infer=False)[0]
        result = client.chat("what do I drink?", "ann", history=[{"role": "user", "content": "hello"}])
        assert isinstance(result, ChatResult) and result.content == TEA_REPLY
        assert tea.id in result.memory_ids and any("green tea" in line for line in result.memories)
        assert result.usage["completion_tokens"] > 0
        system = fake_openai.requests[-1].body["messages"][0]["content"]
        assert "green tea" in system

        with client.chat("what do I drink today?", "ann", stream=True) as stream:
            deltas = list(stream)
        assert len(deltas) > 1 and "".join(deltas) == TEA_REPLY == stream.content
        assert tea.id in stream.memory_ids and stream.usage["total_tokens"] > 0


def test_chat_errors_are_mapped(serve: ServeFactory, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.add_rule("what do I drink", TEA_REPLY)
    with MemoryScopeClient(serve().url) as client:
        fake_openai.fail_next(status=400)  # a model that refuses (not retried): 502 model_error
        error = raised(client.chat, "what do I drink?", "ann")
        assert (error.status, error.code) == (502, "model_error")
        fake_openai.clear_faults()

        fake_openai.break_stream_next(after_chunks=2)
        stream = client.chat("what do I drink?", "ann", stream=True)
        with pytest.raises(MemoryScopeClientError) as caught:
            for _ in stream:
                pass
        assert caught.value.status is None and caught.value.code == "model_error"
        assert stream.content and TEA_REPLY.startswith(stream.content)


# -- access, unreachable, timeout -------------------------------------------------------------------


def test_keys_are_sent_and_refusals_mapped(serve: ServeFactory) -> None:
    admin, ann_only = "admin-key-7f3a9c2e", "ann-key-1b8d4e6f"
    keys = KeyRing.of(
        ApiKey("ops", bytes.fromhex(hash_key(admin)), admin=True),
        ApiKey("ann-app", bytes.fromhex(hash_key(ann_only)), users=frozenset({"ann"})),
    )
    url = serve(keys=keys).url
    with MemoryScopeClient(url, api_key=admin) as client:
        bob = client.add("likes chess", "bob", infer=False)[0]
        assert client.health() == {"status": "ok"}
    for key in ("wrong-key-00000000", None):
        with MemoryScopeClient(url, api_key=key) as client:
            error = raised(client.get_all, "bob")
            assert (error.status, error.code) == (401, "unauthorized") and "Bearer" in error.message
    with MemoryScopeClient(url, api_key=ann_only) as client:
        assert client.add("likes tea", "ann", infer=False)[0].user_id == "ann"
        error = raised(client.get_all, "bob")
        assert (error.status, error.code) == (403, "forbidden")
        assert client.get(bob.id) is None  # another user's memory is not even known to exist
        assert client.delete(bob.id) is False


def test_unreachable_server_names_the_url() -> None:
    url = closed_port_url()
    with MemoryScopeClient(url, timeout=2) as client:
        error = raised(client.health)
    assert (error.status, error.code) == (None, "unreachable") and url in error.message and url in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.status, copy.code, copy.message) == (error.status, error.code, error.message)

    async def run() -> MemoryScopeClientError:
        async with AsyncMemoryScopeClient(url, timeout=2) as client:
            with pytest.raises(MemoryScopeClientError) as caught:
                await client.search("tea", "ann")
            return caught.value

    assert asyncio.run(run()).code == "unreachable"


def test_a_server_that_is_not_memoryscope_is_an_error_not_an_absence(fake_openai: FakeOpenAIServer) -> None:
    """A wrong base URL: its 404 is not read as "no such memory" (get() raises instead of answering None)."""
    with MemoryScopeClient(fake_openai.root_url) as client:
        error = raised(client.get, "some-id")
    assert (error.status, error.code) == (404, "http_error") and "/v1/memories/some-id" in error.message


def test_slow_answer_is_a_timeout(serve: ServeFactory, fake_openai: FakeOpenAIServer) -> None:
    with MemoryScopeClient(serve().url, timeout=0.3) as client:
        fake_openai.delay_next(seconds=1.0)  # the model behind the chat is slow
        error = raised(client.chat, "what do I drink?", "ann")
        assert (error.status, error.code) == (None, "timeout") and "timeout" in error.message


# -- the async client -------------------------------------------------------------------------------


def test_async_client_main_verbs(serve: ServeFactory, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.add_rule("what do I drink", TEA_REPLY)
    url = serve().url

    async def run() -> None:
        async with AsyncMemoryScopeClient(url) as client:
            assert await client.health() == {"status": "ok"}
            tea, cello = await client.add(["prefers green tea", "plays the cello"], "ann", infer=False, time=SAID_AT)
            assert tea.message_time == SAID_AT
            assert (await client.search("what tea do I drink?", "ann", top_k=1))[0].id == tea.id
            assert await client.get(tea.id) == tea
            assert len(await client.get_all("ann")) == 2 and await client.get_all("nobody") == []
            assert (await client.update(cello.id, metadata={"level": "beginner"})).metadata == {"level": "beginner"}
            assert [change["action"] for change in await client.history(cello.id)] == ["created", "updated"]
            assert (await client.chat("what do I drink?", "ann")).content == TEA_REPLY
            stream = await client.chat("what do I drink now?", "ann", stream=True)
            assert "".join([delta async for delta in stream]) == TEA_REPLY and tea.id in stream.memory_ids
            lines = [line async for line in client.export("ann")]
            assert lines[-1]["end"] is True and lines[-1]["count"] + lines[-1]["changes"] == len(lines) - 2
            assert (await client.run_operation("retrieve_memory", "ann", query="tea"))["memories"]
            assert (await client.status("ann"))["user"] == "ann"
            assert await client.delete(tea.id) is True and await client.get(tea.id) is None
            with pytest.raises(MemoryScopeClientError) as caught:
                await client.update(tea.id, "gone")
            assert caught.value.code == "unknown_memory"
            assert await client.delete_all("ann") >= 1

    asyncio.run(run())


def test_tiers_and_blocks_through_the_client(serve: ServeFactory) -> None:
    """The policy views' verbs: tiers answer under any policy (empty outside MemoryOS); blocks need
    an agent, and a server without one says so (the agent's own are tested in tests/playground)."""
    with MemoryScopeClient(serve().url) as client:
        client.add("ann keeps bees", "ann", infer=False)
        tiers = client.tiers("ann")
        assert tiers["policy"] == "memoryscope" and tiers["short_term"] == [] and tiers["heat_threshold"] is None
        assert raised(client.tiers, "nobody").status == 404
        error = raised(client.blocks, "ann")
        assert (error.status, error.code) == (422, "no_agent") and "no core memory blocks" in error.message
        error = raised(client.set_block, "human", "Ann keeps bees.", "ann")
        assert (error.status, error.code) == (422, "no_agent")
        error = raised(client.set_block, "a/b", "x", "ann")
        assert error.code == "slash_in_id"  # refused, not misrouted
