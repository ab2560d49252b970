"""What the fake OpenAI-compatible server answers: deterministic vectors, overlap scores, reply bodies.

Pure functions of the request JSON; the server (`fake_openai.py`) adds rules, faults and records.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memoryscope.models.token_count import count_tokens

__all__ = ["Answer", "words", "embedding_vector", "overlap_score", "message_text", "error_body",
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
    prompt_tokens: int = 0
    completion_tokens: int = 0


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


def chat_answer(body: dict[str, Any], reply: str, report_usage: bool) -> Answer:
    """A chat completion for `reply`, as one JSON body or, with `stream: true`, as SSE chunks."""
    prompt_tokens = sum(count_tokens(message_text(m)) for m in body["messages"] if isinstance(m, dict))
    completion_tokens = count_tokens(reply)
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}  # fmt: skip
    head = {"id": f"chatcmpl-fake-{time.monotonic_ns()}", "created": int(time.time()), "model": body["model"]}
    answer = Answer(200, reply=reply, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    if body.get("stream"):
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        answer.events = _chunks(head, reply, usage if include_usage and report_usage else None)
        return answer
    choice = {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop", "logprobs": None}
    answer.payload = {**head, "object": "chat.completion", "choices": [choice]}
    if report_usage:
        answer.payload["usage"] = usage
    return answer


def _chunks(head: dict[str, Any], reply: str, usage: dict[str, int] | None) -> Iterator[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {**head, "object": "chat.completion.chunk", "choices": [choice]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in re.findall(r"\s*\S+", reply) or [reply]:  # word by word, spaces kept
        yield chunk({"content": piece})
    yield chunk({}, "stop")
    if usage is not None:  # as OpenAI does: one last chunk with no choices and the usage
        yield {**head, "object": "chat.completion.chunk", "choices": [], "usage": usage}


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
