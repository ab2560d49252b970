"""Function calling (OpenAI "tools") through the generation models, against the fake server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

import pytest

from memoryscope.errors import ModelError
from memoryscope.models.base import ChatMessage, GenerationModel, PresetGenerationModel, ToolCall, ToolReply
from memoryscope.models.generation import dashscope
from memoryscope.models.generation.dashscope import DashScopeGeneration
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.models.token_count import count_tokens
from memoryscope.testing.fake_openai import FakeOpenAIServer, FakeToolCalls

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_message",
            "description": "Send a message to the user.",
            "parameters": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "archival_memory_search",
            "description": "Search archival memory.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    },
]
MESSAGES = [{"role": "system", "content": "You are a helpful agent."}, {"role": "user", "content": "What do I play?"}]


def make_model(server: FakeOpenAIServer, fast_retry: dict[str, Any], **params: Any) -> OpenAILikeGeneration:
    values = {"model_name": "Qwen/Qwen2.5-7B-Instruct", "api_base": server.base_url, **fast_retry, **params}
    return OpenAILikeGeneration(OpenAILikeGeneration.Params(**values))


@pytest.fixture
def model(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> OpenAILikeGeneration:
    return make_model(server, fast_retry)


def test_a_tool_call_comes_back_parsed(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.queue_replies(FakeToolCalls([("archival_memory_search", {"query": "guitar"})]))
    reply = model.chat_with_tools(MESSAGES, TOOLS)
    (call,) = reply.tool_calls
    assert reply == ToolReply("", (ToolCall(call.id, "archival_memory_search", '{"query": "guitar"}'),))
    assert call.id == server.requests[-1].tool_calls[0]["id"] and call.id.startswith("call_")
    assert model.supports_tools


def test_several_calls_and_content_in_one_reply(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.queue_replies(
        FakeToolCalls([("archival_memory_search", {"query": "guitar"}), ("send_message", {"message": "Let me look."})], "Hmm.")
    )
    reply = model.chat_with_tools(MESSAGES, TOOLS)
    assert reply.content == "Hmm."
    assert [(call.name, json.loads(call.arguments)) for call in reply.tool_calls] == [
        ("archival_memory_search", {"query": "guitar"}),
        ("send_message", {"message": "Let me look."}),
    ]
    assert len({call.id for call in reply.tool_calls}) == 2


def test_malformed_arguments_are_given_as_sent(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.queue_replies(FakeToolCalls([("send_message", '{"message": "unterminated')]))
    (call,) = model.chat_with_tools(MESSAGES, TOOLS).tool_calls
    assert call.arguments == '{"message": "unterminated'  # the caller parses, and tells the model what was wrong


def test_no_tool_calls_is_an_empty_tuple(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.queue_replies("You play the guitar.")
    assert model.chat_with_tools(MESSAGES, TOOLS) == ToolReply("You play the guitar.", ())


def test_the_request_carries_the_tools_and_the_messages(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    model.chat_with_tools(MESSAGES, TOOLS, tool_choice="auto", temperature=0.5)
    body = server.requests[-1].body
    assert body["tools"] == TOOLS
    assert body["messages"] == MESSAGES
    assert (body["tool_choice"], body["temperature"], body["max_tokens"], body["stream"]) == ("auto", 0.5, 2000, False)


def test_a_second_step_sends_the_calls_and_their_results_in_openai_format(
    model: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.queue_replies(FakeToolCalls([("archival_memory_search", {"query": "guitar"})]), "You play the guitar.")
    first = model.chat_with_tools(MESSAGES, TOOLS)
    (call,) = first.tool_calls
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}],
    }
    result = {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": '{"results": ["plays the guitar"]}'}
    second = model.chat_with_tools([*MESSAGES, assistant, result], TOOLS)
    assert second == ToolReply("You play the guitar.", ())
    sent = server.requests[-1].body["messages"]
    assert sent[:2] == MESSAGES
    assert sent[2] == assistant
    # LlamaIndex writes a tool message's role, content and tool_call_id; OpenAI's tool messages need no `name`
    assert sent[3] == {"role": "tool", "content": result["content"], "tool_call_id": call.id}


def test_an_assistant_text_beside_its_calls_is_sent_back(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    call = {"id": "call_7", "type": "function", "function": {"name": "send_message", "arguments": "{}"}}
    history: list[dict[str, Any]] = [*MESSAGES, {"role": "assistant", "content": "Thinking.", "tool_calls": [call]}]
    history.append({"role": "tool", "tool_call_id": "call_7", "content": "ok"})
    model.chat_with_tools(history, TOOLS)
    assert server.requests[-1].body["messages"][2] == {"role": "assistant", "content": "Thinking.", "tool_calls": [call]}


def test_achat_with_tools(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.queue_replies(FakeToolCalls([("send_message", {"message": "hi"})]), "done")
    reply = asyncio.run(model.achat_with_tools(MESSAGES, TOOLS))
    assert [(call.name, call.arguments) for call in reply.tool_calls] == [("send_message", '{"message": "hi"}')]
    assert asyncio.run(model.achat_with_tools(MESSAGES, TOOLS)) == ToolReply("done", ())
    assert all(request.body["tools"] == TOOLS for request in server.requests)


def test_function_calling_false_refuses_clearly(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = make_model(server, fast_retry, function_calling=False)
    assert not model.supports_tools
    with pytest.raises(ModelError, match=r"openai_like model .* function calling is turned off .*function_calling: false"):
        model.chat_with_tools(MESSAGES, TOOLS)
    with pytest.raises(ModelError, match="function_calling: false"):
        asyncio.run(model.achat_with_tools(MESSAGES, TOOLS))
    assert server.requests == [] and model.usage.snapshot()["calls"] == 0
    assert model.chat([ChatMessage("user", "hello")]) == "This is a fake reply."  # plain chat is unaffected


def test_server_errors_are_retried(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.queue_replies(FakeToolCalls([("send_message", {"message": "a"})]), FakeToolCalls([("send_message", {"message": "b"})]))
    server.fail_next(2, status=500)
    assert model.chat_with_tools(MESSAGES, TOOLS).tool_calls[0].arguments == '{"message": "a"}'
    server.fail_next(1, status=429)
    assert asyncio.run(model.achat_with_tools(MESSAGES, TOOLS)).tool_calls[0].arguments == '{"message": "b"}'
    assert [request.status for request in server.requests] == [500, 500, 200, 429, 200]
    assert model.usage.snapshot()["calls"] == 2 and model.usage.snapshot()["errors"] == 0


def test_persistent_errors_name_the_model(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.fail_next(3, status=500)
    with pytest.raises(ModelError, match=r"openai_like model 'Qwen/Qwen2.5-7B-Instruct' at .*HTTP 500.*gave up after 3 attempts"):
        model.chat_with_tools(MESSAGES, TOOLS)
    assert model.usage.snapshot()["errors"] == 1


def test_usage_is_counted_as_the_server_reports_it(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.queue_replies(FakeToolCalls([("send_message", {"message": "You play the guitar."})]))
    model.chat_with_tools(MESSAGES, TOOLS)
    record = server.requests[-1]
    usage = model.usage.snapshot()
    assert usage["calls"] == 1 and usage["errors"] == 0 and usage["latency_s"] > 0
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (record.prompt_tokens, record.completion_tokens)
    assert record.completion_tokens > 0


def test_usage_estimate_counts_the_calls_and_the_tool_schemas(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.report_usage = False
    server.queue_replies(FakeToolCalls([("send_message", {"message": "You play the guitar."})]))
    model.chat_with_tools(MESSAGES, TOOLS)
    usage = model.usage.snapshot()
    contents = sum(count_tokens(str(message["content"])) for message in MESSAGES)
    assert usage["prompt_tokens"] >= contents + count_tokens(json.dumps(TOOLS))
    assert usage["completion_tokens"] >= count_tokens('send_message {"message": "You play the guitar."}')


def answer_with_calls(server: FakeOpenAIServer, calls: list[dict[str, Any]]) -> None:
    """Make the server answer every chat with these tool calls, as written (the fake's own are always well formed)."""
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    server.override(
        "/v1/chat/completions", lambda body: {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    )


def test_calls_without_an_id_get_one(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    answer_with_calls(server, [{"type": "function", "function": {"name": "send_message", "arguments": "{}"}}] * 2)
    ids = [call.id for call in model.chat_with_tools(MESSAGES, TOOLS).tool_calls]
    assert len(ids) == 2 and len(set(ids)) == 2 and all(call_id.startswith("call_") for call_id in ids)


def test_a_call_without_a_function_name_is_a_malformed_response(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    answer_with_calls(server, [{"id": "c", "type": "function", "function": {"arguments": "{}"}}])
    with pytest.raises(ModelError, match=r"malformed response.*without a function name"):
        model.chat_with_tools(MESSAGES, TOOLS)
    assert len(server.requests) == 1  # not retried


def test_no_tools_sends_no_tools_field(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    assert model.chat_with_tools(MESSAGES, []) == ToolReply("This is a fake reply.", ())
    assert "tools" not in server.requests[-1].body  # OpenAI refuses `tools: []`


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([{"role": "robot", "content": "beep"}], r"messages\[0\].role must be one of system, user, assistant, tool"),
        ([{"role": "tool", "content": "ok"}], r"messages\[0\]: a tool message needs the `tool_call_id`"),
        ([{"role": "user", "content": ["parts"]}], r"messages\[0\].content must be a string or None"),
        ([{"role": "assistant", "content": None, "tool_calls": [{"id": "x"}]}], r"messages\[0\].tool_calls\[0\] must be"),
        (["hello"], r"messages\[0\] must be a mapping"),
    ],
)
def test_bad_messages_are_refused_before_any_request(
    model: OpenAILikeGeneration, server: FakeOpenAIServer, messages: list[Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        model.chat_with_tools(messages, TOOLS)
    assert server.requests == []


def test_a_preset_model_forwards_tools_and_options(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    preset = PresetGenerationModel(model, {"temperature": 0.7, "top_p": 0.5})
    assert preset.supports_tools
    server.queue_replies(FakeToolCalls([("send_message", {"message": "hi"})]), "done")
    assert preset.chat_with_tools(MESSAGES, TOOLS, top_p=0.2).tool_calls[0].name == "send_message"
    assert asyncio.run(preset.achat_with_tools(MESSAGES, TOOLS)).content == "done"
    first, second = (request.body for request in server.requests)
    assert (first["temperature"], first["top_p"], second["top_p"]) == (0.7, 0.2, 0.5)
    assert model.usage.snapshot()["calls"] == 2
    assert not PresetGenerationModel(make_model(server, {}, function_calling=False), {}).supports_tools


def test_dashscope_calls_functions_in_the_compatible_mode_only(
    server: FakeOpenAIServer, fast_retry: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-dashscope-test-qwen")
    compatible = DashScopeGeneration(DashScopeGeneration.Params(api_base=server.base_url, **fast_retry))
    server.queue_replies(FakeToolCalls([("send_message", {"message": "hi"})]))
    assert compatible.supports_tools and compatible.chat_with_tools(MESSAGES, TOOLS).tool_calls[0].name == "send_message"
    monkeypatch.setattr(dashscope, "_native_llm", lambda params, key: object())  # the SDK extra is not installed here
    native = DashScopeGeneration(DashScopeGeneration.Params(native_sdk=True))
    assert not native.supports_tools
    with pytest.raises(ModelError, match="OpenAI-compatible mode only: drop `native_sdk: true`"):
        native.chat_with_tools(MESSAGES, TOOLS)


class _PlainModel(GenerationModel):
    """A backend that knows nothing of tools."""

    backend = "plain"

    def chat(self, messages: Sequence[ChatMessage], **options: Any) -> str:
        return "hi"

    def stream_chat(self, messages: Sequence[ChatMessage], **options: Any) -> Iterator[str]:
        yield "hi"

    async def achat(self, messages: Sequence[ChatMessage], **options: Any) -> str:
        return "hi"

    async def astream_chat(self, messages: Sequence[ChatMessage], **options: Any) -> AsyncIterator[str]:
        yield "hi"


def test_a_backend_without_function_calling_says_so() -> None:
    model = _PlainModel("plain-model")
    tools: list[Mapping[str, Any]] = list(TOOLS)
    assert not model.supports_tools and not PresetGenerationModel(model, {}).supports_tools
    with pytest.raises(ModelError, match=r"plain model 'plain-model' at local: this backend does not support function calling"):
        model.chat_with_tools(MESSAGES, tools)
    with pytest.raises(ModelError, match="does not support function calling"):
        asyncio.run(PresetGenerationModel(model, {}).achat_with_tools(MESSAGES, tools))
