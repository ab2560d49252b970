"""A fake OpenAI-compatible server: real HTTP on 127.0.0.1, scripted replies, every request recorded.

Real clients (openai, llama-index, requests, aiohttp) talk to it, so tests exercise the real
request and response code of every backend::

    with FakeOpenAIServer() as server:
        server.add_rule("guitar", "The user plays the guitar.")
        model = OpenAILikeGeneration(OpenAILikeGeneration.Params(model_name="m", api_base=server.base_url))
        assert model.chat([ChatMessage("user", "what do I play? guitar?")]) == "The user plays the guitar."
        assert server.requests[-1].body["model"] == "m"

Or from a shell: `python -m memoryscope.testing.fake_openai --port 8000` (serves until Ctrl-C).

Endpoints, under `base_url` (`http://127.0.0.1:PORT/v1`):
- `POST /chat/completions`: the reply is the next one queued (see `queue_replies`), else comes
  from the first rule that matches (see `add_rule`), else is `default_reply`. `stream: true`
  answers with server-sent events (`data: {...}` chunks, word by word, `stream_chunk_delay_s`
  apart; then `data: [DONE]`), the usage in a last chunk when `stream_options.include_usage` is set.
  A reply is a text, or a `FakeToolCalls` for function calling (OpenAI "tools")::

      server.queue_replies(
          FakeToolCalls([("archival_memory_search", {"query": "guitar"})]),  # step 1 calls a function
          FakeToolCalls([("send_message", {"message": "You play the guitar."})], content="Found it."),
      )

  answered as OpenAI does: `message.tool_calls` (ids `call_<n>`, counted over the server's life,
  arguments JSON-encoded, or sent as given when a string) and `finish_reason: "tool_calls"`;
  streamed, a chunk per call with its id and name, then its arguments in pieces. The `tools`
  the client offered are in the recorded request's `body["tools"]`.
- `POST /embeddings`: deterministic hashed bag-of-words vectors (words and character trigrams,
  CJK characters and bigrams): similar texts get similar vectors, different texts different ones.
- `POST /rerank`: each document scored by the share of the query's words it contains, sorted,
  cut at `top_n`. DashScope's rerank is at `{root_url}/api/v1/services/rerank/text-rerank/text-rerank`.
- `GET /models`.

Faults for tests (`fail_next`, `malformed_next`, `delay_next`, `break_stream_next`) apply to
the next requests, in order. `override(path, handler)` replaces an endpoint's JSON reply.
Everything is thread-safe.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from memoryscope.models.token_count import offline_encoding
from memoryscope.testing._fake_payloads import (
    Answer,
    FakeToolCalls,
    chat_answer,
    dashscope_rerank_answer,
    embedding_vector,
    embeddings_answer,
    error_body,
    message_text,
    models_answer,
    overlap_score,
    rerank_answer,
)
from memoryscope.testing._loopback import LoopbackHandler, LoopbackServer, serve_until_interrupted

__all__ = ["FakeOpenAIServer", "FakeToolCalls", "RecordedRequest", "DASHSCOPE_RERANK_PATH", "embedding_vector", "overlap_score"]

Reply = str | FakeToolCalls | Callable[[dict[str, Any]], str | FakeToolCalls]
JsonHandler = Callable[[dict[str, Any]], dict[str, Any]]
DASHSCOPE_RERANK_PATH = "/api/v1/services/rerank/text-rerank/text-rerank"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it. The API key itself is never kept, only its last 4 characters."""

    method: str
    path: str
    body: Any  # the parsed JSON body, or the raw text when it was not JSON; None for GET
    headers: dict[str, str]  # without Authorization
    api_key_suffix: str | None  # last 4 characters of the bearer token; None when no Authorization header
    status: int
    reply: str | None = None  # the chat reply text, when there was one ("" for calls without text)
    tool_calls: tuple[dict[str, Any], ...] = ()  # the functions the reply called, as sent (with their ids)
    prompt_tokens: int = 0  # cl100k_base tokens of the prompt / inputs / query and documents
    completion_tokens: int = 0


