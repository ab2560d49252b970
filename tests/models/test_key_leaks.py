"""The API key never leaks: not in a ModelError's text, repr or chained traceback, nor in a log record.

Many servers echo the key they were sent in a 401, 429 or 500 body ("Incorrect API key provided:
sk-..."). Every backend is provoked here against the fake server with such a body (or a
connection error whose text holds the key), and every way the error can be shown is searched for
the key: `str`, `repr`, `traceback.format_exception` (which prints chained causes), and the log
records written meanwhile at DEBUG, also when the failure happens in a background run of the
scheduler. A short key (`e`, as local servers take) must not turn scrubbing into mangling.
"""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

import pytest

from memoryscope.app import MemoryScope
from memoryscope.context import MemoryContext, Message
from memoryscope.env import Env
from memoryscope.errors import ModelError
from memoryscope.models.base import ChatMessage
from memoryscope.models.embedding.bge_embedding import BgeEmbedding
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.models.rank.bge_rank import BgeRank
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.worker import Worker, WorkerParams, register_worker

pytestmark = pytest.mark.slow  # every model class over HTTP; `-m "not slow"` leaves it out

KEY_ENV = "MEMORYSCOPE_LEAK_TEST_KEY"
LONG_KEY = "sk-leak-7f3a9c2e41d8b6f05e7c3a91"
SECRET_PART = LONG_KEY[8:20]  # a stretch of the key that no scrubbed text may contain, cut short or not
MESSAGES = [ChatMessage("user", "hello")]


def echoing_body(key: str, status: int) -> str:
    """An error body that echoes the key, as OpenAI's and many compatible servers' 401s do."""
    message = f"Incorrect API key provided: {key}. You can find your API key at https://example.invalid/keys"
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": status}})


def shown(error: BaseException) -> str:
    """Every way an error is commonly shown: str, repr, and the full traceback with its chain."""
    return "\n".join([str(error), repr(error), "".join(traceback.format_exception(error))])


@pytest.fixture
def long_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, LONG_KEY)
    return LONG_KEY


@pytest.fixture
def retry(fast_retry: dict[str, Any]) -> dict[str, Any]:
    return {**fast_retry, "api_key_env": KEY_ENV}


def chat_model(server: FakeOpenAIServer, retry: dict[str, Any]) -> OpenAILikeGeneration:
    return OpenAILikeGeneration(OpenAILikeGeneration.Params(model_name="qwen", api_base=server.base_url, **retry))


def embedding_model(server: FakeOpenAIServer, retry: dict[str, Any]) -> BgeEmbedding:
    return BgeEmbedding(BgeEmbedding.Params(model_name="bge", api_base=server.base_url, dimensions=128, **retry))


def rank_model(server: FakeOpenAIServer, retry: dict[str, Any]) -> BgeRank:
    return BgeRank(BgeRank.Params(model_name="rerank", api_base=server.base_url, **retry))


async def _drain(stream: Any) -> list[str]:
    return [piece async for piece in stream]


# (name, call): each call provokes one request path of one backend
CALLS: dict[str, Callable[[FakeOpenAIServer, dict[str, Any]], Any]] = {
    "openai_like chat": lambda s, r: chat_model(s, r).chat(MESSAGES),
    "openai_like achat": lambda s, r: asyncio.run(chat_model(s, r).achat(MESSAGES)),
    "openai_like stream_chat": lambda s, r: list(chat_model(s, r).stream_chat(MESSAGES)),
    "openai_like astream_chat": lambda s, r: asyncio.run(_drain(chat_model(s, r).astream_chat(MESSAGES))),
    "bge_embedding sync": lambda s, r: embedding_model(s, r).embed_queries(["hello"]),
    "bge_embedding async": lambda s, r: asyncio.run(embedding_model(s, r).aembed_queries(["hello"])),
    "bge_rank sync": lambda s, r: rank_model(s, r).rerank("hello", ["hello there", "bye"]),
    "bge_rank async": lambda s, r: asyncio.run(rank_model(s, r).arerank("hello", ["hello there", "bye"])),
}


