"""A GenerationModel over any LlamaIndex LLM: message conversion, usage, retries and errors.

Subclasses only build the LlamaIndex LLM. This class:
- converts `ChatMessage`s to LlamaIndex's;
- calls functions (OpenAI "tools") when the subclass says its LLM can (`supports_tools`): the
  OpenAI wire-format messages become LlamaIndex messages (an assistant's `tool_calls` and a tool
  message's `tool_call_id` in `additional_kwargs`, which LlamaIndex's OpenAI LLM writes back to
  the wire as they were), the tool schemas go as the `tools` option of the request as given, and
  the calls come back from the response's `additional_kwargs["tool_calls"]` (streamed, LlamaIndex
  accumulates them there chunk by chunk; what is new in each is passed on). LlamaIndex's own
  `chat_with_tools` is not used: it takes LlamaIndex tool objects, not schemas;
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

import gc
import itertools
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from typing import Any

from memoryscope.errors import ModelError, shorten
from memoryscope.models.base import (
    ChatMessage,
    GenerationModel,
    ToolCall,
    ToolCallDelta,
    ToolReply,
    ToolReplyPiece,
)
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
_TOOL_ROLES = (*_ROLES, "tool")  # a tool message answers a call: only in function-calling chats


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
        self._call_numbers = itertools.count(1)  # names the tool calls a server sent without an id

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
        stopped_early = False
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
            stopped_early = True
            raise
        finally:
            if stream is not None:
                stream.close()  # releases the HTTP response when the caller stopped early
                if stopped_early:
                    # The client's own stream is left in a reference cycle, which only the garbage
                    # collector frees; its finaliser closes the HTTP response under the connection
                    # pool's lock. Collected at a random later moment, that can be inside a section
                    # holding the same (non-reentrant) lock, and the process hangs. Collect it now,
                    # here, where no lock of the pool is held.
                    gc.collect()
            tally.record(self.usage, messages, time.perf_counter() - started)

    async def astream_chat(self, messages: Sequence[ChatMessage], **options: Any) -> AsyncIterator[str]:
        prompt = _to_llama_index(messages)
        kwargs = {**self._call_options, **self._stream_options, **options}
        started = time.perf_counter()
        tally = _StreamTally()
        try:
            async with aclosing(self._responses(prompt, kwargs)) as responses:
                async for response in responses:
                    piece = tally.add(response)
                    if piece:
                        yield piece
            tally.failed = False
        except GeneratorExit:
            tally.failed = False
            raise
        finally:
            tally.record(self.usage, messages, time.perf_counter() - started)

    async def _responses(self, prompt: list[Any], kwargs: Mapping[str, Any]) -> AsyncGenerator[Any, None]:
        """A streamed call's responses, the stream opened with retries (up to its first chunk)
        and closed however the caller stops (use it in `aclosing`)."""
        async with self._open_async_llm() as llm:

            async def open_stream() -> tuple[Any, Any]:
                stream = await llm.astream_chat(prompt, **kwargs)
                return stream, _first_chunk(await anext(stream, None))

            stream, response = await self._caller.acall(lambda: self._aattempt(open_stream))
            try:
                while response is not None:
                    yield response
                    response = await self._anext_or_raise(stream)
            finally:
                await stream.aclose()  # releases the HTTP response when the caller stopped early

    # -- function calling ------------------------------------------------------------------

    def chat_with_tools(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], **options: Any
    ) -> ToolReply:
        prompt, kwargs = self._tool_request(messages, tools, options)
        with self.usage.measure() as tokens:
            response, reply = self._caller.call(
                lambda: self._attempt(lambda: self._tool_answer(self._llm.chat(prompt, **kwargs)))
            )
            _count_tool_reply(tokens, response, messages, tools, reply)
        return reply

    async def achat_with_tools(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], **options: Any
    ) -> ToolReply:
        prompt, kwargs = self._tool_request(messages, tools, options)
        with self.usage.measure() as tokens:
            async with self._open_async_llm() as llm:

                async def answer() -> tuple[Any, ToolReply]:
                    return self._tool_answer(await llm.achat(prompt, **kwargs))

                response, reply = await self._caller.acall(lambda: self._aattempt(answer))
            _count_tool_reply(tokens, response, messages, tools, reply)
        return reply

    async def astream_chat_with_tools(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], **options: Any
    ) -> AsyncIterator[ToolReplyPiece]:
        prompt, kwargs = self._tool_request(messages, tools, {**self._stream_options, **options})
        started = time.perf_counter()
        tally = _StreamTally()
        calls = _CallPieces(self._call_numbers)
        try:
            async with aclosing(self._responses(prompt, kwargs)) as responses:
                async for response in responses:
                    piece = ToolReplyPiece(tally.add(response), calls.new_in(response))
                    if piece.content or piece.tool_calls:
                        yield piece
            tally.failed = False
        except GeneratorExit:
            tally.failed = False
            raise
        finally:
            tally.text.extend(calls.texts())
            tally.record(self.usage, _tool_prompt(messages, tools), time.perf_counter() - started)

    def _tool_request(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], options: Mapping[str, Any]
    ) -> tuple[list[Any], dict[str, Any]]:
        if not self.supports_tools:
            raise self._tools_unsupported()
        kwargs = {**self._call_options, **options}
        if tools:  # OpenAI refuses an empty `tools` list; without tools it is a plain chat
            kwargs["tools"] = [dict(tool) for tool in tools]
        return _wire_to_llama_index(messages), kwargs

    def _tool_answer(self, response: Any) -> tuple[Any, ToolReply]:
        """The response and the reply in it. Called inside the attempt: a call that does not parse
        is a malformed response (a ModelError), not an exception of ours."""
        raw_calls = response.message.additional_kwargs.get("tool_calls") or ()
        calls = tuple(_tool_call_of(raw, self._call_numbers) for raw in raw_calls)
        return response, ToolReply(_text_of(response), calls)

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


class _CallPieces:
    """The function calls of a stream, told as pieces: LlamaIndex keeps each call accumulated so
    far in every chunk's `message.additional_kwargs["tool_calls"]`; what was not told yet is new."""

    def __init__(self, numbers: Iterator[int]) -> None:
        self._numbers = numbers
        self._told: list[tuple[str, str]] = []  # per call: its name, and its arguments as told so far

    def new_in(self, response: Any) -> tuple[ToolCallDelta, ...]:
        raw_calls = response.message.additional_kwargs.get("tool_calls") or ()
        pieces = []
        for index, raw in enumerate(raw_calls):
            call_id, name, arguments = _call_fields(raw)
            if index == len(self._told):
                if not name:  # its name has not come yet: the call starts when it does
                    break
                self._told.append((name, arguments))
                pieces.append(ToolCallDelta(index, call_id or f"call_{next(self._numbers)}", name, arguments))
                continue
            told_name, told = self._told[index]
            if len(arguments) > len(told):
                self._told[index] = (told_name, arguments)
                pieces.append(ToolCallDelta(index, arguments=arguments[len(told) :]))
        return tuple(pieces)

    def texts(self) -> list[str]:
        """The calls told, as text for a usage estimate (the model wrote them)."""
        return [f"\n{name} {arguments}" for name, arguments in self._told]


