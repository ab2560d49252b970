"""Replies that may call functions (OpenAI "tools"), for a chat whose caller runs the functions.

The caller offers tools; the model answers with text, or with calls (and maybe some text); the
caller runs the calls and asks again with the model's message (its `tool_calls`) and one `tool`
message per call (its `tool_call_id`) after the user's message, the *exchange*; the model then
answers, with text or more calls. Every message here is an OpenAI wire-format dict.

The turn is the user's message and the model's final text: a reply with calls is not stored
(nothing of it, no call's JSON), so the user's message is stored once, with the text that ends
the exchange (`answered`). A model that fails stores the message unanswered (`failed`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

from memoryscope.chat.base import ChatResponse
from memoryscope.models.base import ChatMessage, GenerationModel, ToolCall
from memoryscope.models.token_count import count_tokens

__all__ = [
    "WireMessage", "astream_tool_reply", "prompt_tokens", "tool_messages", "tools_in_play", "wire_history", "wire_message",
]  # fmt: skip

WireMessage = dict[str, Any]


def tools_in_play(tools: Sequence[Mapping[str, Any]] | None, exchange: Sequence[Mapping[str, Any]] | None) -> bool:
    """Whether a reply goes through function calling: tools are offered, or calls are answered."""
    return bool(tools) or bool(exchange)


def wire_message(message: ChatMessage | Mapping[str, Any]) -> WireMessage:
    """A message as OpenAI's wire format: role and text, and the call fields when it has them."""
    if isinstance(message, ChatMessage):
        return {"role": message.role, "content": message.content}
    wire: WireMessage = {"role": str(message["role"]), "content": message.get("content")}
    if message.get("tool_calls"):
        wire["tool_calls"] = [dict(call) for call in message["tool_calls"]]
    if message.get("tool_call_id"):
        wire["tool_call_id"] = str(message["tool_call_id"])
    return wire


def wire_history(history: Sequence[ChatMessage | Mapping[str, Any]], keep: int) -> list[WireMessage]:
    """The last `keep` messages of `history` as wire messages. A `tool` message whose call is not
    among the earlier messages kept (cut off, or never made) is left out: the model would refuse it."""
    kept = [wire_message(item) for item in history][-keep:] if keep else []
    called: set[str] = set()
    sent = []
    for message in kept:
        if message["role"] == "tool" and message.get("tool_call_id") not in called:
            continue
        called.update(str(call.get("id")) for call in message.get("tool_calls") or ())
        sent.append(message)
    return sent


def tool_messages(
    prompt: Sequence[ChatMessage],
    history: Sequence[ChatMessage | Mapping[str, Any]] | None,
    keep: int,
    exchange: Sequence[Mapping[str, Any]],
) -> list[WireMessage]:
    """A function-calling turn's messages, from the text chat's `prompt` (its system prompt, its
    own recent turns, the query): the system prompt, then `history`'s last `keep` messages (with
    their calls) when given, else the chat's turns, then the query and the `exchange` after it."""
    system, *recent, query = prompt
    before = wire_history(history, keep) if history is not None else [wire_message(message) for message in recent]
    return [wire_message(system), *before, wire_message(query), *(wire_message(message) for message in exchange)]


def prompt_tokens(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> int:
    """The cl100k tokens of what the model reads: the messages' text and calls, and the tool schemas."""
    texts = [str(message.get("content") or "") for message in messages]
    texts += [json.dumps(call, ensure_ascii=False) for message in messages for call in message.get("tool_calls") or ()]
    return sum(count_tokens(text) for text in texts) + (count_tokens(json.dumps(list(tools), ensure_ascii=False)) if tools else 0)


async def astream_tool_reply(
    model: GenerationModel,
    messages: list[WireMessage],
    tools: Sequence[Mapping[str, Any]],
    options: dict[str, Any],
    meta: dict[str, Any],
    answered: Callable[[str], None],
    failed: Callable[[], None],
) -> AsyncGenerator[ChatResponse, None]:
    """The reply in pieces, as `astream_reply` gives them, each with the new parts of calls in
    `tool_call_deltas` and the calls so far in `tool_calls`. `answered(text)` when it ends (or
    its reader stops) without a call; `failed()` when the model fails or the task is cancelled;
    a reply with calls calls neither."""
    text: list[str] = []
    calls: list[list[str]] = []  # per call: id, name, arguments so far
    started = time.perf_counter()

    try:
        async for piece in model.astream_chat_with_tools(messages, tools, **options):
            text.append(piece.content)
            for delta in piece.tool_calls:
                if delta.index == len(calls):
                    calls.append([delta.id, delta.name, delta.arguments])
                else:
                    calls[delta.index][2] += delta.arguments
            so_far = tuple(ToolCall(*call) for call in calls)
            said = {**_copy(meta), "delta": piece.content}  # as `streaming.with_delta` marks a piece
            yield ChatResponse(
                ChatMessage("assistant", "".join(text)), said, piece.content, tool_calls=so_far, tool_call_deltas=piece.tool_calls
            )
    except GeneratorExit:  # closed early: store on this thread, an await is not allowed here
        if not calls:
            answered("".join(text))
        raise
    except (KeyboardInterrupt, asyncio.CancelledError):
        failed()
        raise
    except Exception:
        await asyncio.to_thread(failed)
        raise
    meta["timings"]["generation"] = time.perf_counter() - started
    if not calls:
        await asyncio.to_thread(answered, "".join(text))


def _copy(meta: dict[str, Any]) -> dict[str, Any]:
    return {key: (dict(value) if isinstance(value, dict) else value) for key, value in meta.items()}
