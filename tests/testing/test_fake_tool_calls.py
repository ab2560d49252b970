"""The fake OpenAI-compatible server's function calling: tool-call replies, streamed and not, and queued replies."""

from __future__ import annotations

import json
import threading
from typing import Any

import openai
import pytest
import requests
from openai.types.chat import ChatCompletionMessageFunctionToolCall

from memoryscope.models.token_count import count_tokens
from memoryscope.testing.fake_openai import FakeOpenAIServer, FakeToolCalls

TOOLS: list[Any] = [  # Any: the openai SDK types its schemas as TypedDicts
    {
        "type": "function",
        "function": {
            "name": "send_message",
            "description": "Send a message to the user.",
            "parameters": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
        },
    }
]


def chat(server: FakeOpenAIServer, user: str = "hello", **extra: Any) -> dict[str, Any]:
    body = {"model": "m", "messages": [{"role": "user", "content": user}], "tools": TOOLS, **extra}
    response = requests.post(f"{server.base_url}/chat/completions", json=body, timeout=5)
    assert response.status_code == 200, response.text
    return dict(response.json())


def client(server: FakeOpenAIServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)


def test_a_tool_call_reply_is_an_openai_completion(server: FakeOpenAIServer) -> None:
    server.default_reply = FakeToolCalls([("send_message", {"message": "héllo"}), ("send_message", '{"broken": ')])
    choice = chat(server)["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["role"] == "assistant" and message["content"] is None
    first, second = message["tool_calls"]
    assert first["type"] == second["type"] == "function"
    assert first["function"] == {"name": "send_message", "arguments": '{"message": "héllo"}'}
    assert second["function"]["arguments"] == '{"broken": '  # a string goes as it is
    assert [first["id"], second["id"]] == ["call_1", "call_2"]
    assert [call["id"] for call in chat(server)["choices"][0]["message"]["tool_calls"]] == ["call_3", "call_4"]


def test_content_beside_the_calls_and_usage(server: FakeOpenAIServer) -> None:
    server.default_reply = FakeToolCalls([("send_message", {"message": "hi"})], content="Let me say hi.")
    body = chat(server)
    assert body["choices"][0]["message"]["content"] == "Let me say hi."
    expected = count_tokens("Let me say hi.") + count_tokens('send_message {"message": "hi"}')
    assert body["usage"]["completion_tokens"] == expected


def test_the_request_records_the_tools_and_the_calls(server: FakeOpenAIServer) -> None:
    server.queue_replies(FakeToolCalls([("send_message", {"message": "hi"})]))
    chat(server)
    (record,) = server.requests
    assert record.body["tools"] == TOOLS
    assert record.reply == ""
    assert record.tool_calls == (
        {"id": "call_1", "type": "function", "function": {"name": "send_message", "arguments": '{"message": "hi"}'}},
    )


def test_the_openai_sdk_parses_a_tool_call_completion(server: FakeOpenAIServer) -> None:
    server.queue_replies(FakeToolCalls([("send_message", {"message": "hi"})]))
    completion = client(server).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], tools=TOOLS)
    (call,) = completion.choices[0].message.tool_calls or []
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert (call.id, call.function.name, call.function.arguments) == ("call_1", "send_message", '{"message": "hi"}')


def accumulate(server: FakeOpenAIServer, include_usage: bool = False) -> tuple[str, list[dict[str, str]], list[str], int]:
    """Stream a chat through the openai SDK, gluing the deltas as its docs show: (text, calls, finish reasons, chunks)."""
    stream = client(server).chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "x"}],
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": include_usage},
    )
    text, count = "", 0
    calls: list[dict[str, str]] = []
    finishes: list[str] = []
    for chunk in stream:
        count += 1
        for choice in chunk.choices:
            finishes += [choice.finish_reason] if choice.finish_reason else []
            text += choice.delta.content or ""
            for delta in choice.delta.tool_calls or []:
                if delta.index == len(calls):
                    calls.append({"id": "", "name": "", "arguments": ""})
                call = calls[delta.index]
                call["id"] += delta.id or ""
                if delta.function is not None:
                    call["name"] += delta.function.name or ""
                    call["arguments"] += delta.function.arguments or ""
    return text, calls, finishes, count


