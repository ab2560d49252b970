"""Streamed replies: `ChatResponse`s as the model's pieces arrive, and what happens to the turn
when the stream ends, breaks, or is closed by its reader."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from memoryscope.chat.base import ChatResponse
from memoryscope.models.base import ChatMessage, GenerationModel

__all__ = ["stream_reply", "astream_reply", "with_delta", "one"]


def stream_reply(
    model: GenerationModel,
    messages: list[ChatMessage],
    options: dict[str, Any],
    meta: dict[str, Any],
    answered: Callable[[str], None],
    failed: Callable[[], None],
) -> Iterator[ChatResponse]:
    """Each piece as a response (`.delta`, the reply so far); `answered(reply)` when the stream
    ends or its reader stops (the turn is what they saw), `failed()` when the model fails."""
    pieces: list[str] = []
    started = time.perf_counter()
    try:
        for delta in model.stream_chat(messages, **options):
            pieces.append(delta)
            yield with_delta(ChatResponse(ChatMessage("assistant", "".join(pieces)), _copy(meta)), delta)
    except GeneratorExit:
        answered("".join(pieces))
        raise
    except Exception:
        failed()
        raise
    meta["timings"]["generation"] = time.perf_counter() - started
    answered("".join(pieces))


async def astream_reply(
    model: GenerationModel,
    messages: list[ChatMessage],
    options: dict[str, Any],
    meta: dict[str, Any],
    answered: Callable[[str], None],
    failed: Callable[[], None],
) -> AsyncIterator[ChatResponse]:
    """As `stream_reply`, for asyncio; the callbacks run in a worker thread (they store)."""
    pieces: list[str] = []
    started = time.perf_counter()
    try:
        async for delta in model.astream_chat(messages, **options):
            pieces.append(delta)
            yield with_delta(ChatResponse(ChatMessage("assistant", "".join(pieces)), _copy(meta)), delta)
    except GeneratorExit:  # closed early: store on this thread, an await is not allowed here
        answered("".join(pieces))
        raise
    except Exception:
        await asyncio.to_thread(failed)
        raise
    meta["timings"]["generation"] = time.perf_counter() - started
    await asyncio.to_thread(answered, "".join(pieces))


def with_delta(response: ChatResponse, delta: str) -> ChatResponse:
    response.delta = response.meta_data["delta"] = delta
    return response


async def one(response: ChatResponse) -> AsyncIterator[ChatResponse]:
    yield response


def _copy(meta: dict[str, Any]) -> dict[str, Any]:
    return {key: (dict(value) if isinstance(value, dict) else value) for key, value in meta.items()}
