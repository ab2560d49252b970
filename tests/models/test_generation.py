"""Generation backends against the fake server: requests sent, replies, usage, errors."""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from typing import Any

import pytest

from memoryscope.errors import ModelError
from memoryscope.models.base import GENERATION_BACKENDS, ChatMessage, PresetGenerationModel
from memoryscope.models.generation.dashscope import DashScopeGeneration
from memoryscope.models.generation.openai import OpenAIGeneration
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.models.token_count import count_tokens
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.slow  # subprocesses and retries with back-off; `-m "not slow"` leaves it out

MESSAGES = [ChatMessage("system", "You extract facts."), ChatMessage("user", "I play the guitar every evening.")]
REPLY = "The user plays the guitar."


def make_model(server: FakeOpenAIServer, fast_retry: dict[str, Any], **params: Any) -> OpenAILikeGeneration:
    values = {"model_name": "Qwen/Qwen2.5-7B-Instruct", "api_base": server.base_url, **fast_retry, **params}
    return OpenAILikeGeneration(OpenAILikeGeneration.Params(**values))


async def collect(pieces: AsyncIterator[str]) -> list[str]:
    return [piece async for piece in pieces]


@pytest.fixture
def model(server: FakeOpenAIServer, fast_retry: dict[str, Any], api_key: str) -> OpenAILikeGeneration:
    server.add_rule("guitar", REPLY)
    return make_model(server, fast_retry, api_key_env="MEMORYSCOPE_TEST_KEY", max_tokens=300, temperature=0.01)


def expected_messages() -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in MESSAGES]


