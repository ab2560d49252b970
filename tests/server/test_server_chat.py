"""The OpenAI-compatible chat of `memoryscope serve` (`/v1/chat/completions`, `/v1/models`),
through the official `openai` SDK and raw HTTP: a real uvicorn serving the default config on a
SQLite file, the fake OpenAI-compatible server as its LLM (what reached the LLM is read back
from `fake_openai.requests`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from memoryscope.models.token_count import count_tokens
from memoryscope.testing.fake_openai import FakeOpenAIServer, RecordedRequest
from memoryscope.testing.live_server import LiveServer
from tests.server.conftest import ScopeFactory, ServeFactory

pytestmark = pytest.mark.slow  # a real uvicorn; `-m "not slow"` leaves it out

CELLO = "ann plays the cello in the Hangzhou youth orchestra"
PERSONA_LINE = "a helpful assistant with long-term memory"  # in the default introduction the request's system message replaces
ONE_RETRY = {"model.generation_model.max_retries": 1, "model.generation_model.retry_backoff_s": 0}
ATTEMPTS = 2  # the first try and ONE_RETRY's retry


# -- helpers ----------------------------------------------------------------------------------


@pytest.fixture
def live(serve: ServeFactory, make_scope: ScopeFactory) -> LiveServer:
    """The default config served, its LLM the fake server, the model retrying once at once."""
    return serve(make_scope(**ONE_RETRY))


@pytest.fixture
def client(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=60) as http:
        yield http


@pytest.fixture
def sdk(live: LiveServer) -> Iterator[OpenAI]:
    """The official SDK pointed at the server (which asks for no key here)."""
    with OpenAI(base_url=f"{live.url}/v1", api_key="sk-not-checked", max_retries=0, timeout=60) as client:
        yield client


def remember(client: httpx.Client, user: str, *texts: str) -> list[str]:
    """Store `texts` as the user's memories (no LLM involved); their ids."""
    response = client.post(f"/v1/users/{user}/memories", json={"texts": list(texts)})
    assert response.status_code == 201, response.text
    return [record["id"] for record in response.json()["added"]]


def conversation(client: httpx.Client, user: str) -> list[tuple[str, str]]:
    """The user's stored conversation as (role, text), oldest first."""
    response = client.get(f"/v1/users/{user}/memories", params={"type": "conversation"})
    assert response.status_code == 200, response.text
    return [(record["role"], record["memory"]) for record in reversed(response.json()["memories"])]


def llm_chats(fake: FakeOpenAIServer) -> list[RecordedRequest]:
    return [request for request in fake.requests if request.path == "/v1/chat/completions"]


def sent_messages(request: RecordedRequest) -> list[tuple[str, str]]:
    return [(message["role"], message["content"]) for message in request.body["messages"]]


def ask(text: str, user: str | None = "ann", **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "memoryscope", "messages": [{"role": "user", "content": text}], **fields}
    if user is not None:
        body["user"] = user
    return body


def sse_events(response: httpx.Response) -> list[Any]:
    """The `data:` payloads of a server-sent event stream: parsed JSON, and "[DONE]" as it is."""
    assert response.headers["content-type"].startswith("text/event-stream")
    events: list[Any] = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
        else:
            assert line == "", f"not an SSE data line: {line!r}"
    return events


# -- models and a completion --------------------------------------------------------------------


def test_models_lists_the_served_model_id(sdk: OpenAI, client: httpx.Client) -> None:
    listed = sdk.models.list()
    assert [model.id for model in listed.data] == ["memoryscope"]
    raw = client.get("/v1/models").json()
    assert raw["object"] == "list" and [model["id"] for model in raw["data"]] == ["memoryscope"]