@dataclass(frozen=True)
class _Rule:
    pattern: str | re.Pattern[str]
    reply: Reply
    target: Literal["last_user", "prompt"]

    def matches(self, last_user: str, prompt: str) -> bool:
        text = last_user if self.target == "last_user" else prompt
        if isinstance(self.pattern, re.Pattern):
            return self.pattern.search(text) is not None
        return self.pattern in text


@dataclass(frozen=True)
class _Fault:
    status: int | None = None  # None: answer normally (after the delay)
    body: str = ""
    retry_after: str | None = None
    delay_s: float = 0.0
    stream_error_after: int | None = None  # a stream sends this many chunks, then an error event


_Fake = TypeVar("_Fake", bound="FakeOpenAIServer")


class FakeOpenAIServer(LoopbackServer):
    """The server; a context manager that starts it on a free port and stops it on exit."""

    thread_name = "fake-openai"
    listen_backlog = 128  # the default 5 makes bursts of parallel test requests wait a second

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        default_reply: Reply = "This is a fake reply.",
        embedding_dimension: int = 128,
        report_usage: bool = True,
        api_key: str | None = None,
        stream_chunk_delay_s: float = 0.0,
    ) -> None:
        super().__init__(host, port)
        self.default_reply = default_reply
        self.embedding_dimension = embedding_dimension
        self.report_usage = report_usage  # False: replies carry no `usage`, as some servers do
        self.api_key = api_key  # when set, requests without `Bearer <api_key>` get 401
        self.stream_chunk_delay_s = stream_chunk_delay_s  # a pause before each streamed chunk, as a model types
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self._queued: deque[Reply] = deque()
        self._call_numbers = itertools.count(1)
        self._faults: deque[_Fault] = deque()
        self._overrides: dict[str, JsonHandler] = {}
        self._requests: list[RecordedRequest] = []

    def start(self: _Fake) -> _Fake:
        # Answers count tokens, and the first count loads tiktoken's table (about a quarter of a
        # second). Loaded lazily, that cost fell on the first request the server answered and
        # could exceed a test client's short timeout: load it before serving anything.
        offline_encoding()
        return super().start()

    @property
    def root_url(self) -> str:
        return self.url

    @property
    def base_url(self) -> str:
        """The OpenAI-style API base, `http://127.0.0.1:PORT/v1`."""
        return f"{self.root_url}/v1"

    # -- scripting -------------------------------------------------------------------------

    def add_rule(
        self, pattern: str | re.Pattern[str], reply: Reply, *, target: Literal["last_user", "prompt"] = "last_user"
    ) -> None:
        """Answer chats whose last user message (or, with target="prompt", all messages joined by
        newlines) contains `pattern` (a substring, or a compiled regex searched for) with `reply`:
        a string, a `FakeToolCalls`, or a callable given the request JSON that returns either. The
        first matching rule wins; adding a rule with an existing pattern replaces that rule in place."""
        rule = _Rule(pattern, reply, target)
        with self._lock:
            for position, existing in enumerate(self._rules):
                if existing.pattern == pattern:
                    self._rules[position] = rule
                    return
            self._rules.append(rule)

    def queue_replies(self, *replies: Reply) -> None:
        """Answer the next chat requests with these replies, one each, in order, before any rule:
        a script of steps (an agent's tool calls, then its answer). Every chat request takes one,
        whatever it asks; a request that fails by an injected fault takes none."""
        with self._lock:
            self._queued.extend(replies)

    @property
    def queued_reply_count(self) -> int:
        """How many queued replies are still to be answered."""
        with self._lock:
            return len(self._queued)

    def clear_queued_replies(self) -> None:
        with self._lock:
            self._queued.clear()

    def remove_rule(self, pattern: str | re.Pattern[str]) -> None:
        with self._lock:
            self._rules = [rule for rule in self._rules if rule.pattern != pattern]

    def clear_rules(self) -> None:
        with self._lock:
            self._rules.clear()

    def fail_next(self, count: int = 1, status: int = 500, body: str | None = None, retry_after: float | None = None) -> None:
        """The next `count` requests get `status` (with `Retry-After` when given) instead of an answer."""
        text = body if body is not None else json.dumps(error_body(status, f"injected failure {status}"))
        header = None if retry_after is None else f"{retry_after:g}"
        self._queue(count, _Fault(status=status, body=text, retry_after=header))

    def malformed_next(self, count: int = 1, body: str = '{"id": "broken", "choices": [') -> None:
        """The next `count` requests get HTTP 200 with `body`, which is not valid JSON by default."""
        self._queue(count, _Fault(status=200, body=body))

    def delay_next(self, count: int = 1, seconds: float = 1.0) -> None:
        """The next `count` requests are answered normally, but only after `seconds`."""
        self._queue(count, _Fault(delay_s=seconds))

    def break_stream_next(self, count: int = 1, after_chunks: int = 2, message: str = "injected stream failure") -> None:
        """The next `count` streamed chats send `after_chunks` chunks, then `data: {"error": ...}` (as
        servers do when generation fails midway), and end. The fault waits for a streamed request."""
        self._queue(count, _Fault(body=message, stream_error_after=after_chunks))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def override(self, path: str, handler: JsonHandler | None) -> None:
        """Answer POSTs to `path` (e.g. "/v1/embeddings") with `handler(request_json)`; None restores it."""
        with self._lock:
            if handler is None:
                self._overrides.pop(path, None)
            else:
                self._overrides[path] = handler

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every request so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def _queue(self, count: int, fault: _Fault) -> None:
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        with self._lock:
            self._faults.extend([fault] * count)

    # -- answering (called from handler threads) -------------------------------------------

    def _take_fault(self, streaming: bool) -> _Fault | None:
        with self._lock:
            if not self._faults or (self._faults[0].stream_error_after is not None and not streaming):
                return None  # a stream fault waits for a streamed chat
            return self._faults.popleft()

    def _record(self, record: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(record)

    def _answer(self, path: str, body: Any) -> Answer:
        with self._lock:
            override = self._overrides.get(path)
        if override is not None:
            return Answer(200, override(body))
        routes: dict[str, Callable[[dict[str, Any]], Answer]] = {
            "/v1/chat/completions": self._chat,
            "/v1/embeddings": lambda body: embeddings_answer(body, self.embedding_dimension, self.report_usage),
            "/v1/rerank": lambda body: rerank_answer(body, self.report_usage),
            DASHSCOPE_RERANK_PATH: dashscope_rerank_answer,
        }
        route = routes.get(path)
        if route is None:
            return Answer(404, error_body(404, f"no route {path}; known: {', '.join(sorted(routes))}"))
        if not isinstance(body, dict):
            return Answer(400, error_body(400, "expected a JSON object body"))
        return route(body)

    def _chat(self, body: dict[str, Any]) -> Answer:
        if not isinstance(body.get("messages"), list) or "model" not in body:
            return Answer(400, error_body(400, "expected `model` and a `messages` list"))
        reply = self._reply_for(body)
        if not isinstance(reply, str | FakeToolCalls):
            got = type(reply).__name__
            return Answer(500, error_body(500, f"the fake's reply callable returned {got}, not a str or FakeToolCalls"))
        with self._lock:
            call_ids = [f"call_{next(self._call_numbers)}" for _ in reply.calls] if isinstance(reply, FakeToolCalls) else []
        return chat_answer(body, reply, self.report_usage, call_ids)

    def _reply_for(self, body: dict[str, Any]) -> str | FakeToolCalls:
        messages = [message for message in body.get("messages", []) if isinstance(message, dict)]
        users = [message_text(message) for message in messages if message.get("role") == "user"]
        last_user = users[-1] if users else ""
        prompt = "\n".join(message_text(message) for message in messages)
        with self._lock:
            queued = self._queued.popleft() if self._queued else None
            rules = list(self._rules)
            default = self.default_reply
        reply = queued if queued is not None else next((rule.reply for rule in rules if rule.matches(last_user, prompt)), default)
        return reply(body) if callable(reply) else reply


class _Handler(LoopbackHandler):
    server_version = "FakeOpenAI/1.0"

    @property
    def fake(self) -> FakeOpenAIServer:
        owner = self.owner
        if not isinstance(owner, FakeOpenAIServer):
            raise RuntimeError("_Handler serves only a FakeOpenAIServer")
        return owner

    def do_GET(self) -> None:  # the name http.server dispatches to
        self._serve("GET", None)

    def do_POST(self) -> None:  # the name http.server dispatches to
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", errors="replace")
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw
        self._serve("POST", body)

    def _serve(self, method: str, body: Any) -> None:
        fake = self.fake
        path = self.path.split("?", 1)[0]
        fault = fake._take_fault(streaming=isinstance(body, dict) and bool(body.get("stream")))
        if fault is not None and fault.delay_s:
            fake._stopping.wait(fault.delay_s)
        if fault is not None and fault.status is not None:
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            answer = Answer(fault.status, raw=fault.body, headers=headers)
        elif not self._authorized(fake.api_key):
            answer = Answer(401, error_body(401, "invalid or missing API key"))
        elif method == "GET":
            answer = models_answer() if path == "/v1/models" else Answer(404, error_body(404, f"no route GET {path}"))
        else:
            answer = fake._answer(path, body)
        if fault is not None and fault.stream_error_after is not None and answer.events is not None:
            error_event = error_body(500, fault.body)
            answer.events = itertools.chain(itertools.islice(answer.events, fault.stream_error_after), [error_event])
            answer.done_marker = False
        fake._record(self._record_of(method, path, body, answer))
        self._send(answer)

    def _authorized(self, api_key: str | None) -> bool:
        return api_key is None or self.headers.get("Authorization") == f"Bearer {api_key}"

    def _record_of(self, method: str, path: str, body: Any, answer: Answer) -> RecordedRequest:
        authorization = self.headers.get("Authorization")
        headers = {name: value for name, value in self.headers.items() if name.lower() != "authorization"}
        return RecordedRequest(
            method=method, path=path, body=body, headers=headers,
            api_key_suffix=authorization.split()[-1][-4:] if authorization else None,
            status=answer.status, reply=answer.reply, tool_calls=answer.tool_calls,
            prompt_tokens=answer.prompt_tokens, completion_tokens=answer.completion_tokens,
        )  # fmt: skip

    def _send(self, answer: Answer) -> None:
        try:
            if answer.events is not None:
                self.send_response(answer.status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                for event in answer.events:
                    if self.fake.stream_chunk_delay_s:
                        self.fake._stopping.wait(self.fake.stream_chunk_delay_s)
                    self.wfile.write(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
                    self.wfile.flush()
                if answer.done_marker:
                    self.wfile.write(b"data: [DONE]\n\n")
                return
            text = answer.raw if answer.raw is not None else json.dumps(answer.payload, ensure_ascii=False)
            data = text.encode("utf-8")
            self.send_response(answer.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. its timeout fired during a delay fault)


FakeOpenAIServer.handler_class = _Handler  # defined after the server, which its type hints name


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a fake OpenAI-compatible API on this machine.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--reply", default="This is a fake reply.", help="the default chat reply")
    args = parser.parse_args(argv)
    server = FakeOpenAIServer(args.host, args.port, default_reply=args.reply)
    serve_until_interrupted(server, "fake OpenAI-compatible API at {server.base_url} (Ctrl-C to stop)")


if __name__ == "__main__":
    main()
