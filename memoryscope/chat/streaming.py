"""Streamed replies: `ChatResponse`s as the model's pieces arrive, and what happens to the turn
when the stream ends, breaks, is interrupted, or is closed by its reader.

- it ends: `answered(reply)`;
- the model fails, or Ctrl-C comes (KeyboardInterrupt; for the async stream also a cancelled
  task, which is what Ctrl-C does under `asyncio.run`): `failed()` — the query is unanswered,
  whatever part of the reply was shown. A reader that gets Ctrl-C while it holds a piece (the
  stream paused at it) ends the stream the same way with `interrupt(stream)`;
- its reader closes it early (`close()`, or drops it): `answered` with the reply as far as it was read.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator
from typing import Any

from memoryscope.chat.base import ChatResponse
from memoryscope.models.base import ChatMessage, GenerationModel

__all__ = ["stream_reply", "astream_reply", "interrupt", "with_delta", "one"]


def stream_reply(
    model: GenerationModel,
    messages: list[ChatMessage],
    options: dict[str, Any],
    meta: dict[str, Any],
    answered: Callable[[str], None],
    failed: Callable[[], None],
) -> Generator[ChatResponse, None, None]:
    """Each piece as a response (`.delta`, the reply so far); `answered(reply)` when the stream
    ends or its reader stops (the turn is what they saw), `failed()` when the model fails or
    Ctrl-C interrupts the reply."""
    pieces: list[str] = []
    started = time.perf_counter()
    try:
        for delta in model.stream_chat(messages, **options):
            pieces.append(delta)
            yield with_delta(ChatResponse(ChatMessage("assistant", "".join(pieces)), _copy(meta)), delta)
    except GeneratorExit:
        answered("".join(pieces))
        raise
    except (Exception, KeyboardInterrupt):  # Ctrl-C while waiting for the model, or thrown in by `interrupt`
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
) -> AsyncGenerator[ChatResponse, None]:
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
    except (KeyboardInterrupt, asyncio.CancelledError):  # on this thread: an interrupted task should await nothing more
        failed()
        raise
    except Exception:
        await asyncio.to_thread(failed)
        raise
    meta["timings"]["generation"] = time.perf_counter() - started
    await asyncio.to_thread(answered, "".join(pieces))


def interrupt(stream: Any) -> None:
    """End a `stream_reply` paused at a piece as Ctrl-C inside it would (`failed()`), for a
    reader that got the KeyboardInterrupt itself. Anything without `throw` (a reply that was
    whole already) and a stream that ended already are left as they are."""
    throw = getattr(stream, "throw", None)
    if throw is not None:  # an ended stream raises the exception thrown at once
        with contextlib.suppress(KeyboardInterrupt, StopIteration):
            throw(KeyboardInterrupt())


def with_delta(response: ChatResponse, delta: str) -> ChatResponse:
    response.delta = response.meta_data["delta"] = delta
    return response


async def one(response: ChatResponse) -> AsyncIterator[ChatResponse]:
    yield response


def _copy(meta: dict[str, Any]) -> dict[str, Any]:
    return {key: (dict(value) if isinstance(value, dict) else value) for key, value in meta.items()}
