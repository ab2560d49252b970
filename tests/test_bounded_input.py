"""Issue 10, item 3: bounded input. A chat turn embeds its query and its stored message in one
request; an over-long message is refused before anything is stored; what a store embeds is cut
to the embedding model's `max_input_tokens`, while the memory keeps the whole text."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryscope.app import MemoryScope
from memoryscope.chat.api_memory_chat import ApiMemoryChat
from memoryscope.context import MemoryContext, Message
from memoryscope.memory import MemoryType, embedding_text
from memoryscope.models.embedding.bge_embedding import BgeEmbedding
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.fake_openai import FakeOpenAIServer

SAID = datetime(2024, 10, 26, 13, 26, 20, tzinfo=timezone.utc)
LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL")


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def remote_scope(tmp_path: Path, server: FakeOpenAIServer, **embedding: Any) -> MemoryScope:
    """The default config with the store's vectors from `bge_embedding` on the fake server."""
    overrides = {
        "memory_store.path": str(tmp_path / "m.db"),
        "model.embedding_model.module_name": "bge_embedding",
        "model.embedding_model.model_name": "fake-bge",
        "model.embedding_model.api_base": server.base_url,
        "model.embedding_model.api_key_env": "MEMORYSCOPE_TEST_EMBEDDING_KEY",
        **{f"model.embedding_model.{key}": value for key, value in embedding.items()},
    }
    return MemoryScope("default", overrides=overrides)


def embedding_requests(server: FakeOpenAIServer) -> list[Any]:
    return [request for request in server.requests if request.path.endswith("/embeddings")]


@pytest.fixture
def scope(tmp_path: Path, server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryScope]:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMORYSCOPE_TEST_EMBEDDING_KEY", "sk-test-embed")
    with remote_scope(tmp_path, server) as opened:
        yield opened


def chat_of(scope: MemoryScope) -> ApiMemoryChat:
    chat = scope.default_memory_chat
    assert isinstance(chat, ApiMemoryChat)
    return chat


def test_a_chat_turn_embeds_its_query_and_message_in_one_request(scope: MemoryScope, server: FakeOpenAIServer) -> None:
    """Retrieval and storing used to send one `/embeddings` request each for the same turn."""
    chat = chat_of(scope)
    chat.chat_with_memory("I play the cello on Sundays")  # an empty store: nothing else to embed
    server.clear_requests()
    chat.chat_with_memory("which instrument do I play?")
    assert len(embedding_requests(server)) == 1
    assert scope.store is not None
    stored = scope.store.scan(MemoryFilter(user_name=chat.user_name, memory_types=(MemoryType.CONVERSATION,)))
    assert sorted(node.content for node in stored) == ["I play the cello on Sundays", "which instrument do I play?"]


def test_the_stored_vector_is_the_one_the_store_would_have_made(scope: MemoryScope) -> None:
    """Reusing the turn's vectors changes no result: each stored message has its own passage vector."""
    chat = chat_of(scope)
    chat.chat_with_memory("I play the cello on Sundays")
    chat.chat_with_memory("which instrument do I play?")
    store = scope.store
    assert store is not None
    nodes = store.scan(MemoryFilter(user_name=chat.user_name, memory_types=(MemoryType.CONVERSATION,)))
    stored = store.get_vectors([node.memory_id for node in nodes])
    fresh = store.embedding_model.embed_passages([embedding_text(node) for node in nodes])
    for node, vector in zip(nodes, fresh, strict=True):
        np.testing.assert_allclose(stored[node.memory_id], vector, atol=1e-6)


def test_retrieval_uses_a_given_vector_only_for_the_text_it_was_made_from(scope: MemoryScope, server: FakeOpenAIServer) -> None:
    """A workflow step may change the query (set_query trims it, rewrite_query rewrites it): a
    vector made for another text is not used, the query is embedded instead."""
    chat = chat_of(scope)
    chat.chat_with_memory("I play the cello on Sundays")
    server.clear_requests()
    wrong = np.zeros(server.embedding_dimension, dtype=np.float32)
    wrong[0] = 1.0
    from memoryscope.context import TextVector

    found = chat.service.run_operation(
        "retrieve_memory", chat.user_name, query="what do I play?", embedded=(TextVector("what do I play", wrong, True),)
    )
    assert len(embedding_requests(server)) == 1  # the stale vector was not trusted
    assert [node.content for node in found.context.memories][:1] == ["I play the cello on Sundays"]


# -- what is embedded is capped, what is stored is whole --------------------------------------


def test_a_long_memory_is_stored_whole_but_embedded_cut(tmp_path: Path, server: FakeOpenAIServer) -> None:
    from memoryscope.stores.sqlite_store import SqliteMemoryStore

    model = BgeEmbedding(BgeEmbedding.Params(api_base=server.base_url, max_input_tokens=16))
    long = "I play the cello on Sundays. " + "Then we have tea and talk about music for hours. " * 2000
    with SqliteMemoryStore(path=tmp_path / "m.db", embedding_model=model) as store:
        worker = build_worker("read_message", {}, make_env(store=store))
        worker.run(MemoryContext(user_name="ann", messages=(Message("user", long, SAID),)))
        assert [node.content for node in store.scan(MemoryFilter(user_name="ann"))] == [long.strip()]
    sent = embedding_requests(server)[-1].body["input"][0]
    assert len(sent) < 200 and f'ann said, "{long}"'.startswith(sent)
