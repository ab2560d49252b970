"""Function calling through the OpenAI-compatible chat (`tools`, `tool_choice`, tool results sent
back), with the official `openai` SDK and raw HTTP against a real uvicorn serving the default
config on SQLite, the fake OpenAI-compatible server as its LLM: what reached the LLM is read back
from `fake_openai.requests`, what was stored from the memories route."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai import OpenAI

from memoryscope.models.token_count import count_tokens
from memoryscope.testing.fake_openai import FakeOpenAIServer, FakeToolCalls
from memoryscope.testing.live_server import LiveServer
from tests.server.conftest import ScopeFactory, ServeFactory
from tests.server.test_server_chat import CELLO, ONE_RETRY, conversation, llm_chats, remember, sse_events

pytestmark = pytest.mark.slow  # a real uvicorn; `-m "not slow"` leaves it out

WEATHER: Any = {  # Any: the SDK takes it as its own typed dict
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city today.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CLOCK: Any = {"type": "function", "function": {"name": "local_time", "parameters": {"type": "object", "properties": {}}}}
QUESTION = "will it rain on my cello concert in Hangzhou?"
ANSWER = "It will be sunny in Hangzhou: bring the cello without a rain cover."


@pytest.fixture
def live(serve: ServeFactory, make_scope: ScopeFactory) -> LiveServer:
    return serve(make_scope(**ONE_RETRY))


@pytest.fixture
def client(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=60) as http:
        yield http


@pytest.fixture
def sdk(live: LiveServer) -> Iterator[OpenAI]:
    with OpenAI(base_url=f"{live.url}/v1", api_key="sk-not-checked", max_retries=0, timeout=60) as openai_client:
        yield openai_client


def results_for(calls: list[dict[str, Any]], *results: str) -> list[dict[str, Any]]:
    """The caller's next messages: the model's message with its calls, then one result per call."""
    assistant = {"role": "assistant", "content": None, "tool_calls": calls}
    return [
        assistant,
        *({"role": "tool", "tool_call_id": call["id"], "content": text} for call, text in zip(calls, results, strict=True)),
    ]


def test_a_tool_call_comes_back_as_openai_gives_it_and_stores_nothing(
    sdk: OpenAI, client: httpx.Client, fake_openai: FakeOpenAIServer
) -> None:
    remember(client, "ann", CELLO)
    fake_openai.queue_replies(FakeToolCalls([("get_weather", {"city": "Hangzhou"})]))

    completion = sdk.chat.completions.create(
        model="memoryscope", user="ann", messages=[{"role": "user", "content": QUESTION}],
        tools=[WEATHER, CLOCK], tool_choice={"type": "function", "function": {"name": "get_weather"}},
        parallel_tool_calls=False, temperature=0.3,
    )  # fmt: skip

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls or []
    [made] = llm_chats(fake_openai)[-1].tool_calls
    assert (call.id, call.type, call.function.name) == (made["id"], "function", "get_weather")
    assert json.loads(call.function.arguments) == {"city": "Hangzhou"}
    sent = llm_chats(fake_openai)[-1].body
    assert sent["tools"] == [WEATHER, CLOCK]  # as the caller gave them
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["parallel_tool_calls"] is False and sent["temperature"] == 0.3
    assert sent["messages"][0]["role"] == "system" and CELLO in sent["messages"][0]["content"]  # memories in the prompt
    assert sent["messages"][1:] == [{"role": "user", "content": QUESTION}]
    record = llm_chats(fake_openai)[-1]
    assert completion.usage is not None  # what the model reported for the request as sent
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (
        record.prompt_tokens,
        record.completion_tokens,
    )
    assert conversation(client, "ann") == []  # the turn is not over: nothing stored yet


def test_the_tool_results_reach_the_model_and_its_answer_stores_the_turn_once(
    sdk: OpenAI, client: httpx.Client, fake_openai: FakeOpenAIServer
) -> None:
    remember(client, "ann", CELLO)
    fake_openai.queue_replies(FakeToolCalls([("get_weather", {"city": "Hangzhou"}), ("local_time", {})], content="Checking."))
    asked = [{"role": "user", "content": QUESTION}]
    first = sdk.chat.completions.create(model="memoryscope", user="ann", messages=asked, tools=[WEATHER, CLOCK])
    calls = [call.model_dump(exclude_none=True) for call in first.choices[0].message.tool_calls or []]
    assert first.choices[0].message.content == "Checking." and len(calls) == 2
    assert conversation(client, "ann") == []

    fake_openai.queue_replies(ANSWER)
    final = sdk.chat.completions.create(
        model="memoryscope", user="ann", tools=[WEATHER, CLOCK],
        messages=[*asked, *results_for(calls, '{"sky": "sunny"}', "18:30")],
    )  # fmt: skip
    assert (final.choices[0].message.content, final.choices[0].finish_reason) == (ANSWER, "stop")
    assert final.choices[0].message.tool_calls is None
    sent = llm_chats(fake_openai)[-1].body["messages"]
    assert CELLO in sent[0]["content"]  # memories retrieved for the user's message again
    assert sent[1:] == [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "content": '{"sky": "sunny"}', "tool_call_id": calls[0]["id"]},
        {"role": "tool", "content": "18:30", "tool_call_id": calls[1]["id"]},
    ]
    # the turn: the user's message once and the final text; no call, no result, no "Checking."
    assert conversation(client, "ann") == [("user", QUESTION), ("assistant", ANSWER)]

    # the reply's message sent back whole, as the SDK gives it (its text beside its calls)
    said = first.choices[0].message.model_dump(exclude_none=True)
    again = [*asked, said, *results_for(calls, '{"sky": "sunny"}', "18:30")[1:]]
    fake_openai.queue_replies(ANSWER)
    assert (
        sdk.chat.completions.create(model="memoryscope", user="ann", tools=[WEATHER], messages=again).choices[0].message.content
        == ANSWER
    )
    assert llm_chats(fake_openai)[-1].body["messages"][2] == {"role": "assistant", "content": "Checking.", "tool_calls": calls}
    assert conversation(client, "ann") == [("user", QUESTION), ("assistant", ANSWER)] * 2  # asked again: a second turn


def test_streamed_tool_calls_come_as_delta_pieces_then_finish_tool_calls(
    sdk: OpenAI, client: httpx.Client, fake_openai: FakeOpenAIServer
) -> None:
    remember(client, "ann", CELLO)
    arguments = {"city": "Hangzhou, Zhejiang province, China"}  # long enough to come in several pieces
    fake_openai.queue_replies(FakeToolCalls([("get_weather", arguments), ("local_time", {})]))

    chunks = list(
        sdk.chat.completions.create(
            model="memoryscope", user="ann", stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": QUESTION}], tools=[WEATHER, CLOCK], tool_choice="required",
        )
    )  # fmt: skip

    pieces = [delta for chunk in chunks if chunk.choices for delta in chunk.choices[0].delta.tool_calls or []]
    assembled: dict[int, dict[str, str]] = {}
    for piece in pieces:  # as an SDK user assembles them: id and name once, the arguments appended
        call = assembled.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
        call["id"] += piece.id or ""
        call["name"] += (piece.function.name if piece.function else None) or ""
        call["arguments"] += (piece.function.arguments if piece.function else None) or ""
    made = llm_chats(fake_openai)[-1].tool_calls
    assert [assembled[index] for index in sorted(assembled)] == [
        {"id": call["id"], "name": call["function"]["name"], "arguments": call["function"]["arguments"]} for call in made
    ]
    assert len([piece for piece in pieces if piece.index == 0]) > 2  # the arguments came in pieces
    assert all(piece.type == "function" for piece in pieces if piece.id)
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "tool_calls"
    assert llm_chats(fake_openai)[-1].body["tool_choice"] == "required"
    record = llm_chats(fake_openai)[-1]
    usage = chunks[-1].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (
        record.prompt_tokens,
        record.completion_tokens,
    )
    assert conversation(client, "ann") == []


def test_a_model_reporting_no_usage_is_counted_with_the_tools_and_the_calls(sdk: OpenAI, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.report_usage = False
    fake_openai.queue_replies(FakeToolCalls([("get_weather", {"city": "Hangzhou"})]))

    completion = sdk.chat.completions.create(
        model="memoryscope", user="ann", messages=[{"role": "user", "content": QUESTION}], tools=[WEATHER]
    )

    sent = llm_chats(fake_openai)[-1].body
    assert completion.usage is not None
    as_sent = sum(count_tokens(message["content"]) for message in sent["messages"]) + count_tokens(json.dumps([WEATHER]))
    assert completion.usage.prompt_tokens == as_sent
    assert completion.usage.completion_tokens == count_tokens('\nget_weather {"city": "Hangzhou"}')


def test_a_streamed_answer_to_tool_results_is_text_and_stores_the_turn(
    client: httpx.Client, fake_openai: FakeOpenAIServer
) -> None:
    calls = [{"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Hangzhou"}'}}]
    fake_openai.queue_replies(ANSWER)
    body = {
        "model": "memoryscope", "user": "ann", "stream": True, "tools": [WEATHER],
        "messages": [{"role": "user", "content": QUESTION}, *results_for(calls, "sunny, 24 degrees")],
    }  # fmt: skip
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        events = sse_events(response)

    chunks = events[:-1]
    assert events[-1] == "[DONE]"
    assert "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks) == ANSWER
    assert not any("tool_calls" in chunk["choices"][0]["delta"] for chunk in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert llm_chats(fake_openai)[-1].body["messages"][-1] == {
        "role": "tool", "content": "sunny, 24 degrees", "tool_call_id": "call_w1"
    }  # fmt: skip
    assert conversation(client, "ann") == [("user", QUESTION), ("assistant", ANSWER)]


def test_an_earlier_exchange_in_the_history_reaches_the_model_with_tools_and_is_left_out_without(
    client: httpx.Client, fake_openai: FakeOpenAIServer
) -> None:
    calls = [{"id": "call_t1", "type": "function", "function": {"name": "local_time", "arguments": "{}"}}]
    earlier = [
        {"role": "user", "content": "what time is it?"},
        *results_for(calls, "18:30"),
        {"role": "assistant", "content": "It is half past six."},
        {"role": "user", "content": "thanks! and the weather?"},
    ]
    with_tools = client.post("/v1/chat/completions", json={"model": "m", "user": "ann", "messages": earlier, "tools": [WEATHER]})
    assert with_tools.status_code == 200, with_tools.text
    assert llm_chats(fake_openai)[-1].body["messages"][1:] == [
        {"role": "user", "content": "what time is it?"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "content": "18:30", "tool_call_id": "call_t1"},
        {"role": "assistant", "content": "It is half past six."},
        {"role": "user", "content": "thanks! and the weather?"},
    ]

    without = client.post("/v1/chat/completions", json={"model": "m", "user": "ann", "messages": earlier})
    assert without.status_code == 200, without.text
    assert "tools" not in llm_chats(fake_openai)[-1].body
    assert [(m["role"], m["content"]) for m in llm_chats(fake_openai)[-1].body["messages"][1:]] == [
        ("user", "what time is it?"),
        ("assistant", "It is half past six."),
        ("user", "thanks! and the weather?"),
    ]


@pytest.mark.parametrize(
    ("messages", "named"),
    [
        ([{"role": "user", "content": "hi"}, {"role": "tool", "content": "18:30"}], "tool_call_id"),
        ([{"role": "user", "content": "hi", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}], "only an assistant"),
        (
            [{"role": "user", "content": "hi"},
             {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f"}}]}],
            "last message must be the user's",
        ),  # calls with no results: nothing to answer
        (
            [{"role": "user", "content": "hi"},
             {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f"}}]},
             {"role": "tool", "tool_call_id": "c", "content": "ok"}, {"role": "assistant", "content": "done"}],
            "last message must be the user's",
        ),
    ],
    ids=["tool-without-call-id", "calls-on-a-user-message", "calls-without-results", "text-after-the-results"],
)  # fmt: skip
def test_malformed_exchanges_are_refused_naming_what_is_wrong(
    client: httpx.Client, fake_openai: FakeOpenAIServer, messages: list[dict[str, Any]], named: str
) -> None:
    response = client.post("/v1/chat/completions", json={"model": "m", "user": "ann", "messages": messages, "tools": [WEATHER]})
    assert response.status_code == 422, response.text
    assert named in response.json()["error"]["message"]
    assert llm_chats(fake_openai) == []


def test_a_tool_without_a_name_is_refused(client: httpx.Client, fake_openai: FakeOpenAIServer) -> None:
    tools = [{"type": "function", "function": {"parameters": {"type": "object"}}}]
    response = client.post(
        "/v1/chat/completions",
        json={"model": "m", "user": "ann", "messages": [{"role": "user", "content": "hi"}], "tools": tools},
    )
    assert response.status_code == 422 and "tools.0" in response.json()["error"]["message"]
    assert llm_chats(fake_openai) == []


def test_tools_for_a_model_that_cannot_call_functions_are_a_400_naming_them(
    serve: ServeFactory, make_scope: ScopeFactory, fake_openai: FakeOpenAIServer
) -> None:
    live = serve(make_scope(**{"model.generation_model.function_calling": False}))
    with httpx.Client(base_url=live.url, timeout=60) as http:
        body = {"model": "m", "user": "ann", "messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER]}
        response = http.post("/v1/chat/completions", json=body)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["code"] == "unsupported_parameter" and error["message"].startswith("tools:")
        assert llm_chats(fake_openai) == []
        del body["tools"]  # the same chat without tools is answered
        assert http.post("/v1/chat/completions", json=body).status_code == 200


def test_a_model_failing_on_a_tool_request_is_a_502_and_keeps_the_message_unanswered(
    client: httpx.Client, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.fail_next(2, status=500)  # the first try and ONE_RETRY's retry
    body = {"model": "m", "user": "ann", "messages": [{"role": "user", "content": QUESTION}], "tools": [WEATHER]}
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 502 and response.json()["error"]["code"] == "model_error"
    assert all(request.body.get("tools") == [WEATHER] for request in llm_chats(fake_openai))
    assert conversation(client, "ann") == [("user", QUESTION)]  # as a failed reply without tools keeps it