def test_a_streamed_tool_call_reply_parses_with_the_openai_sdk(server: FakeOpenAIServer) -> None:
    long_message = "a message long enough to arrive in several argument chunks"
    server.queue_replies(FakeToolCalls([("send_message", {"message": long_message}), ("send_message", "{bad")], content="On it."))
    text, calls, finishes, chunks = accumulate(server)
    assert text == "On it."
    assert calls == [
        {"id": "call_1", "name": "send_message", "arguments": json.dumps({"message": long_message})},
        {"id": "call_2", "name": "send_message", "arguments": "{bad"},
    ]
    assert finishes == ["tool_calls"]
    assert chunks > 8  # the arguments came in pieces


def test_a_streamed_call_without_content_and_with_usage(server: FakeOpenAIServer) -> None:
    server.queue_replies(FakeToolCalls([("send_message", {})]))
    text, calls, finishes, _ = accumulate(server, include_usage=True)
    assert (text, calls, finishes) == ("", [{"id": "call_1", "name": "send_message", "arguments": "{}"}], ["tool_calls"])
    events = server.requests[-1]
    assert events.completion_tokens == count_tokens("send_message {}")


def test_queued_replies_come_in_order_before_rules(server: FakeOpenAIServer) -> None:
    server.add_rule("hello", "from the rule")
    server.queue_replies(
        "first", FakeToolCalls([("send_message", {"message": "second"})]), lambda body: f"third: {len(body['messages'])}"
    )
    assert server.queued_reply_count == 3
    assert chat(server)["choices"][0]["message"]["content"] == "first"
    assert chat(server)["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"message": "second"}'
    assert chat(server)["choices"][0]["message"]["content"] == "third: 1"
    assert server.queued_reply_count == 0
    assert chat(server)["choices"][0]["message"]["content"] == "from the rule"


def test_a_failed_request_takes_no_queued_reply(server: FakeOpenAIServer) -> None:
    server.queue_replies("the reply")
    server.fail_next(1, status=500)
    response = requests.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": []}, timeout=5)
    assert response.status_code == 500 and server.queued_reply_count == 1
    bad = requests.post(f"{server.base_url}/chat/completions", json={"model": "m"}, timeout=5)
    assert bad.status_code == 400 and server.queued_reply_count == 1
    assert chat(server)["choices"][0]["message"]["content"] == "the reply"


def test_clearing_the_queue(server: FakeOpenAIServer) -> None:
    server.queue_replies("a", "b")
    server.clear_queued_replies()
    assert server.queued_reply_count == 0
    assert chat(server)["choices"][0]["message"]["content"] == "This is a fake reply."


def test_a_rule_may_answer_with_calls_computed_from_the_request(server: FakeOpenAIServer) -> None:
    server.add_rule("remember", lambda body: FakeToolCalls([("send_message", {"message": body["messages"][-1]["content"]})]))
    message = chat(server, "remember this")["choices"][0]["message"]
    assert message["tool_calls"][0]["function"]["arguments"] == '{"message": "remember this"}'


def test_a_reply_callable_of_the_wrong_type_is_a_clear_500(server: FakeOpenAIServer) -> None:
    server.queue_replies(lambda body: 42)  # type: ignore[arg-type, return-value]  # the mistake under test
    response = requests.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": []}, timeout=5)
    assert response.status_code == 500 and "returned int, not a str or FakeToolCalls" in response.text


@pytest.mark.parametrize(
    ("calls", "message"),
    [([], "at least one call"), ([("", {})], r"calls\[0\] must be"), ([("f", 3)], r"calls\[0\] must be"), ([("f",)], "must be")],
)
def test_fake_tool_calls_are_checked(calls: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FakeToolCalls(calls)


def test_fake_tool_calls_keep_lists_as_tuples() -> None:
    reply = FakeToolCalls([["send_message", {"message": "hi"}]])  # type: ignore[list-item]  # lists are accepted too
    assert reply.calls == (("send_message", {"message": "hi"}),)


def test_a_stream_fault_breaks_a_streamed_call(server: FakeOpenAIServer) -> None:
    server.queue_replies(FakeToolCalls([("send_message", {"message": "hi"})]))
    server.break_stream_next(after_chunks=2)
    with pytest.raises(openai.APIError):
        accumulate(server)


def test_parallel_queued_replies_are_each_answered_once(server: FakeOpenAIServer) -> None:
    server.queue_replies(*[f"reply {n}" for n in range(8)])
    answers: list[str] = []

    def ask() -> None:
        answers.append(chat(server)["choices"][0]["message"]["content"])

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == sorted(f"reply {n}" for n in range(8))