def test_a_completion_answers_from_the_llm_with_the_memories_in_its_prompt_only(
    sdk: OpenAI, client: httpx.Client, fake_openai: FakeOpenAIServer
) -> None:
    [cello_id] = remember(client, "ann", CELLO)
    fake_openai.add_rule("which instrument", "You play the cello.")

    completion = sdk.chat.completions.create(
        model="memoryscope", user="ann", messages=[{"role": "user", "content": "which instrument do I play?"}]
    )

    message = completion.choices[0].message
    assert (message.role, message.content) == ("assistant", "You play the cello.")
    assert completion.choices[0].finish_reason == "stop" and completion.model == "memoryscope"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    extension = (completion.model_extra or {})["memoryscope"]
    assert extension["user"] == "ann"
    assert any(CELLO in line for line in extension["memories"]) and cello_id in extension["memory_ids"]
    assert extension["timings"]["generation"] > 0

    system, *rest = sent_messages(llm_chats(fake_openai)[-1])
    assert system[0] == "system" and CELLO in system[1]  # the memory reached the LLM's prompt ...
    assert rest == [("user", "which instrument do I play?")]
    assert CELLO not in (message.content or "")  # ... and is not put into the reply
    assert conversation(client, "ann") == [("user", "which instrument do I play?"), ("assistant", "You play the cello.")]


def test_raw_http_names_the_user_by_header_and_keeps_users_apart(client: httpx.Client, fake_openai: FakeOpenAIServer) -> None:
    remember(client, "ann", CELLO)
    remember(client, "bob", "bob keeps bees on a rooftop in Lyon")

    headers = {"X-MemoryScope-User": "bob"}
    response = client.post("/v1/chat/completions", json=ask("what is my hobby?", user=None), headers=headers)

    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["object"] == "chat.completion" and answer["choices"][0]["message"]["content"] == "This is a fake reply."
    assert answer["memoryscope"]["user"] == "bob"
    assert any("bees" in line for line in answer["memoryscope"]["memories"])
    assert not any("cello" in line for line in answer["memoryscope"]["memories"])
    system_prompt = sent_messages(llm_chats(fake_openai)[-1])[0][1]
    assert "bees" in system_prompt and "cello" not in system_prompt
    assert conversation(client, "bob") == [("user", "what is my hobby?"), ("assistant", "This is a fake reply.")]
    assert ("user", "what is my hobby?") not in conversation(client, "ann")


def test_the_user_field_wins_over_the_header(client: httpx.Client) -> None:
    response = client.post("/v1/chat/completions", json=ask("hello", user="ann"), headers={"X-MemoryScope-User": "bob"})
    assert response.status_code == 200 and response.json()["memoryscope"]["user"] == "ann"


def test_a_request_naming_no_user_is_refused(sdk: OpenAI, client: httpx.Client, fake_openai: FakeOpenAIServer) -> None:
    response = client.post("/v1/chat/completions", json=ask("hello", user=None))
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "missing_user" and "X-MemoryScope-User" in error["message"]

    with pytest.raises(openai.UnprocessableEntityError) as raised:
        sdk.chat.completions.create(model="memoryscope", messages=[{"role": "user", "content": "hello"}])
    assert raised.value.code == "missing_user"
    assert llm_chats(fake_openai) == []  # refused before anything was asked


def test_earlier_messages_reach_the_llm_as_history(client: httpx.Client, fake_openai: FakeOpenAIServer) -> None:
    messages = [
        {"role": "user", "content": "I adopted a cat called Miso"},
        {"role": "assistant", "content": "Miso is a lovely name."},
        {"role": "tool", "content": "ignored tool output", "tool_call_id": "call_1"},
        {"role": "user", "content": "what is my cat called?"},
    ]
    response = client.post("/v1/chat/completions", json={"model": "any-name", "user": "ann", "messages": messages})

    assert response.status_code == 200, response.text
    sent = sent_messages(llm_chats(fake_openai)[-1])
    assert sent[0][0] == "system" and PERSONA_LINE in sent[0][1]  # no system message given: the default persona
    assert sent[1:] == [
        ("user", "I adopted a cat called Miso"),
        ("assistant", "Miso is a lovely name."),
        ("user", "what is my cat called?"),
    ]
    # only the last message is the turn: the history is the client's, stored already or not at all
    assert conversation(client, "ann") == [("user", "what is my cat called?"), ("assistant", "This is a fake reply.")]


