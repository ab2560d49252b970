"""Streamed chat replies: text deltas parsed from the server's SSE events, sync and async."""

from __future__ import annotations

import httpx

from memoryscope.client._calls import _ChatEvents, _transport_error

# -- the clients -----------------------------------------------------------------------------------


class ChatStream:
    """`chat(..., stream=True)`: iterate for the reply's text deltas. `memories` and `memory_ids` are
    set once the first event is read, `content` is the text so far, `usage` is set at the end. Use
    `with` (or `close()`) when you may stop reading before the end."""

    def __init__(self, response: httpx.Response, base_url: str) -> None:
        self._response = response
        self._lines = response.iter_lines()
        self._base_url = base_url
        self._events = _ChatEvents()
        self._finished = False

    content = property(lambda self: self._events.content, doc="The reply's text so far.")
    memories = property(lambda self: self._events.memories, doc="The memory lines put into the prompt.")
    memory_ids = property(lambda self: self._events.memory_ids, doc="The ids of those memories.")
    usage = property(lambda self: self._events.usage, doc="Token counts, once the stream has ended.")

    def __iter__(self) -> ChatStream:
        return self

    def __next__(self) -> str:
        if self._finished:
            raise StopIteration
        try:
            for line in self._lines:
                delta = self._events.feed(line)
                if delta is not None:
                    return delta
            last = self._events.feed("")  # a last event the server did not end with a blank line
            if last is not None:
                return last
            self._events.finish()
        except httpx.TransportError as error:
            self.close()
            raise _transport_error(error, self._base_url) from None
        except BaseException:
            self.close()
            raise
        self.close()
        raise StopIteration

    def close(self) -> None:
        self._finished = True
        self._response.close()

    def __enter__(self) -> ChatStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncChatStream:
    """`await chat(..., stream=True)` of the async client: `async for` the text deltas; as `ChatStream`."""

    def __init__(self, response: httpx.Response, base_url: str) -> None:
        self._response = response
        self._lines = response.aiter_lines()
        self._base_url = base_url
        self._events = _ChatEvents()
        self._finished = False

    content = ChatStream.content
    memories = ChatStream.memories
    memory_ids = ChatStream.memory_ids
    usage = ChatStream.usage

    def __aiter__(self) -> AsyncChatStream:
        return self

    async def __anext__(self) -> str:
        if self._finished:
            raise StopAsyncIteration
        try:
            async for line in self._lines:
                delta = self._events.feed(line)
                if delta is not None:
                    return delta
            last = self._events.feed("")
            if last is not None:
                return last
            self._events.finish()
        except httpx.TransportError as error:
            await self.aclose()
            raise _transport_error(error, self._base_url) from None
        except BaseException:
            await self.aclose()
            raise
        await self.aclose()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._finished = True
        await self._response.aclose()

    async def __aenter__(self) -> AsyncChatStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
