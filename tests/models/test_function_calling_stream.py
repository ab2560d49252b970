"""Streamed function calling (`astream_chat_with_tools`) through the generation models, against
the fake OpenAI-compatible server: the pieces make up the calls the server sent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memoryscope.errors import ModelError
from memoryscope.models.base import PresetGenerationModel, ToolCallDelta, ToolReplyPiece, tally_calls
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.testing.fake_openai import FakeOpenAIServer, FakeToolCalls
from tests.models.test_function_calling import MESSAGES, TOOLS, make_model


def streamed(model: Any, messages: Any = MESSAGES, tools: Any = TOOLS, **options: Any) -> list[ToolReplyPiece]:
    async def read() -> list[ToolReplyPiece]:
        return [piece async for piece in model.astream_chat_with_tools(messages, tools, **options)]

    return asyncio.run(read())


def assembled(pieces: list[ToolReplyPiece]) -> list[tuple[str, str, str]]:
    calls: list[list[str]] = []
    for delta in (delta for piece in pieces for delta in piece.tool_calls):
        if delta.index == len(calls):
            calls.append([delta.id, delta.name, delta.arguments])
        else:
            assert not delta.id and not delta.name  # the id and the name come once, on the first piece
            calls[delta.index][2] += delta.arguments
    return [(call_id, name, arguments) for call_id, name, arguments in calls]


@pytest.fixture
def model(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> OpenAILikeGeneration:
    return make_model(server, fast_retry)


def test_streamed_calls_and_text_make_up_what_the_server_sent(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    query = {"query": "the cello concert in the Hangzhou youth orchestra"}  # long: its arguments come in pieces
    server.queue_replies(
        FakeToolCalls([("archival_memory_search", query), ("send_message", {"message": "hi"})], content="Let me look.")
    )

    with tally_calls() as tally:
        pieces = streamed(model, tool_choice="auto")

    sent = server.requests[-1]
    assert "".join(piece.content for piece in pieces) == "Let me look."
    assert assembled(pieces) == [
        (call["id"], call["function"]["name"], call["function"]["arguments"]) for call in sent.tool_calls
    ]
    assert len([d for piece in pieces for d in piece.tool_calls if d.index == 0]) > 2
    assert sent.body["stream"] is True and sent.body["tools"] == TOOLS and sent.body["tool_choice"] == "auto"
    assert tally.of("generation") == {
        "calls": 1,
        "prompt_tokens": sent.prompt_tokens,
        "completion_tokens": sent.completion_tokens,
    }


def test_a_streamed_reply_without_calls_is_text_pieces(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.queue_replies("You play the cello.")
    pieces = streamed(model)
    assert all(piece.tool_calls == () for piece in pieces) and len(pieces) > 1
    assert "".join(piece.content for piece in pieces) == "You play the cello."


def test_a_preset_model_streams_calls_with_its_options(model: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.queue_replies(FakeToolCalls([("send_message", {"message": "hi"})]))
    pieces = streamed(PresetGenerationModel(model, {"temperature": 0.7}))
    assert pieces[0].tool_calls[0] == ToolCallDelta(0, server.requests[-1].tool_calls[0]["id"], "send_message", "")
    assert server.requests[-1].body["temperature"] == 0.7


def test_function_calling_false_refuses_a_stream_before_any_request(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = make_model(server, fast_retry, function_calling=False)
    with pytest.raises(ModelError, match="function_calling: false"):
        streamed(model)
    assert server.requests == []