def test_chat_sends_model_messages_and_sampling_settings(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    assert model.chat(MESSAGES) == REPLY
    (record,) = server.requests
    assert record.path == "/v1/chat/completions" and record.api_key_suffix == "9xyz"
    body = record.body
    assert body["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert body["messages"] == expected_messages()
    assert (body["temperature"], body["max_tokens"], body["stream"]) == (0.01, 300, False)
    assert "stream_options" not in body


def test_chat_counts_usage_reported_by_the_server(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    model.chat(MESSAGES)
    model.chat(MESSAGES)
    record = server.requests[0]
    usage = model.usage.snapshot()
    assert usage["calls"] == 2 and usage["errors"] == 0
    assert usage["prompt_tokens"] == 2 * record.prompt_tokens > 0
    assert usage["completion_tokens"] == 2 * record.completion_tokens > 0
    assert usage["latency_s"] > 0


def test_usage_is_estimated_when_the_server_reports_none(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.report_usage = False
    model.chat(MESSAGES)
    usage = model.usage.snapshot()
    assert usage["prompt_tokens"] == sum(count_tokens(m.content) for m in MESSAGES)
    assert usage["completion_tokens"] == count_tokens(REPLY)


def test_call_options_override_params(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    model.chat(MESSAGES, temperature=0.9, max_tokens=5, stop=["\n"])
    body = server.requests[0].body
    assert (body["temperature"], body["max_tokens"], body["stop"]) == (0.9, 5, ["\n"])


def test_extra_body_fields_are_sent(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = make_model(server, fast_retry, extra_body={"top_k": 20, "enable_thinking": False}, max_tokens=None)
    model.chat(MESSAGES)
    body = server.requests[0].body
    assert (body["top_k"], body["enable_thinking"]) == (20, False)
    assert "max_tokens" not in body


def test_stream_chat_yields_the_reply_in_pieces(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    pieces = list(model.stream_chat(MESSAGES))
    assert len(pieces) > 1 and "".join(pieces) == REPLY
    body = server.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert (body["messages"], body["temperature"], body["max_tokens"]) == (expected_messages(), 0.01, 300)
    usage = model.usage.snapshot()
    assert (usage["calls"], usage["prompt_tokens"], usage["completion_tokens"]) == (
        1,
        server.requests[0].prompt_tokens,
        server.requests[0].completion_tokens,
    )


def test_a_stream_closed_early_leaves_no_client_stream_to_the_garbage_collector(model: OpenAILikeGeneration) -> None:
    """The client's stream sits in a reference cycle; left to the collector, its finaliser closes
    the HTTP response under the connection pool's lock at a random moment (a hang when that moment
    is inside a section holding the lock). Closing our stream early frees it there and then."""

    def client_streams() -> int:
        kinds = (type(item) for item in gc.get_objects())
        return sum(1 for kind in kinds if kind.__name__ == "Stream" and kind.__module__.startswith("openai"))

    gc.collect()
    gc.disable()
    try:
        before = client_streams()
        stream = model.stream_chat(MESSAGES)
        assert next(stream)
        stream.close()  # the caller stops reading (Ctrl-C, a closed connection)
        del stream
        assert client_streams() == before
    finally:
        gc.enable()


def test_stream_without_usage_is_estimated(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = make_model(server, fast_retry, stream_usage=False)
    server.add_rule("guitar", REPLY)
    assert "".join(model.stream_chat(MESSAGES)) == REPLY
    assert "stream_options" not in server.requests[0].body
    assert model.usage.snapshot()["completion_tokens"] == count_tokens(REPLY)


def test_achat(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    assert asyncio.run(model.achat(MESSAGES)) == REPLY
    body = server.requests[0].body
    assert (body["model"], body["messages"], body["temperature"], body["max_tokens"]) == (
        "Qwen/Qwen2.5-7B-Instruct",
        expected_messages(),
        0.01,
        300,
    )
    assert model.usage.snapshot()["prompt_tokens"] == server.requests[0].prompt_tokens


def test_astream_chat(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    pieces = asyncio.run(collect(model.astream_chat(MESSAGES)))
    assert len(pieces) > 1 and "".join(pieces) == REPLY
    assert server.requests[0].body["stream"] is True
    assert model.usage.snapshot()["completion_tokens"] == server.requests[0].completion_tokens


def test_async_calls_work_from_several_event_loops(model: OpenAILikeGeneration) -> None:
    assert [asyncio.run(model.achat(MESSAGES)) for _ in range(3)] == [REPLY] * 3


def test_server_errors_are_retried_for_every_call_style(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.fail_next(2, status=500)
    assert model.chat(MESSAGES) == REPLY
    server.fail_next(1, status=429)
    assert "".join(model.stream_chat(MESSAGES)) == REPLY
    server.fail_next(2, status=502)
    assert asyncio.run(model.achat(MESSAGES)) == REPLY
    server.fail_next(1, status=503)
    assert "".join(asyncio.run(collect(model.astream_chat(MESSAGES)))) == REPLY
    assert [r.status for r in server.requests] == [500, 500, 200, 429, 200, 502, 502, 200, 503, 200]


def test_persistent_error_names_backend_model_endpoint(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.fail_next(3, status=500)
    with pytest.raises(ModelError) as caught:
        model.chat(MESSAGES)
    assert (caught.value.backend, caught.value.model) == ("openai_like", "Qwen/Qwen2.5-7B-Instruct")
    assert caught.value.endpoint == f"{server.base_url}/chat/completions"
    assert "HTTP 500" in str(caught.value) and "3 attempts" in str(caught.value)
    assert len(server.requests) == 3
    assert model.usage.snapshot()["errors"] == 1


def test_bad_request_is_not_retried(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.fail_next(1, status=400, body='{"error": {"message": "max_tokens too large"}}')
    with pytest.raises(ModelError, match=r"HTTP 400: .*max_tokens too large"):
        list(model.stream_chat(MESSAGES))
    assert len(server.requests) == 1


@pytest.mark.parametrize("reply", [{"choices": []}, {"no": "choices"}, [1, 2]])
def test_malformed_completion_is_a_model_error(model: OpenAILikeGeneration, server: FakeOpenAIServer, reply: Any) -> None:
    server.override("/v1/chat/completions", lambda body: reply)
    with pytest.raises(ModelError, match="malformed response"):
        model.chat(MESSAGES)
    with pytest.raises(ModelError, match="malformed response"):
        asyncio.run(model.achat(MESSAGES))


def test_invalid_json_and_missing_stream_are_model_errors(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.malformed_next(1)
    with pytest.raises(ModelError, match="malformed response"):
        model.chat(MESSAGES)
    server.override("/v1/chat/completions", lambda body: {"choices": []})  # one JSON body, no events
    with pytest.raises(ModelError, match="expected server-sent events"):
        list(model.stream_chat(MESSAGES))


def test_stream_that_breaks_midway_raises_after_the_pieces_it_gave(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.break_stream_next(1, after_chunks=3, message="GPU fell over")
    received: list[str] = []
    with pytest.raises(ModelError, match=r"GPU fell over.*stream broke after part of the reply; not retried"):
        received.extend(model.stream_chat(MESSAGES))
    assert "".join(received) == "The user"  # a role chunk, then two words
    assert len(server.requests) == 1
    usage = model.usage.snapshot()
    assert (usage["errors"], usage["completion_tokens"]) == (1, count_tokens("The user"))


def test_async_stream_that_breaks_midway(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.break_stream_next(1, after_chunks=2)
    with pytest.raises(ModelError, match="stream broke"):
        asyncio.run(collect(model.astream_chat(MESSAGES)))


def test_refused_connection_for_every_call_style(closed_port: int, fast_retry: dict[str, Any]) -> None:
    api_base = f"http://127.0.0.1:{closed_port}/v1"
    model = OpenAILikeGeneration(OpenAILikeGeneration.Params(model_name="m", api_base=api_base, **fast_retry))
    calls = [
        lambda: model.chat(MESSAGES),
        lambda: list(model.stream_chat(MESSAGES)),
        lambda: asyncio.run(model.achat(MESSAGES)),
        lambda: asyncio.run(collect(model.astream_chat(MESSAGES))),
    ]
    for call in calls:
        with pytest.raises(ModelError, match="cannot connect") as caught:
            call()
        assert caught.value.endpoint == f"{api_base}/chat/completions"
    assert model.usage.snapshot()["errors"] == 4


def test_stopping_a_stream_early_is_not_an_error(model: OpenAILikeGeneration) -> None:
    stream = model.stream_chat(MESSAGES)
    assert next(stream) == "The"
    stream.close()
    usage = model.usage.snapshot()
    assert (usage["calls"], usage["errors"]) == (1, 0)


def test_key_stays_out_of_reprs(model: OpenAILikeGeneration, api_key: str) -> None:
    assert api_key not in repr(model)
    assert api_key not in repr(model._llm)  # the LlamaIndex object holds a placeholder; the client holds the key


def test_unknown_role_is_refused() -> None:
    model_messages = [ChatMessage("robot", "beep")]
    with pytest.raises(ValueError, match=r"messages\[0\].role must be one of system, user, assistant"):
        OpenAILikeGeneration(OpenAILikeGeneration.Params(model_name="m", api_base="http://127.0.0.1:9/v1")).chat(model_messages)


def test_openai_backend_accepts_model_names_it_does_not_know(
    server: FakeOpenAIServer, fast_retry: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test-abcd")
    model = OpenAIGeneration(
        OpenAIGeneration.Params(model_name="gpt-from-the-future-2099", api_base=server.base_url, **fast_retry)
    )
    assert model.chat(MESSAGES) == "This is a fake reply."
    assert server.requests[0].body["model"] == "gpt-from-the-future-2099"
    assert server.requests[0].api_key_suffix == "abcd"
    assert OpenAIGeneration.Params().api_base == "https://api.openai.com/v1"


def test_dashscope_uses_the_compatible_mode_by_default(
    server: FakeOpenAIServer, fast_retry: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-dashscope-test-qwen")
    assert DashScopeGeneration.Params().api_base == "https://dashscope.aliyuncs.com/compatible-mode/v1"
    model = DashScopeGeneration(DashScopeGeneration.Params(api_base=server.base_url, **fast_retry))
    assert "".join(model.stream_chat(MESSAGES)) == "This is a fake reply."
    assert asyncio.run(model.achat(MESSAGES)) == "This is a fake reply."
    assert [r.body["model"] for r in server.requests] == ["qwen-plus", "qwen-plus"]
    assert server.requests[0].api_key_suffix == "qwen"


@pytest.mark.skipif(importlib.util.find_spec("llama_index.llms.dashscope") is not None, reason="the dashscope extra is installed")
def test_dashscope_native_sdk_without_the_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-dashscope-test-qwen")
    with pytest.raises(ModelError, match=r'pip install "memoryscope\[dashscope\]"'):
        DashScopeGeneration(DashScopeGeneration.Params(native_sdk=True))


def test_backends_are_registered() -> None:
    assert {"openai_like", "openai", "dashscope"} <= set(GENERATION_BACKENDS.names())
    assert GENERATION_BACKENDS.get("openai_like") is OpenAILikeGeneration


OFFLINE_SCRIPT = textwrap.dedent(
    """
    import asyncio, socket
    real_connect = socket.socket.connect
    def connect(self, address):
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1"):
            raise OSError(f"network is off: {address!r}")
        return real_connect(self, address)
    socket.socket.connect = connect
    real_getaddrinfo = socket.getaddrinfo
    def getaddrinfo(host, *args, **kwargs):
        if host not in ("127.0.0.1", "localhost"):
            raise OSError(f"network is off: lookup of {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)
    socket.getaddrinfo = getaddrinfo

    from memoryscope.models.base import ChatMessage
    from memoryscope.models.generation.openai_like import OpenAILikeGeneration
    from memoryscope.testing.fake_openai import FakeOpenAIServer

    with FakeOpenAIServer(report_usage=False) as server:
        model = OpenAILikeGeneration(OpenAILikeGeneration.Params(model_name="m", api_base=server.base_url))
        messages = [ChatMessage("user", "hello")]
        model.chat(messages)
        "".join(model.stream_chat(messages))
        asyncio.run(model.achat(messages))
        print("usage", model.usage.snapshot())
    """
)


def test_nothing_is_downloaded_at_run_time(tmp_path: Any) -> None:
    """A fresh interpreter with the network off and empty caches chats, streams and counts tokens."""
    environment = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "tiktoken"), "NLTK_DATA": str(tmp_path / "nltk")}
    environment["LLAMA_INDEX_CACHE_DIR"] = str(tmp_path / "llama_index")
    done = subprocess.run([sys.executable, "-c", OFFLINE_SCRIPT], env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "'errors': 0" in done.stdout and "'completion_tokens': 18" in done.stdout  # 3 calls x 6 tokens, estimated offline


def test_a_workers_generation_model_kwargs_go_with_every_call(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    """MemoryScope 0.1's `generation_model_kwargs`: the worker's options, the call's own winning."""
    worker = build_worker(
        "get_reflection_subject",
        {"generation_model_kwargs": {"temperature": 0.7, "top_p": 0.5}},
        make_env(models={"generation_model": model}),
    )
    preset = worker._model  # type: ignore[attr-defined]  # what the worker calls
    assert isinstance(preset, PresetGenerationModel) and preset.usage is model.usage
    preset.chat(MESSAGES)
    preset.chat(MESSAGES, temperature=0.2)
    first, second = (request.body for request in server.requests)
    assert (first["temperature"], first["top_p"], second["temperature"], second["top_p"]) == (0.7, 0.5, 0.2, 0.5)
    assert model.usage.snapshot()["calls"] == 2
    plain = build_worker("get_reflection_subject", {}, make_env(models={"generation_model": model}))
    assert plain._model is model  # type: ignore[attr-defined]  # no options: the model itself
