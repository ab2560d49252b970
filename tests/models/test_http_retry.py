"""Retries, timeouts, errors and API keys, shared by every remote backend (`memoryscope.models.http`)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from email.utils import formatdate
from typing import Any

import pytest

from memoryscope.errors import ModelError
from memoryscope.models.embedding.bge_embedding import BgeEmbedding
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.models.http import RetryPolicy, parse_retry_after
from memoryscope.models.rank.bge_rank import BgeRank
from memoryscope.models.rank.dashscope_rank import DashScopeRank
from memoryscope.testing.fake_openai import FakeOpenAIServer


def embedder(api_base: str, **params: Any) -> BgeEmbedding:
    return BgeEmbedding(BgeEmbedding.Params(api_base=api_base, **params))


def statuses(server: FakeOpenAIServer) -> list[int]:
    return [record.status for record in server.requests]


def test_two_server_errors_then_success_takes_three_requests(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = embedder(server.base_url, **fast_retry)
    server.fail_next(2, status=500)
    vectors = model.embed_passages(["plays the guitar"])
    assert vectors.shape == (1, 128)
    assert statuses(server) == [500, 500, 200]
    assert model.usage.snapshot()["errors"] == 0


def test_async_path_retries_the_same_way(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = embedder(server.base_url, **fast_retry)
    server.fail_next(2, status=503)
    vectors = asyncio.run(model.aembed_passages(["plays the guitar"]))
    assert vectors.shape == (1, 128)
    assert statuses(server) == [503, 503, 200]


def recorded_waits(model: BgeEmbedding) -> list[float]:
    """The waits `model` asks for between attempts, recorded instead of slept."""
    waits: list[float] = []
    model._client.policy = dataclasses.replace(model._client.policy, sleep=waits.append)
    return waits


def test_429_waits_as_long_as_retry_after_says(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = embedder(server.base_url, **{**fast_retry, "retry_max_wait_s": 5.0})
    waits = recorded_waits(model)
    server.fail_next(1, status=429, retry_after=1)
    model.embed_passages(["tea"])
    assert waits == [1.0]  # the backoff alone would be a millisecond
    assert statuses(server) == [429, 200]


def test_retry_after_is_capped_by_retry_max_wait(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = embedder(server.base_url, **fast_retry)
    waits = recorded_waits(model)
    server.fail_next(1, status=429, retry_after=30)
    model.embed_passages(["tea"])
    assert waits == [0.05]
    assert statuses(server) == [429, 200]


def test_persistent_server_error_gives_up_after_max_retries_plus_one(
    server: FakeOpenAIServer, fast_retry: dict[str, Any]
) -> None:
    model = embedder(server.base_url, model_name="bge-test", **{**fast_retry, "max_retries": 3})
    server.fail_next(10, status=500, body='{"error": "database on fire"}')
    with pytest.raises(ModelError) as caught:
        model.embed_passages(["tea"])
    error = caught.value
    assert (error.backend, error.model, error.endpoint) == ("bge_embedding", "bge-test", f"{server.base_url}/embeddings")
    assert "HTTP 500" in str(error) and "database on fire" in str(error) and "4 attempts" in str(error)
    assert len(server.requests) == 4
    assert model.usage.snapshot()["errors"] == 1


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_other_client_errors_are_not_retried(server: FakeOpenAIServer, fast_retry: dict[str, Any], status: int) -> None:
    model = embedder(server.base_url, **fast_retry)
    server.fail_next(1, status=status)
    with pytest.raises(ModelError, match=f"HTTP {status}"):
        model.embed_passages(["tea"])
    assert len(server.requests) == 1


def test_refused_connection_names_the_endpoint(closed_port: int, fast_retry: dict[str, Any]) -> None:
    api_base = f"http://127.0.0.1:{closed_port}/v1"
    model = BgeRank(BgeRank.Params(api_base=api_base, **fast_retry))
    with pytest.raises(ModelError, match="cannot connect") as caught:
        model.rerank("tea", ["green tea"])
    assert caught.value.endpoint == f"{api_base}/rerank"
    assert f"{api_base}/rerank" in str(caught.value) and "3 attempts" in str(caught.value)


def test_refused_connection_async(closed_port: int, fast_retry: dict[str, Any]) -> None:
    model = BgeRank(BgeRank.Params(api_base=f"http://127.0.0.1:{closed_port}/v1", **fast_retry))
    with pytest.raises(ModelError, match="cannot connect"):
        asyncio.run(model.arerank("tea", ["green tea"]))


def test_slow_server_times_out_and_is_retried(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = embedder(server.base_url, **{**fast_retry, "timeout": 0.2, "max_retries": 1})
    # one plain request first, so the delayed request goes out on a kept-alive connection the
    # client must drop on its timeout. (The fake server loads its token table before serving: a
    # lazy load once made the first answer slower than this 0.2 s timeout when the test ran alone.)
    assert model.embed_passages(["warm up"]).shape == (1, 128)
    server.delay_next(1, seconds=2.0)
    assert model.embed_passages(["tea"]).shape == (1, 128)  # the second attempt is answered at once
    server.delay_next(2, seconds=2.0)
    with pytest.raises(ModelError, match=r"timed out after 0\.2s"):
        model.embed_passages(["tea"])


def test_body_that_is_not_json_is_an_error_not_a_retry(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = embedder(server.base_url, **fast_retry)
    server.malformed_next(1, body="<html>Bad gateway</html>")
    with pytest.raises(ModelError, match="expected a JSON body, got: <html>Bad gateway</html>"):
        model.embed_passages(["tea"])
    assert len(server.requests) == 1


def test_async_body_that_is_not_json(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = embedder(server.base_url, **fast_retry)
    server.malformed_next(1)
    with pytest.raises(ModelError, match="expected a JSON body"):
        asyncio.run(model.aembed_passages(["tea"]))


@pytest.mark.parametrize(
    "build",
    [
        lambda base: OpenAILikeGeneration(
            OpenAILikeGeneration.Params(model_name="m", api_base=base, api_key_env="NO_SUCH_KEY_VAR")
        ),
        lambda base: BgeEmbedding(BgeEmbedding.Params(api_base=base, api_key_env="NO_SUCH_KEY_VAR")),
        lambda base: BgeRank(BgeRank.Params(api_base=base, api_key_env="NO_SUCH_KEY_VAR")),
        lambda base: DashScopeRank(DashScopeRank.Params(api_base=base, api_key_env="NO_SUCH_KEY_VAR")),
    ],
    ids=["openai_like", "bge_embedding", "bge_rank", "dashscope_rank"],
)
def test_missing_key_variable_is_named_at_construction(build: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(ModelError, match=r"environment variable NO_SUCH_KEY_VAR .*is not set"):
        build("http://127.0.0.1:9/v1")


def test_key_is_sent_but_never_shown(
    server: FakeOpenAIServer, fast_retry: dict[str, Any], api_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    model = embedder(server.base_url, api_key_env="MEMORYSCOPE_TEST_KEY", **fast_retry)
    server.fail_next(1, status=500, body=f"upstream rejected key {api_key}")
    server.fail_next(1, status=401, body=f"invalid api key {api_key}")
    with caplog.at_level(logging.WARNING), pytest.raises(ModelError) as caught:
        model.embed_passages(["tea"])
    assert [record.api_key_suffix for record in server.requests] == ["9xyz", "9xyz"]
    assert "Authorization" not in server.requests[0].headers
    assert api_key not in str(caught.value) and "invalid api key ***" in str(caught.value)
    assert api_key not in caplog.text and "retry 1/2" in caplog.text
    assert api_key not in repr(model) and api_key not in repr(model._client)


def test_key_cut_short_by_a_snippet_is_hidden_too(server: FakeOpenAIServer, fast_retry: dict[str, Any], api_key: str) -> None:
    model = embedder(server.base_url, api_key_env="MEMORYSCOPE_TEST_KEY", **fast_retry)
    server.fail_next(1, status=401, body="x" * 190 + api_key)  # the 200-character snippet ends inside the key
    with pytest.raises(ModelError) as caught:
        model.embed_passages(["tea"])
    assert api_key[:9] not in str(caught.value) and "***…" in str(caught.value)


def test_backoff_doubles_and_is_capped() -> None:
    policy = RetryPolicy(max_retries=5, backoff_s=1.0, max_wait_s=5.0)
    waits = [policy.wait_s(n) for n in range(5)]
    assert 0.5 <= waits[0] <= 1.0 and 1.0 <= waits[1] <= 2.0 and 2.0 <= waits[2] <= 4.0
    assert all(wait <= 5.0 for wait in waits)
    assert policy.wait_s(0, retry_after_s=3.0) == 3.0
    assert policy.wait_s(0, retry_after_s=60.0) == 5.0


def test_retry_after_reads_seconds_and_dates() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    in_ten_seconds = parse_retry_after(formatdate(time.time() + 10, usegmt=True))
    assert in_ten_seconds is not None and 8.0 <= in_ten_seconds <= 10.0