def test_a_system_message_replaces_the_persona_and_keeps_the_memories(
    client: httpx.Client, fake_openai: FakeOpenAIServer
) -> None:
    remember(client, "ann", CELLO)
    messages = [
        {"role": "system", "content": "You are Captain Memo, a pirate who speaks in rhymes."},
        {"role": "user", "content": "what do I play?"},
    ]
    response = client.post("/v1/chat/completions", json={"model": "memoryscope", "user": "ann", "messages": messages})

    assert response.status_code == 200, response.text
    system_prompt = sent_messages(llm_chats(fake_openai)[-1])[0][1]
    assert system_prompt.startswith("You are Captain Memo, a pirate who speaks in rhymes.")
    assert PERSONA_LINE not in system_prompt
    assert CELLO in system_prompt


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi, how can I help?"}],
        [{"role": "system", "content": "be brief"}],
        [{"role": "user", "content": "   "}],
    ],
    ids=["assistant-last", "system-only", "blank-user"],
)
def test_the_last_message_must_be_a_users_with_text(
    client: httpx.Client, fake_openai: FakeOpenAIServer, messages: list[dict[str, str]]
) -> None:
    response = client.post("/v1/chat/completions", json={"model": "memoryscope", "user": "ann", "messages": messages})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"
    assert "last message must be the user's" in response.json()["error"]["message"]
    assert llm_chats(fake_openai) == []


# -- streaming ------------------------------------------------------------------------------------


def test_sdk_stream_gives_the_reply_in_chunks_then_usage_and_stores_the_turn(
    sdk: OpenAI, client: httpx.Client, fake_openai: FakeOpenAIServer
) -> None:
    [cello_id] = remember(client, "ann", CELLO)
    reply = "You play the cello, and you have played it for years."
    fake_openai.add_rule("what do I play", reply)

    chunks = list(
        sdk.chat.completions.create(
            model="memoryscope", user="ann", stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "what do I play?"}],
        )
    )  # fmt: skip

    first, last = chunks[0], chunks[-1]
    assert first.choices[0].delta.role == "assistant"
    extension = (first.model_extra or {})["memoryscope"]
    assert extension["user"] == "ann" and cello_id in extension["memory_ids"]
    assert any(CELLO in line for line in extension["memories"])
    contents = [chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices]
    assert len([piece for piece in contents if piece]) > 1  # it came in pieces
    assert "".join(contents) == reply
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "stop"
    assert last.choices == [] and last.usage is not None  # include_usage: a last chunk with the usage only
    assert last.usage.prompt_tokens > 0 and last.usage.completion_tokens > 0
    sent = llm_chats(fake_openai)[-1].body  # the model's own count of the prompt as sent (memories included)
    assert last.usage.prompt_tokens == sum(count_tokens(str(message.get("content") or "")) for message in sent["messages"])
    assert all(chunk.usage is None for chunk in chunks[:-1])
    assert len({chunk.id for chunk in chunks}) == 1
    assert CELLO in sent_messages(llm_chats(fake_openai)[-1])[0][1]
    assert conversation(client, "ann") == [("user", "what do I play?"), ("assistant", reply)]


