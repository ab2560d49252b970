"""What the fake OpenAI-compatible server answers: deterministic vectors, overlap scores, reply bodies.

Pure functions of the request JSON; the server (`fake_openai.py`) adds rules, faults and records.
A chat reply is a text, or a `FakeToolCalls` (functions the fake model calls, OpenAI "tools").
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memoryscope.models.token_count import count_tokens

__all__ = ["Answer", "FakeToolCalls", "words", "embedding_vector", "overlap_score", "message_text", "error_body",
           "chat_answer", "embeddings_answer", "rerank_answer", "dashscope_rerank_answer", "models_answer"]  # fmt: skip

_WORD = re.compile(r"[0-9a-z]+|[\u3400-\u9fff\uf900-\ufaff]", re.IGNORECASE)
FAKE_MODELS = ("fake-chat", "fake-embedding", "fake-rerank")


@dataclass
class Answer:
    status: int
    payload: Any = None  # JSON-ready; ignored when `raw` is set
    raw: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    events: Iterator[dict[str, Any]] | None = None  # server-sent events instead of one body
    done_marker: bool = True  # end the events with `data: [DONE]`
    reply: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()  # the reply's calls as sent, when it called functions
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class FakeToolCalls:
    """A chat reply that calls functions, in order: `FakeToolCalls((("send_message", {"message": "hi"}),))`.

    Each call is `(name, arguments)`: a mapping, sent JSON-encoded, or a string, sent as it is (so a
    test can send malformed JSON). `content` is the text sent beside the calls (null on the wire
    when empty). The server gives the calls ids `call_<n>`, counted over its lifetime."""

    calls: Sequence[tuple[str, Mapping[str, Any] | str]]
    content: str = ""

    def __post_init__(self) -> None:
        calls = tuple(tuple(call) for call in self.calls)  # lists are welcome; kept as tuples
        if not calls:
            raise ValueError("FakeToolCalls needs at least one call; a reply that calls nothing is a str")
        for position, call in enumerate(calls):
            if len(call) != 2 or not isinstance(call[0], str) or not call[0] or not isinstance(call[1], Mapping | str):
                raise ValueError(f"calls[{position}] must be (name, arguments as a mapping or a str), got {call!r}")
        if not isinstance(self.content, str):
            raise ValueError(f"content must be a str, got {type(self.content).__name__}")
        object.__setattr__(self, "calls", calls)

    def wire(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The calls as OpenAI sends them in `message.tool_calls`, with these ids."""
        wire = []
        for call_id, (name, arguments) in zip(ids, self.calls, strict=True):
            text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments), ensure_ascii=False)
            wire.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": text}})
        return wire


def words(text: str) -> list[str]:
    """Lower-cased Latin words and single CJK characters: what the fake embeds and reranks on."""
    return [word.lower() for word in _WORD.findall(text)]


def _features(text: str) -> Iterator[tuple[str, float]]:
    tokens = words(text)
    for token in tokens:
        yield token, 1.0
        padded = f"#{token}#"
        for start in range(len(padded) - 2):  # character trigrams: "guitars" stays near "guitar"
            yield padded[start : start + 3], 0.5
    for left, right in itertools.pairwise(tokens):
        yield left + " " + right, 0.5


def embedding_vector(text: str, dimension: int = 128) -> list[float]:
    """A deterministic unit vector for `text`: signed feature hashing, stable across processes."""
    vector = np.zeros(dimension, dtype=np.float64)
    for feature, weight in _features(text):
        number = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
        vector[number % dimension] += weight if (number >> 63) & 1 else -weight
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:  # no words at all: a fixed unit vector rather than zeros
        vector[0], norm = 1.0, 1.0
    return [round(float(value), 6) for value in vector / norm]


def overlap_score(query: str, document: str) -> float:
    """The share of the query's distinct words that occur in the document."""
    query_words = set(words(query))
    if not query_words:
        return 0.0
    return round(len(query_words & set(words(document))) / len(query_words), 6)


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "fake_error", "code": status}}