def _call_fields(raw: Any) -> tuple[str, str, str]:
    """(id, name, arguments so far) of an accumulated call: an OpenAI SDK object or a dict."""
    if isinstance(raw, Mapping):
        function = raw.get("function")
        call_id = raw.get("id")
        name, arguments = (function.get("name"), function.get("arguments")) if isinstance(function, Mapping) else (None, None)
    else:
        function = getattr(raw, "function", None)
        call_id, name, arguments = getattr(raw, "id", None), getattr(function, "name", None), getattr(function, "arguments", None)
    return _string(call_id), _string(name), _string(arguments)


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


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


def _wire_to_llama_index(messages: Sequence[Mapping[str, Any]]) -> list[Any]:
    """OpenAI wire-format messages as LlamaIndex's, the tool-call fields in `additional_kwargs`."""
    from llama_index.core.llms import ChatMessage as LlamaChatMessage  # imported here: heavy

    converted = []
    for position, message in enumerate(messages):
        where = f"messages[{position}]"
        if not isinstance(message, Mapping):
            raise ValueError(f"{where} must be a mapping (an OpenAI-style message), got {type(message).__name__}")
        role, content = message.get("role"), message.get("content")
        if role not in _TOOL_ROLES:
            raise ValueError(f"{where}.role must be one of {', '.join(_TOOL_ROLES)}, got {role!r}")
        if content is not None and not isinstance(content, str):
            raise ValueError(f"{where}.content must be a string or None, got {type(content).__name__}")
        extra: dict[str, Any] = {}
        if role == "assistant" and message.get("tool_calls"):
            calls = message["tool_calls"]
            if not isinstance(calls, Sequence) or isinstance(calls, str):
                raise ValueError(f"{where}.tool_calls must be a list, got {type(calls).__name__}")
            extra["tool_calls"] = [_wire_tool_call(call, f"{where}.tool_calls[{n}]") for n, call in enumerate(calls)]
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise ValueError(f"{where}: a tool message needs the `tool_call_id` of the call it answers")
            extra["tool_call_id"] = call_id
        converted.append(LlamaChatMessage(role=role, content=content, additional_kwargs=extra))
    return converted