def test_raw_stream_is_server_sent_events_ending_in_done(client: httpx.Client, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.add_rule("tell me", "Once upon a time there was a cello.")
    with client.stream("POST", "/v1/chat/completions", json=ask("tell me a story", stream=True)) as response:
        assert response.status_code == 200
        events = sse_events(response)

    assert events[-1] == "[DONE]" and events.count("[DONE]") == 1
    chunks = events[:-1]
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[0]["memoryscope"]["user"] == "ann"
    assert "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in chunks) == "Once upon a time there was a cello."
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert not any("usage" in chunk for chunk in chunks)  # not asked for
    assert conversation(client, "ann")[-1] == ("assistant", "Once upon a time there was a cello.")


# -- failures -------------------------------------------------------------------------------------


def test_a_stream_whose_llm_fails_before_its_first_piece_is_an_http_error(
    sdk: OpenAI, client: httpx.Client, fake_openai: FakeOpenAIServer
) -> None:
    """As OpenAI answers: no 200 and no stream when nothing could be said, so proxies and SDK
    retries see the failure; the message is kept unanswered."""
    fake_openai.fail_next(ATTEMPTS, status=500)
    with client.stream("POST", "/v1/chat/completions", json=ask("is anyone there?", stream=True)) as response:
        response.read()
    assert response.status_code == 502 and response.headers["content-type"] == "application/json"
    assert response.json()["error"]["code"] == "model_error"
    assert conversation(client, "ann") == [("user", "is anyone there?")]

    fake_openai.fail_next(ATTEMPTS, status=500)
    with pytest.raises(openai.APIStatusError) as raised:
        sdk.chat.completions.create(
            model="memoryscope", user="ann", stream=True, messages=[{"role": "user", "content": "hello?"}]
        )
    assert raised.value.status_code == 502 and raised.value.code == "model_error"


def test_an_llm_that_keeps_failing_is_a_502_and_the_message_is_kept_unanswered(
    sdk: OpenAI, client: httpx.Client, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.fail_next(ATTEMPTS, status=500)
    response = client.post("/v1/chat/completions", json=ask("are you there?"))

    assert response.status_code == 502
    error = response.json()["error"]
    assert (error["code"], error["type"]) == ("model_error", "upstream_error")
    assert "gave up after 2 attempts" in error["message"]
    assert [request.status for request in llm_chats(fake_openai)] == [500] * ATTEMPTS
    assert conversation(client, "ann") == [("user", "are you there?")]  # said, not answered

    with pytest.raises(openai.APIStatusError) as raised:  # the SDK reads it as an OpenAI error
        fake_openai.fail_next(ATTEMPTS, status=500)
        sdk.chat.completions.create(model="memoryscope", user="ann", messages=[{"role": "user", "content": "hello?"}])
    assert raised.value.status_code == 502 and raised.value.code == "model_error"

    recovered = client.post("/v1/chat/completions", json=ask("and now?"))
    assert recovered.status_code == 200 and recovered.json()["choices"][0]["message"]["content"] == "This is a fake reply."


def test_a_stream_that_breaks_ends_with_an_error_event_and_the_server_goes_on(
    sdk: OpenAI, client: httpx.Client, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.break_stream_next(after_chunks=2)
    with client.stream("POST", "/v1/chat/completions", json=ask("tell me everything", stream=True)) as response:
        assert response.status_code == 200  # the status was sent before the model failed
        events = sse_events(response)

    assert "[DONE]" not in events
    *chunks, failure = events
    assert failure["error"]["code"] == "model_error" and "injected stream failure" in failure["error"]["message"]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in chunks)  # part of the reply came
    assert conversation(client, "ann") == [("user", "tell me everything")]  # unanswered: no partial reply kept

    fake_openai.break_stream_next(after_chunks=2)  # the fake's first chunk is the role alone
    stream = sdk.chat.completions.create(
        model="memoryscope", user="ann", stream=True, messages=[{"role": "user", "content": "once more"}]
    )
    with pytest.raises(openai.APIError, match="injected stream failure"):
        for _ in stream:
            pass

    after = client.post("/v1/chat/completions", json=ask("still there?"))
    assert after.status_code == 200 and after.json()["choices"][0]["message"]["content"] == "This is a fake reply."
    assert client.get("/healthz").json() == {"status": "ok"}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_without_an_llm_the_reply_lists_the_memories_found(
    serve: ServeFactory, make_scope: ScopeFactory, fake_openai: FakeOpenAIServer, stream: bool
) -> None:
    live = serve(make_scope(llm=False))
    with httpx.Client(base_url=live.url, timeout=60) as client:
        [cello_id] = remember(client, "ann", CELLO)
        if stream:
            with client.stream("POST", "/v1/chat/completions", json=ask("what do I play?", stream=True)) as response:
                assert response.status_code == 200
                events = sse_events(response)
            assert events[-1] == "[DONE]"
            extension = events[0]["memoryscope"]
            reply = "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in events[:-1])
        else:
            response = client.post("/v1/chat/completions", json=ask("what do I play?"))
            assert response.status_code == 200, response.text
            extension = response.json()["memoryscope"]
            reply = response.json()["choices"][0]["message"]["content"]
        assert CELLO in reply  # the memories found stand in for an answer
        assert cello_id in extension["memory_ids"]
        assert conversation(client, "ann") == [("user", "what do I play?")]  # no model reply to keep
    assert llm_chats(fake_openai) == []


# -- many users at once ---------------------------------------------------------------------------

HOBBIES = {
    "ann": "ann restores antique brass telescopes",
    "bob": "bob breeds racing pigeons in Lyon",
    "chen": "chen paints tiny watercolour lighthouses",
    "dara": "dara builds wooden sailing canoes",
    "emil": "emil collects vintage Soviet synthesizers",
}


def test_concurrent_chats_of_five_users_each_see_only_their_own_memories(
    live: LiveServer, client: httpx.Client, fake_openai: FakeOpenAIServer
) -> None:
    for user, hobby in HOBBIES.items():
        remember(client, user, hobby)
    fake_openai.add_rule("hobby", lambda body: f"Reply {len(body['messages'])}")
    requests = [(user, f"what is my hobby? (ask {round_})") for round_ in range(4) for user in HOBBIES]

    def chat(user_and_query: tuple[str, str]) -> tuple[str, int, dict[str, Any]]:
        user, query = user_and_query
        with httpx.Client(base_url=live.url, timeout=120) as own:
            response = own.post("/v1/chat/completions", json=ask(query, user=user))
        return user, response.status_code, response.json()

    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        answers = list(pool.map(chat, requests))

    assert [status for _, status, _ in answers] == [200] * 20
    owned = {user: {record["id"] for record in client.get(f"/v1/users/{user}/memories").json()["memories"]} for user in HOBBIES}
    for user, _, answer in answers:
        extension = answer["memoryscope"]
        assert extension["user"] == user
        assert set(extension["memory_ids"]) <= owned[user], f"{user} was given another user's memory"
        assert any(HOBBIES[user] in line for line in extension["memories"])
        others = [hobby for name, hobby in HOBBIES.items() if name != user]
        assert not any(hobby in line for line in extension["memories"] for hobby in others)
    prompts = [sent_messages(request)[0][1] for request in llm_chats(fake_openai)]
    assert len(prompts) == 20
    for prompt in prompts:  # each prompt the LLM saw holds one user's hobby, never two
        assert sum(hobby in prompt for hobby in HOBBIES.values()) == 1
    for user in HOBBIES:
        said = [text for role, text in conversation(client, user) if role == "user"]
        assert sorted(said) == sorted(query for name, query in requests if name == user)


def test_the_callers_generation_options_reach_the_model_and_usage_is_what_it_reported(
    sdk: OpenAI, fake_openai: FakeOpenAIServer
) -> None:
    """temperature, top_p, max_tokens, stop, seed and response_format go with the reply's call as
    given; `usage` is the model's own count for the request as sent (system prompt and memories
    included), and MemoryScope's embedding calls are counted apart."""
    said = [{"role": "user", "content": "I keep bees"}]
    assert sdk.chat.completions.create(model="memoryscope", user="ann", messages=said).choices[0].message.content
    completion = sdk.chat.completions.create(
        model="memoryscope", user="ann", messages=[{"role": "user", "content": "What do I keep?"}],
        temperature=0.2, top_p=0.9, max_tokens=64, stop=["\n\n"], seed=7, response_format={"type": "json_object"},
    )  # fmt: skip
    sent = llm_chats(fake_openai)[-1].body
    assert (sent["temperature"], sent["top_p"], sent["max_tokens"], sent["stop"], sent["seed"]) == (0.2, 0.9, 64, ["\n\n"], 7)
    assert sent["response_format"] == {"type": "json_object"}
    assert completion.usage is not None
    # what the model reported for the whole prompt it got (the fake counts it as cl100k tokens)
    as_sent = sum(count_tokens(str(message.get("content") or "")) for message in sent["messages"])
    assert completion.usage.prompt_tokens == as_sent > count_tokens("What do I keep?") + 20
    extension = completion.model_extra["memoryscope"]  # type: ignore[index]
    assert extension["usage"]["embedding"]["calls"] >= 1 and "generation" not in extension["usage"]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"n": 2}, "n=2"),
        ({"tool_choice": "required"}, "tool_choice"),  # no tools offered
        ({"functions": [{"name": "f", "parameters": {"type": "object"}}]}, "functions"),  # the deprecated form
        ({"logprobs": True}, "logprobs"),
        ({"modalities": ["text", "audio"]}, "modalities"),
    ],
)
def test_what_cannot_be_honoured_is_a_400_naming_it(client: httpx.Client, fields: dict[str, Any], named: str) -> None:
    response = client.post("/v1/chat/completions", json=ask("hello", **fields))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_parameter" and named in error["message"]
