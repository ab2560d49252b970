"""Remote model keys as MemoryScope 0.1.x walkthroughs write them: a full endpoint URL as
`api_base`/`base_url`, an inline `api_key`. Checked by what reaches the fake server."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from memoryscope.config import load_config
from memoryscope.memory import MemoryNode
from memoryscope.models.base import ChatMessage
from memoryscope.models.embedding.bge_embedding import BgeEmbedding
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.models.rank.bge_rank import BgeRank
from memoryscope.models.rank.dashscope_rank import DashScopeRank
from memoryscope.testing.fake_openai import DASHSCOPE_RERANK_PATH, FakeOpenAIServer

INLINE_KEY = "sk-inline-walkthrough-7q7q"


@pytest.mark.parametrize("suffix", ["", "/", "/embeddings", "/embeddings/"])
def test_embedding_requests_go_to_exactly_one_embeddings_path(
    server: FakeOpenAIServer, fast_retry: dict[str, Any], suffix: str
) -> None:
    model = BgeEmbedding(BgeEmbedding.Params(api_base=server.base_url + suffix, **fast_retry))
    model.embed_passages(["guitar"])
    assert [record.path for record in server.requests] == ["/v1/embeddings"]


@pytest.mark.parametrize("suffix", ["", "/rerank", "/rerank/"])
def test_rerank_requests_go_to_exactly_one_rerank_path(server: FakeOpenAIServer, fast_retry: dict[str, Any], suffix: str) -> None:
    model = BgeRank(BgeRank.Params(base_url=server.base_url + suffix, **fast_retry))  # type: ignore[call-arg]  # read by a validator
    model.rerank("guitar", ["plays the guitar", "drinks tea"])
    assert [record.path for record in server.requests] == ["/v1/rerank"]


def test_dashscope_rank_accepts_its_full_endpoint(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    params = DashScopeRank.Params(api_base=server.root_url + DASHSCOPE_RERANK_PATH, api_key_env=None, **fast_retry)
    assert params.api_base == server.root_url + "/api/v1"
    DashScopeRank(params).rerank("guitar", ["plays the guitar"])
    assert [record.path for record in server.requests] == [DASHSCOPE_RERANK_PATH]


def test_chat_requests_go_to_exactly_one_completions_path(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    params = OpenAILikeGeneration.Params(model_name="m", api_base=server.base_url + "/chat/completions/", **fast_retry)
    OpenAILikeGeneration(params).chat([ChatMessage("user", "hello")])
    assert [record.path for record in server.requests] == ["/v1/chat/completions"]


def test_inline_key_is_sent_and_wins_over_api_key_env(server: FakeOpenAIServer, fast_retry: dict[str, Any], api_key: str) -> None:
    model = BgeEmbedding(
        BgeEmbedding.Params(api_base=server.base_url, api_key=INLINE_KEY, api_key_env="MEMORYSCOPE_TEST_KEY", **fast_retry)  # type: ignore[arg-type]  # a str becomes a SecretStr
    )
    model.embed_passages(["guitar"])
    assert server.requests[-1].api_key_suffix == INLINE_KEY[-4:] != api_key[-4:]
    assert INLINE_KEY not in repr(model) + repr(model.params) + str(model.params)


def test_inline_key_passes_a_server_that_demands_it(fast_retry: dict[str, Any]) -> None:
    with FakeOpenAIServer(api_key=INLINE_KEY) as server:
        params = OpenAILikeGeneration.Params(model_name="m", api_base=server.base_url, api_key=INLINE_KEY, **fast_retry)  # type: ignore[arg-type]  # a str becomes a SecretStr
        assert OpenAILikeGeneration(params).chat([ChatMessage("user", "hello")])
        assert server.requests[-1].status == 200


def test_different_api_base_and_base_url_are_refused_naming_both() -> None:
    with pytest.raises(ValidationError) as caught:
        BgeEmbedding.Params(api_base="https://a.example/v1", base_url="https://b.example/v1", api_key=INLINE_KEY)  # type: ignore[call-arg]  # base_url is read by a validator
    text = str(caught.value)
    assert "api_base" in text and "base_url" in text
    assert INLINE_KEY not in text


def test_same_base_given_twice_is_one_base() -> None:
    params = BgeEmbedding.Params(api_base="https://a.example/v1", base_url="https://a.example/v1/embeddings")  # type: ignore[call-arg]  # base_url is read by a validator
    assert params.api_base == "https://a.example/v1"


def test_openai_embedding_dimensions_are_sent(
    server: FakeOpenAIServer, fast_retry: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.1.x's OpenAIEmbedding asked the server for `dimensions`; the translated entry does too."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test")
    raw = {
        "model": {
            "embedding_model": {
                "class": "core.models.llama_index_embedding_model",
                "module_name": "openai_embedding",
                "model_name": "text-embedding-3-small",
                "dimensions": 64,
            }
        }
    }
    spec = load_config(raw, environ={"OPENAI_BASE_URL": server.base_url}).models["embedding_model"]
    model = spec.cls(spec.params.model_copy(update=fast_retry))
    assert model.embed_passages(["guitar"]).shape == (1, 64)
    assert server.requests[-1].body["dimensions"] == 64


def test_walkthrough_entries_reach_the_right_endpoints(server: FakeOpenAIServer) -> None:
    """The SiliconFlow walkthrough's model section, pointed at the fake server, from config to request."""
    raw = {
        "model": {
            "generation_model": {
                "class": "core.models.llama_index_generation_model",
                "module_name": "like_generation",
                "model_name": "Qwen/Qwen2.5-7B-Instruct",
                "model": "Qwen/Qwen2.5-7B-Instruct",
                "api_key": INLINE_KEY,
                "api_base": server.base_url,
                "max_tokens": 2000,
                "temperature": 0.01,
            },
            "embedding_model": {
                "class": "core.models.llama_index_embedding_model",
                "module_name": "bge_embedding",
                "model_name": "BAAI/bge-m3",
                "base_url": server.base_url + "/embeddings",
                "api_key": INLINE_KEY,
            },
            "rank_model": {
                "class": "core.models.llama_index_rank_model",
                "module_name": "bge_rank",
                "model_name": "BAAI/bge-reranker-v2-m3",
                "api_key": INLINE_KEY,
                "api_base": server.base_url + "/rerank",
                "top_n": 500,
            },
        }
    }
    config = load_config(raw, environ={})
    models = {name: spec.cls(spec.params) for name, spec in config.models.items()}
    models["generation_model"].chat([ChatMessage("user", "hello")])
    models["embedding_model"].embed_passages(["guitar"])
    models["rank_model"].score("guitar", [MemoryNode(user_name="ann", content="plays the guitar")])
    assert [record.path for record in server.requests] == ["/v1/chat/completions", "/v1/embeddings", "/v1/rerank"]
    assert {record.api_key_suffix for record in server.requests} == {INLINE_KEY[-4:]}