def _wire_tool_call(call: Any, where: str) -> dict[str, Any]:
    """A call of an assistant message as plain JSON-ready dicts (the client serialises them as given)."""
    function = call.get("function") if isinstance(call, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ValueError(
            f'{where} must be {{"id", "type": "function", "function": {{"name", "arguments"}}}}, got {shorten(call)}'
        )
    arguments = function.get("arguments") if isinstance(function, Mapping) else None
    if not isinstance(arguments, str):
        arguments = "" if arguments is None else json.dumps(arguments, ensure_ascii=False)
    return {"id": str(call.get("id") or ""), "type": "function", "function": {"name": name, "arguments": arguments}}


def _tool_call_of(raw: Any, numbers: Iterator[int]) -> ToolCall:
    """A tool call of a response: an OpenAI SDK object (LlamaIndex passes them on) or a dict."""
    if isinstance(raw, Mapping):
        call_id, function = raw.get("id"), raw.get("function")
        name, arguments = (function.get("name"), function.get("arguments")) if isinstance(function, Mapping) else (None, None)
    else:
        call_id, function = getattr(raw, "id", None), getattr(raw, "function", None)
        name, arguments = getattr(function, "name", None), getattr(function, "arguments", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"a tool call without a function name: {snippet(repr(raw))}")
    if not isinstance(arguments, str):  # the text is the caller's to parse; only an absent one is made up
        arguments = "" if arguments is None else json.dumps(arguments, ensure_ascii=False)
    return ToolCall(call_id if isinstance(call_id, str) and call_id else f"call_{next(numbers)}", name, arguments)


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


def _tool_prompt(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> list[ChatMessage]:
    """What the model reads of a function-calling request, as messages for a usage estimate."""
    texts = [_message_text(message) for message in messages] + [json.dumps(list(tools), ensure_ascii=False)] * bool(tools)
    return [ChatMessage("", text) for text in texts]


def _count_tool_reply(
    tokens: dict[str, int],
    response: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    reply: ToolReply,
) -> None:
    """As `_count`; an estimate counts the calls' text and the tool schemas too (the model reads them)."""
    completion = "\n".join([reply.content, *(f"{call.name} {call.arguments}" for call in reply.tool_calls)])
    _count(tokens, response, _tool_prompt(messages, tools), completion)


def _message_text(message: Mapping[str, Any]) -> str:
    calls = message.get("tool_calls") or ()
    parts = [str(message.get("content") or "")]
    parts += [json.dumps(call, ensure_ascii=False, default=str) for call in calls if isinstance(call, Mapping)]
    return "\n".join(parts)


@asynccontextmanager
async def _as_context(llm: Any) -> AsyncIterator[Any]:
    yield llm