@pytest.mark.parametrize("status", [401, 429, 500])
@pytest.mark.parametrize("call", sorted(CALLS))
def test_an_echoed_key_is_in_no_shown_text_of_the_error(
    server: FakeOpenAIServer, long_key: str, retry: dict[str, Any], call: str, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    """401 fails at once; 429 and 500 fail after the retries (each retry logs a warning)."""
    server.fail_next(10, status=status, body=echoing_body(long_key, status))
    with caplog.at_level(logging.DEBUG), pytest.raises(ModelError) as failure:
        CALLS[call](server, retry)
    text = shown(failure.value)
    assert f"HTTP {status}" in str(failure.value)  # the reason is still there, only the key is hidden
    assert "Incorrect API key provided: ***" in str(failure.value)
    assert long_key not in text and SECRET_PART not in text
    assert long_key not in caplog.text and SECRET_PART not in caplog.text


def test_a_key_cut_short_by_the_snippet_is_hidden_too(server: FakeOpenAIServer, long_key: str, retry: dict[str, Any]) -> None:
    padding = "x" * (200 - len('{"error": "') - 12)  # the 200-character snippet ends inside the key
    server.fail_next(1, status=401, body=json.dumps({"error": padding + " " + long_key}))
    with pytest.raises(ModelError) as failure:
        chat_model(server, retry).chat(MESSAGES)
    assert long_key[:10] not in shown(failure.value)


def test_a_stream_that_breaks_with_the_key_in_its_error_event_does_not_show_it(
    server: FakeOpenAIServer, long_key: str, retry: dict[str, Any]
) -> None:
    server.break_stream_next(1, after_chunks=1, message=f"generation failed for key {long_key}")
    model = chat_model(server, retry)
    with pytest.raises(ModelError) as failure:
        list(model.stream_chat(MESSAGES))
    assert long_key not in shown(failure.value) and SECRET_PART not in shown(failure.value)
    server.break_stream_next(1, after_chunks=1, message=f"generation failed for key {long_key}")
    with pytest.raises(ModelError) as failure:
        asyncio.run(_drain(model.astream_chat(MESSAGES)))
    assert long_key not in shown(failure.value) and SECRET_PART not in shown(failure.value)


def _refuse_httpx(key: str) -> Callable[..., Any]:
    import httpx

    def handle(*args: Any, **kwargs: Any) -> Any:
        raise httpx.ConnectError(f"proxy refused CONNECT (Proxy-Authorization: Bearer {key})")

    return handle


def test_a_connection_error_holding_the_key_does_not_show_it(
    server: FakeOpenAIServer, long_key: str, retry: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The transports fail as a misconfigured proxy does, quoting the credentials they were given."""
    import aiohttp
    import httpx
    import requests

    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", _refuse_httpx(long_key))
    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", _refuse_httpx(long_key))

    def refuse_requests(*args: Any, **kwargs: Any) -> Any:
        raise requests.ConnectionError(f"proxy refused CONNECT (Proxy-Authorization: Bearer {long_key})")

    async def refuse_aiohttp(*args: Any, **kwargs: Any) -> Any:
        raise aiohttp.ClientConnectionError(f"proxy refused CONNECT (Proxy-Authorization: Bearer {long_key})")

    monkeypatch.setattr(requests.Session, "post", refuse_requests)
    monkeypatch.setattr(aiohttp.ClientSession, "_request", refuse_aiohttp)
    for call in ("openai_like chat", "openai_like achat", "bge_embedding sync", "bge_embedding async"):
        with pytest.raises(ModelError, match="cannot connect") as failure:
            CALLS[call](server, retry)
        assert long_key not in shown(failure.value) and SECRET_PART not in shown(failure.value), call


# -- short keys: hidden where they stand as a key, never as letters of words -------------------


def short_key_chat_model(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> OpenAILikeGeneration:
    """A model whose key is `e`, as a local server takes."""
    return OpenAILikeGeneration(
        OpenAILikeGeneration.Params(model_name="qwen", api_base=server.base_url, api_key="e", **fast_retry)
    )


def test_a_short_key_does_not_mangle_messages(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = short_key_chat_model(server, fast_retry)
    server.malformed_next(1)
    with pytest.raises(ModelError) as failure:
        model.chat(MESSAGES)
    assert "malformed response (expected an OpenAI-style chat completion)" in str(failure.value)
    assert "***" not in str(failure.value)
    embedder = BgeEmbedding(BgeEmbedding.Params(model_name="bge", api_base=server.base_url, api_key="e", **fast_retry))
    server.override("/v1/embeddings", lambda body: {"data": "none"})
    with pytest.raises(ModelError) as failure:
        embedder.embed_queries(["hello"])
    assert "malformed response: expected 'data' to be list" in str(failure.value)


def test_a_short_key_is_hidden_where_it_stands_as_the_key(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = short_key_chat_model(server, fast_retry)
    server.fail_next(1, status=401, body='{"error": "invalid api_key: e (sent as Authorization: Bearer e)"}')
    with pytest.raises(ModelError) as failure:
        model.chat(MESSAGES)
    assert "invalid api_key: *** (sent as Authorization: Bearer ***)" in str(failure.value)


def test_a_short_key_does_not_mangle_log_records(
    server: FakeOpenAIServer, fast_retry: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    short_key_chat_model(server, fast_retry)  # building a model makes its key known
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("memoryscope.test").warning("the model sent a malformed response: %s", "expected a list")
    assert "the model sent a malformed response: expected a list" in caplog.text


# -- log records -----------------------------------------------------------------------------


def test_every_memoryscope_log_record_is_scrubbed_at_every_level(
    server: FakeOpenAIServer, long_key: str, retry: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    chat_model(server, retry)  # building a model makes its key known
    try:
        raise RuntimeError(f"server said: bad key {long_key}")
    except RuntimeError:
        with caplog.at_level(logging.DEBUG):
            for name in ("memoryscope", "memoryscope.scheduler", "memoryscope.some.new.module", "workers.info_filter"):
                logger = logging.getLogger(name)
                logger.debug("debug %s", long_key)
                logger.info(f"info {long_key}")
                logger.error("error", exc_info=True)
                logger.warning("warning %r", {"headers": {"Authorization": f"Bearer {long_key}"}})
    assert len(caplog.records) == 16
    assert long_key not in caplog.text and SECRET_PART not in caplog.text
    for record in caplog.records:
        assert long_key not in record.getMessage()
    assert "debug ***" in caplog.text and "server said: bad key ***" in caplog.text


# -- a failure in a background run of the scheduler ------------------------------------------


class _AskParams(WorkerParams):
    generation_model: str = "generation_model"


@register_worker("key_leak_test_ask")
class AskWorker(Worker):
    """Asks the LLM one question per run (the model fails in these tests)."""

    writes: ClassVar[tuple[str, ...]] = ("result",)

    class Params(_AskParams):
        pass

    def bind(self, env: Env) -> None:
        model = env.generation_model(self.params.generation_model, where=f"worker.{self.name}")
        if model is None:
            raise RuntimeError("the test config has a generation model")
        self.model = model

    def run(self, ctx: MemoryContext) -> None:
        ctx.result = self.model.chat([ChatMessage("user", f"what did {ctx.user_name} say?")])


@pytest.fixture
def app(server: FakeOpenAIServer, long_key: str, tmp_path: Path, fast_retry: dict[str, Any]) -> Iterator[MemoryScope]:
    config = {
        "global": {"timezone": "UTC"},
        "model": {
            "generation_model": {
                "class": "llama_index_generation_model",
                "module_name": "openai_like",
                "model_name": "qwen",
                "api_base": server.base_url,
                "api_key_env": KEY_ENV,
                **fast_retry,
            },
            "embedding_model": {"class": "llama_index_embedding_model", "module_name": "local_embedding"},
        },
        "memory_store": {"class": "sqlite_memory_store", "path": str(tmp_path / "m.db"), "embedding_model": "embedding_model"},
        "worker": {"ask": {"class": "key_leak_test_ask"}},
        "memory_service": {
            "memoryscope_service": {
                "memory_operations": {
                    "read_message": {"workflow": "read_message"},
                    "consolidate_memory": {"workflow": "ask", "trigger_messages": 1, "description": "asks the LLM"},
                }
            }
        },
    }
    with MemoryScope(config=config) as scope:
        yield scope


@pytest.mark.parametrize("status", [401, 429, 500])
def test_a_failed_background_run_logs_no_key(
    app: MemoryScope, server: FakeOpenAIServer, long_key: str, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    server.fail_next(10, status=status, body=echoing_body(long_key, status))
    scheduler = app.default_service.scheduler
    with caplog.at_level(logging.DEBUG):
        message = Message("user", "I play the guitar", datetime(2024, 10, 26, 9, 0, tzinfo=timezone.utc), name="ann")
        app.default_service.run_operation("read_message", "ann", messages=(message,))
        assert scheduler.wait_idle(10.0)
    error = scheduler.status().last_error("ann", "consolidate_memory")
    assert f"HTTP {status}" in error and "***" in error
    assert long_key not in error
    tracebacks = [record for record in caplog.records if record.name == "memoryscope.scheduler" and record.levelname == "DEBUG"]
    assert tracebacks and (tracebacks[0].exc_info or tracebacks[0].exc_text), "the traceback of the failed run is logged"
    assert long_key not in caplog.text and SECRET_PART not in caplog.text
