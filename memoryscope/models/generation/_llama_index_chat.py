"""A GenerationModel over any LlamaIndex LLM: message conversion, usage, retries and errors.

Subclasses only build the LlamaIndex LLM. This class:
- converts `ChatMessage`s to LlamaIndex's;
- counts usage: one call per chat, the prompt and completion tokens the server reports (in the
  response, or in the last stream chunk), else an estimate with the offline cl100k_base table;
- retries through `memoryscope.models.http.RemoteCaller` (429/5xx/connection errors/timeouts,
  backoff with jitter, `Retry-After`). The LLM's own retries must be off (`max_retries=0`), so an
  attempt is counted once and the backoff is ours. A stream is retried only until its first
  chunk arrives; a stream that breaks later raises, since part of the reply was already given;
- turns every exception of the client or of LlamaIndex into a `ModelError` naming backend,
  model and endpoint, its reason scrubbed of the key and nothing chained to it (the client's
  exception holds the server's reply, which may echo the key).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from memoryscope.errors import ModelError
from memoryscope.models.base import ChatMessage, GenerationModel
from memoryscope.models.http import (
    AttemptFailed,
    RemoteCaller,
    RetryPolicy,
    connection_reason,
    is_retryable_status,
    parse_retry_after,
    snippet,
)
from memoryscope.models.token_count import count_tokens

__all__ = ["LlamaIndexGeneration", "attempt_failure"]

_ROLES = ("system", "user", "assistant")


def attempt_failure(error: Exception, timeout_s: float) -> AttemptFailed:
    """What one failed attempt means: the reason to report, and whether a retry may help."""
    import openai  # imported here: loaded with the LLM anyway

    if isinstance(error, openai.APITimeoutError):
        return AttemptFailed(f"timed out after {timeout_s:g}s", retryable=True)
    if isinstance(error, openai.APIConnectionError):
        return AttemptFailed(f"cannot connect: {connection_reason(error.__cause__ or error)}", retryable=True)
    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        body = snippet(error.response.text) or "(empty body)"
        retry_after = parse_retry_after(error.response.headers.get("retry-after"))
        return AttemptFailed(f"HTTP {status}: {body}", retryable=is_retryable_status(status), retry_after_s=retry_after)
    if isinstance(error, TimeoutError | ConnectionError):
        return AttemptFailed(f"{type(error).__name__}: {snippet(str(error))}", retryable=True)
    detail = f"{type(error).__name__}: {snippet(str(error))}"
    if isinstance(error, TypeError) and "keyword argument" in str(error):
        return AttemptFailed(f"bad call option: {detail}", retryable=False)
    if isinstance(error, ValueError | TypeError | AttributeError | KeyError | IndexError):
        # JSON that does not parse, or parses to something other than a chat completion
        return AttemptFailed(f"malformed response (expected an OpenAI-style chat completion): {detail}", retryable=False)
    return AttemptFailed(f"client error: {detail}", retryable=False)


class LlamaIndexGeneration(GenerationModel):
    """Chat through a LlamaIndex LLM with MemoryScope's usage counting, retries and errors."""

    backend = "llama_index"

    def __init__(
        self,
        llm: Any,
        *,
        model_name: str,
        endpoint: str,
        policy: RetryPolicy,
        timeout_s: float,
        call_options: Mapping[str, Any] | None = None,
        stream_options: Mapping[str, Any] | None = None,
        api_key: str | None = None,
    ) -> None:
        super().__init__(model_name, endpoint)
        self._llm = llm
        self._timeout_s = timeout_s
        self._call_options = dict(call_options or {})
        self._stream_options = dict(stream_options or {})  # sent with streaming calls only
        self._caller = RemoteCaller(backend=self.backend, model=model_name, endpoint=endpoint, policy=policy, api_key=api_key)

    def _open_async_llm(self) -> AbstractAsyncContextManager[Any]:
        """The LLM for one async call. Backends whose async client is bound to an event loop
        override this to open a fresh client per call and close it afterwards."""
        return _as_context(self._llm)

    # -- the four ways to chat -------------------------------------------------------------

    def chat(self, messages: Sequence[ChatMessage], **options: Any) -> str:
        prompt = _to_llama_index(messages)
        kwargs = {**self._call_options, **options}
        with self.usage.measure() as tokens:
            response = self._caller.call(lambda: self._attempt(lambda: self._llm.chat(prompt, **kwargs)))
            text = _text_of(response)
            _count(tokens, response, messages, text)
        return text

    async def achat(self, messages: Sequence[ChatMessage], **options: Any) -> str:
        prompt = _to_llama_index(messages)
        kwargs = {**self._call_options, **options}
        with self.usage.measure() as tokens:
            async with self._open_async_llm() as llm:
                response = await self._caller.acall(lambda: self._aattempt(lambda: llm.achat(prompt, **kwargs)))
            text = _text_of(response)
            _count(tokens, response, messages, text)
        return text

    def stream_chat(self, messages: Sequence[ChatMessage], **options: Any) -> Iterator[str]:
        prompt = _to_llama_index(messages)
        kwargs = {**self._call_options, **self._stream_options, **options}

        def open_stream() -> tuple[Iterator[Any], Any]:
            stream = self._llm.stream_chat(prompt, **kwargs)
            return stream, _first_chunk(next(stream, None))  # the request goes out when the first chunk is asked for

        started = time.perf_counter()
        tally = _StreamTally()
        stream: Any = None
        try:
            stream, response = self._caller.call(lambda: self._attempt(open_stream))
            while response is not None:
                piece = tally.add(response)
                if piece:
                    yield piece
                response = self._next_or_raise(stream)
            tally.failed = False
        except GeneratorExit:  # the caller stopped reading: not a failure
            tally.failed = False
            raise
        finally:
            if stream is not None:
                stream.close()  # releases the HTTP response when the caller stopped early
            tally.record(self.usage, messages, time.perf_counter() - started)

    async def astream_chat(self, messages: Sequence[ChatMessage], **options: Any) -> AsyncIterator[str]:
        prompt = _to_llama_index(messages)
        kwargs = {**self._call_options, **self._stream_options, **options}
        started = time.perf_counter()
        tally = _StreamTally()
        try:
            async with self._open_async_llm() as llm:

                async def open_stream() -> tuple[Any, Any]:
                    stream = await llm.astream_chat(prompt, **kwargs)
                    return stream, _first_chunk(await anext(stream, None))

                stream, response = await self._caller.acall(lambda: self._aattempt(open_stream))
                try:
                    while response is not None:
                        piece = tally.add(response)
                        if piece:
                            yield piece
                        response = await self._anext_or_raise(stream)
                finally:
                    await stream.aclose()  # releases the HTTP response when the caller stopped early
            tally.failed = False
        except GeneratorExit:
            tally.failed = False
            raise
        finally:
            tally.record(self.usage, messages, time.perf_counter() - started)

    # -- helpers ---------------------------------------------------------------------------

    def _attempt(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as error:
            raise attempt_failure(error, self._timeout_s) from error

    async def _aattempt(self, call: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await call()
        except Exception as error:
            raise attempt_failure(error, self._timeout_s) from error

    # The ModelError of a broken stream is raised outside the `except`, chaining nothing: the
    # client's error holds the server's text, which may echo the key (see memoryscope.models.http).
    def _next_or_raise(self, stream: Iterator[Any]) -> Any:
        try:
            return next(stream, None)
        except Exception as error:
            broken = self._broken_stream(error)
        raise broken

    async def _anext_or_raise(self, stream: AsyncIterator[Any]) -> Any:
        try:
            return await anext(stream, None)
        except Exception as error:
            broken = self._broken_stream(error)
        raise broken

    def _broken_stream(self, error: Exception) -> ModelError:
        reason = attempt_failure(error, self._timeout_s).reason
        return self._caller.error(f"{reason} (the stream broke after part of the reply; not retried)")


class _StreamTally:
    """What a stream has delivered so far, for the usage counters."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reported: dict[str, int] = {}
        self.failed = True

    def add(self, response: Any) -> str:
        self.reported.update(_reported_usage(response))
        piece = getattr(response, "delta", None) or ""
        self.text.append(piece)
        return piece

    def record(self, usage: Any, messages: Sequence[ChatMessage], latency_s: float) -> None:
        if not self.text:  # nothing arrived: nothing to count but the call and its time
            usage.record(latency_s=latency_s, error=self.failed)
            return
        text = "".join(self.text)
        prompt, completion = _usage_or_estimate(self.reported, messages, text)
        usage.record(latency_s=latency_s, prompt_tokens=prompt, completion_tokens=completion, error=self.failed)


def _first_chunk(chunk: Any) -> Any:
    if chunk is None:  # e.g. a server that ignored `stream: true` and sent one JSON body
        raise ValueError("the stream ended before its first chunk (expected server-sent events)")
    return chunk


def _to_llama_index(messages: Sequence[ChatMessage]) -> list[Any]:
    from llama_index.core.llms import ChatMessage as LlamaChatMessage  # imported here: heavy

    converted = []
    for position, message in enumerate(messages):
        if message.role not in _ROLES:
            raise ValueError(f"messages[{position}].role must be one of {', '.join(_ROLES)}, got {message.role!r}")
        converted.append(LlamaChatMessage(role=message.role, content=message.content))
    return converted


def _text_of(response: Any) -> str:
    content = response.message.content
    return content if isinstance(content, str) else ""


def _reported_usage(response: Any) -> dict[str, int]:
    extra = getattr(response, "additional_kwargs", None) or {}
    return {name: int(extra[name]) for name in ("prompt_tokens", "completion_tokens") if isinstance(extra.get(name), int)}


def _usage_or_estimate(reported: Mapping[str, int], messages: Sequence[ChatMessage], text: str) -> tuple[int, int]:
    prompt = reported.get("prompt_tokens")
    completion = reported.get("completion_tokens")
    if prompt is None:
        prompt = sum(count_tokens(message.content) for message in messages)
    if completion is None:
        completion = count_tokens(text)
    return prompt, completion


def _count(tokens: dict[str, int], response: Any, messages: Sequence[ChatMessage], text: str) -> None:
    tokens["prompt"], tokens["completion"] = _usage_or_estimate(_reported_usage(response), messages, text)


@asynccontextmanager
async def _as_context(llm: Any) -> AsyncIterator[Any]:
    yield llm
