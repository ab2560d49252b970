"""The fake OpenAI-compatible server, through plain HTTP: replies, rules, faults, records."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest
import requests

from memoryscope.models.token_count import count_tokens
from memoryscope.testing.fake_openai import DASHSCOPE_RERANK_PATH, FakeOpenAIServer


def chat(server: FakeOpenAIServer, user: str, system: str = "", **extra: Any) -> requests.Response:
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    return requests.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": messages, **extra}, timeout=5)


def reply_of(response: requests.Response) -> str:
    return str(response.json()["choices"][0]["message"]["content"])


def embed(server: FakeOpenAIServer, texts: list[str], **extra: Any) -> np.ndarray:
    response = requests.post(f"{server.base_url}/embeddings", json={"model": "e", "input": texts, **extra}, timeout=5)
    return np.array([item["embedding"] for item in response.json()["data"]])


def test_base_url_and_models(server: FakeOpenAIServer) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", server.base_url)
    listed = requests.get(f"{server.base_url}/models", timeout=5).json()
    assert listed["object"] == "list" and {"fake-chat", "fake-embedding"} <= {m["id"] for m in listed["data"]}


def test_chat_completion_shape_and_default_reply(server: FakeOpenAIServer) -> None:
    body = chat(server, "hello").json()
    assert body["object"] == "chat.completion" and body["model"] == "m"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "This is a fake reply."}
    assert body["usage"]["completion_tokens"] == count_tokens("This is a fake reply.")


def test_first_matching_rule_wins(server: FakeOpenAIServer) -> None:
    server.add_rule("guitar", "plays guitar")
    server.add_rule(re.compile(r"\bgui"), "regex")
    server.add_rule("tea", lambda request: f"echo {request['messages'][-1]['content']}")
    assert reply_of(chat(server, "I own a guitar")) == "plays guitar"
    assert reply_of(chat(server, "a guide")) == "regex"
    assert reply_of(chat(server, "green tea")) == "echo green tea"
    assert reply_of(chat(server, "nothing matches")) == "This is a fake reply."


def test_rules_match_the_last_user_message_unless_told_the_prompt(server: FakeOpenAIServer) -> None:
    server.add_rule("EXTRACT", "last-user only")
    server.add_rule("SYSTEM-ONLY", "whole prompt", target="prompt")
    assert reply_of(chat(server, "hi", system="EXTRACT facts")) == "This is a fake reply."
    assert reply_of(chat(server, "hi", system="SYSTEM-ONLY")) == "whole prompt"


def test_rules_can_be_replaced_removed_and_cleared(server: FakeOpenAIServer) -> None:
    server.add_rule("tea", "first")
    server.add_rule("tea", "second")
    assert reply_of(chat(server, "tea")) == "second"
    server.remove_rule("tea")
    assert reply_of(chat(server, "tea")) == "This is a fake reply."
    server.add_rule("tea", "again")
    server.clear_rules()
    server.default_reply = "new default"
    assert reply_of(chat(server, "tea")) == "new default"


def test_stream_is_server_sent_events(server: FakeOpenAIServer) -> None:
    server.add_rule("hi", "Hello there friend")
    response = chat(server, "hi", stream=True, stream_options={"include_usage": True})
    assert response.headers["Content-Type"] == "text/event-stream"
    events = [line for line in response.text.split("\n\n") if line]
    assert all(event.startswith("data: ") for event in events) and events[-1] == "data: [DONE]"
    chunks = [json.loads(event[len("data: ") :]) for event in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "Hello there friend"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == count_tokens("Hello there friend")
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    plain = chat(server, "hi", stream=True)
    assert '"usage"' not in plain.text


def test_embeddings_are_deterministic_unit_and_similarity_aware(server: FakeOpenAIServer) -> None:
    texts = ["the user plays the guitar", "the user plays guitars", "green tea in Kyoto", "the user plays the guitar"]
    vectors = embed(server, texts)
    assert vectors.shape == (4, 128)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(vectors[0], vectors[3])
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3
    assert embed(server, ["short"], dimensions=16).shape == (1, 16)


def test_rerank_scores_word_overlap_sorted_and_cut(server: FakeOpenAIServer) -> None:
    documents = ["user drinks tea", "user plays guitar", "user plays chess"]
    body = {"model": "r", "query": "plays guitar", "documents": documents, "top_n": 2, "return_documents": True}
    results = requests.post(f"{server.base_url}/rerank", json=body, timeout=5).json()["results"]
    assert results == [
        {"index": 1, "relevance_score": 1.0, "document": {"text": "user plays guitar"}},
        {"index": 2, "relevance_score": 0.5, "document": {"text": "user plays chess"}},
    ]


def test_dashscope_rerank_route(server: FakeOpenAIServer) -> None:
    body = {"model": "gte-rerank", "input": {"query": "tea", "documents": ["chess", "tea"]}, "parameters": {"top_n": 1}}
    reply = requests.post(server.root_url + DASHSCOPE_RERANK_PATH, json=body, timeout=5).json()
    assert reply["output"]["results"] == [{"index": 1, "relevance_score": 1.0}]


def test_faults_come_in_order_then_normal_answers(server: FakeOpenAIServer) -> None:
    server.fail_next(1, status=429, retry_after=2)
    server.fail_next(1, status=500, body="boom")
    server.malformed_next()
    first, second, third, fourth = (chat(server, "hi") for _ in range(4))
    assert (first.status_code, first.headers["Retry-After"]) == (429, "2")
    assert (second.status_code, second.text) == (500, "boom")
    assert third.status_code == 200 and third.text.startswith('{"id": "broken"')
    with pytest.raises(ValueError):
        third.json()
    assert reply_of(fourth) == "This is a fake reply."
    assert [r.status for r in server.requests] == [429, 500, 200, 200]


def test_break_stream_next_ends_a_stream_with_an_error_event(server: FakeOpenAIServer) -> None:
    server.add_rule("hi", "one two three four")
    server.break_stream_next(1, after_chunks=2, message="overloaded")
    assert reply_of(chat(server, "hi")) == "one two three four"  # not streamed: the fault waits
    events = [line for line in chat(server, "hi", stream=True).text.split("\n\n") if line]
    assert len(events) == 3 and json.loads(events[-1][len("data: ") :])["error"]["message"] == "overloaded"
    assert "[DONE]" in chat(server, "hi", stream=True).text


def test_delay_next_holds_the_answer(server: FakeOpenAIServer) -> None:
    server.delay_next(1, seconds=1.0)
    with pytest.raises(requests.Timeout):
        requests.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": []}, timeout=0.2)
    assert chat(server, "hi").status_code == 200


def test_bad_requests_and_unknown_paths(server: FakeOpenAIServer) -> None:
    assert requests.post(f"{server.base_url}/chat/completions", data="not json", timeout=5).status_code == 400
    assert requests.post(f"{server.base_url}/nowhere", json={}, timeout=5).status_code == 404
    assert requests.get(f"{server.base_url}/nowhere", timeout=5).status_code == 404


def test_override_replaces_an_endpoint(server: FakeOpenAIServer) -> None:
    server.override("/v1/embeddings", lambda body: {"custom": body["input"]})
    reply = requests.post(f"{server.base_url}/embeddings", json={"model": "e", "input": ["x"]}, timeout=5).json()
    assert reply == {"custom": ["x"]}
    server.override("/v1/embeddings", None)
    assert embed(server, ["x"]).shape == (1, 128)


def test_records_keep_the_body_and_tokens_but_never_the_key(server: FakeOpenAIServer) -> None:
    server.add_rule("hi", "hello you")
    headers = {"Authorization": "Bearer sk-very-secret-1234"}
    requests.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                  headers=headers, timeout=5)  # fmt: skip
    embed(server, ["one two", "three"])
    chat_record, embed_record = server.requests
    assert chat_record.body["messages"][0]["content"] == "hi" and chat_record.reply == "hello you"
    assert chat_record.api_key_suffix == "1234" and "sk-very-secret" not in repr(chat_record)
    assert "Authorization" not in chat_record.headers and chat_record.headers["Content-Type"] == "application/json"
    assert (chat_record.prompt_tokens, chat_record.completion_tokens) == (count_tokens("hi"), count_tokens("hello you"))
    assert embed_record.api_key_suffix is None and embed_record.prompt_tokens == count_tokens("one two") + count_tokens("three")
    server.clear_requests()
    assert server.requests == []


def test_required_api_key(server: FakeOpenAIServer) -> None:
    server.api_key = "right-key"
    assert chat(server, "hi").status_code == 401
    ok = requests.get(f"{server.base_url}/models", headers={"Authorization": "Bearer right-key"}, timeout=5)
    assert ok.status_code == 200


def test_concurrent_requests_are_all_answered_and_recorded(server: FakeOpenAIServer) -> None:
    server.add_rule(re.compile(r"n(\d+)"), lambda request: "reply " + request["messages"][-1]["content"])
    replies: dict[int, str] = {}

    def ask(number: int) -> None:
        replies[number] = reply_of(chat(server, f"n{number}"))

    threads = [threading.Thread(target=ask, args=(number,)) for number in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert replies == {number: f"reply n{number}" for number in range(16)}
    assert len(server.requests) == 16


def test_bad_fault_count_and_stopped_server() -> None:
    server = FakeOpenAIServer()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url
    with pytest.raises(ValueError, match="at least 1"):
        server.fail_next(0)


def test_command_line_serves_until_ctrl_c() -> None:
    command = [sys.executable, "-m", "memoryscope.testing.fake_openai", "--port", "0"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            url = re.search(r"http://127\.0\.0\.1:\d+/v1", line)
            assert url is not None, line
            assert requests.get(f"{url.group(0)}/models", timeout=5).status_code == 200
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=10)
    assert process.returncode == 0


def test_the_token_table_is_loaded_before_the_first_request_is_served() -> None:
    # the first token count loads tiktoken's table (a quarter of a second); loaded lazily, it fell on
    # the first answer and made a retry test's 0.2 s timeout fire when the test ran alone
    probe = (
        "from memoryscope.models.token_count import offline_encoding\n"
        "from memoryscope.testing.fake_openai import FakeOpenAIServer\n"
        "assert offline_encoding.cache_info().currsize == 0\n"
        "with FakeOpenAIServer():\n"
        "    print(offline_encoding.cache_info().currsize)\n"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert loaded.stdout.strip() == "1"