def chat_answer(body: dict[str, Any], reply: str | FakeToolCalls, report_usage: bool, call_ids: Sequence[str] = ()) -> Answer:
    """A chat completion for `reply`, as one JSON body or, with `stream: true`, as SSE chunks.
    A `FakeToolCalls` reply needs one id per call in `call_ids`."""
    text = reply.content if isinstance(reply, FakeToolCalls) else reply
    calls = reply.wire(call_ids) if isinstance(reply, FakeToolCalls) else []
    prompt_tokens = sum(count_tokens(message_text(m)) for m in body["messages"] if isinstance(m, dict))
    completion_tokens = count_tokens(text) + sum(count_tokens(_call_text(call)) for call in calls)
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}  # fmt: skip
    head = {"id": f"chatcmpl-fake-{time.monotonic_ns()}", "created": int(time.time()), "model": body["model"]}
    answer = Answer(200, reply=text, tool_calls=tuple(calls), prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    if body.get("stream"):
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        answer.events = _chunks(head, text, calls, usage if include_usage and report_usage else None)
        return answer
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:  # as OpenAI answers a call: content null unless the model also said something
        message.update(content=text or None, tool_calls=calls)
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop", "logprobs": None}
    answer.payload = {**head, "object": "chat.completion", "choices": [choice]}
    if report_usage:
        answer.payload["usage"] = usage
    return answer


def _call_text(call: dict[str, Any]) -> str:
    return f"{call['function']['name']} {call['function']['arguments']}"


def _chunks(
    head: dict[str, Any], text: str, calls: list[dict[str, Any]], usage: dict[str, int] | None
) -> Iterator[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {**head, "object": "chat.completion.chunk", "choices": [choice]}

    yield chunk({"role": "assistant", "content": None if calls and not text else ""})
    if text or not calls:
        for piece in re.findall(r"\s*\S+", text) or [text]:  # word by word, spaces kept
            yield chunk({"content": piece})
    for index, call in enumerate(calls):  # as OpenAI streams calls: id and name first, then the arguments in pieces
        function = call["function"]
        opening = {"index": index, "id": call["id"], "type": "function", "function": {"name": function["name"], "arguments": ""}}
        yield chunk({"tool_calls": [opening]})
        arguments = function["arguments"]
        for start in range(0, len(arguments), _ARGUMENT_PIECE):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[start : start + _ARGUMENT_PIECE]}}]})
    yield chunk({}, "tool_calls" if calls else "stop")
    if usage is not None:  # as OpenAI does: one last chunk with no choices and the usage
        yield {**head, "object": "chat.completion.chunk", "choices": [], "usage": usage}


_ARGUMENT_PIECE = 12  # characters of a call's arguments per streamed chunk


def embeddings_answer(body: dict[str, Any], dimension: int, report_usage: bool) -> Answer:
    texts = body.get("input")
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts) or "model" not in body:
        return Answer(400, error_body(400, "expected `model` and `input` as a string or a list of strings"))
    size = int(body.get("dimensions") or dimension)
    data = [{"object": "embedding", "index": i, "embedding": embedding_vector(t, size)} for i, t in enumerate(texts)]
    tokens = sum(count_tokens(text) for text in texts)
    payload: dict[str, Any] = {"object": "list", "data": data, "model": body["model"]}
    if report_usage:
        payload["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
    return Answer(200, payload, prompt_tokens=tokens)


def _ranked(query: Any, documents: Any, top_n: Any, return_documents: bool) -> tuple[list[dict[str, Any]], int] | None:
    if not isinstance(query, str) or not isinstance(documents, list):
        return None
    texts = [doc.get("text", "") if isinstance(doc, dict) else str(doc) for doc in documents]
    scored = sorted(((overlap_score(query, text), i) for i, text in enumerate(texts)), key=lambda pair: (-pair[0], pair[1]))
    results: list[dict[str, Any]] = []
    for score, index in scored[: int(top_n) if top_n else len(scored)]:
        result: dict[str, Any] = {"index": index, "relevance_score": score}
        if return_documents:
            result["document"] = {"text": texts[index]}
        results.append(result)
    return results, count_tokens(query) + sum(count_tokens(text) for text in texts)


def rerank_answer(body: dict[str, Any], report_usage: bool) -> Answer:
    """`/rerank` as Jina, SiliconFlow, Cohere and vLLM answer it: `results[{index, relevance_score}]`."""
    ranked = _ranked(body.get("query"), body.get("documents"), body.get("top_n"), bool(body.get("return_documents")))
    if ranked is None:
        return Answer(400, error_body(400, "expected `query` (string) and `documents` (list)"))
    results, tokens = ranked
    payload: dict[str, Any] = {"id": f"rerank-fake-{time.monotonic_ns()}", "results": results, "model": body.get("model")}
    if report_usage:
        payload["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
    return Answer(200, payload, prompt_tokens=tokens)


def dashscope_rerank_answer(body: dict[str, Any]) -> Answer:
    """DashScope's text-rerank: `{"input": {query, documents}, "parameters": {...}}` → `output.results`."""
    source = body.get("input")
    source = source if isinstance(source, dict) else {}
    options = body.get("parameters")
    options = options if isinstance(options, dict) else {}
    ranked = _ranked(source.get("query"), source.get("documents"), options.get("top_n"), bool(options.get("return_documents")))
    if ranked is None:
        return Answer(400, {"code": "InvalidParameter", "message": "expected input.query and input.documents"})
    results, tokens = ranked
    payload = {"output": {"results": results}, "usage": {"total_tokens": tokens}, "request_id": "fake"}
    return Answer(200, payload, prompt_tokens=tokens)


def models_answer() -> Answer:
    models = [{"id": name, "object": "model", "owned_by": "memoryscope-fake"} for name in FAKE_MODELS]
    return Answer(200, {"object": "list", "data": models})
