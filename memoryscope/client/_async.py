"""`AsyncMemoryScopeClient`: the same verbs as coroutines."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import datetime
from typing import Any, Literal, overload

import httpx

from memoryscope.client._calls import (
    Messages,
    T,
    TimeBounds,
    _add,
    _answer,
    _as_dict,
    _blocks,
    _Call,
    _chat_body,
    _chat_result,
    _delete,
    _delete_all,
    _error_of,
    _export_end,
    _export_item,
    _get,
    _get_all,
    _headers,
    _history,
    _normalised,
    _pin,
    _profile,
    _run_operation,
    _scope,
    _search,
    _set_block,
    _status,
    _tiers,
    _transport_error,
    _undo,
    _update,
    _user_path,
)
from memoryscope.client._records import ChatResult, RemoteMemory, RemoteProfile
from memoryscope.client._streams import AsyncChatStream


class AsyncMemoryScopeClient:
    """`MemoryScopeClient`'s verbs as coroutines; `export` is an async iterator. `async with` it, or `await aclose()`."""

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout: float = 30.0) -> None:
        self.base_url = _normalised(base_url)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=_headers(api_key), timeout=timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    async def add(
        self, messages: Messages, user_id: str, *, metadata: Mapping[str, Any] | None = None, infer: bool = True,
        time: datetime | None = None, target_name: str = "", workspace: str = "", idempotency_key: str | None = None,
    ) -> list[RemoteMemory]:  # fmt: skip
        return await self._run(_add(messages, user_id, metadata, infer, time, target_name, workspace, idempotency_key))

    async def update(self, memory_id: str, text: str | None = None, *, metadata: Mapping[str, Any] | None = None) -> RemoteMemory:
        return await self._run(_update(memory_id, text, metadata))

    async def delete(self, memory_id: str) -> bool:
        return await self._run(_delete(memory_id))

    async def pin(self, memory_id: str) -> RemoteMemory:
        """Keep a memory from being expired or rewritten by consolidation and reflection."""
        return await self._run(_pin(memory_id, True))

    async def unpin(self, memory_id: str) -> RemoteMemory:
        """Let consolidation and reflection change a pinned memory again."""
        return await self._run(_pin(memory_id, False))

    async def undo(self, run_id: str) -> dict[str, Any]:
        """Take back what one run changed (`history` names each change's run); twice changes nothing more."""
        return await self._run(_undo(run_id))

    async def delete_all(self, user_id: str, *, target_name: str = "", workspace: str = "") -> int:
        return await self._run(_delete_all(user_id, target_name, workspace))

    async def search(
        self, query: str, user_id: str, *, top_k: int = 10, filters: Mapping[str, Any] | None = None,
        types: Any = None, time_range: TimeBounds | None = None, query_time: datetime | None = None,
        target_name: str = "", workspace: str = "", threshold: float | None = None,
    ) -> list[RemoteMemory]:  # fmt: skip
        return await self._run(
            _search(query, user_id, top_k, filters, types, time_range, query_time, target_name, workspace, threshold)
        )

    async def get(self, memory_id: str) -> RemoteMemory | None:
        return await self._run(_get(memory_id))

    async def get_all(
        self, user_id: str, *, filters: Mapping[str, Any] | None = None, types: Any = None, include_expired: bool = False,
        limit: int | None = None, target_name: str = "", workspace: str = "",
    ) -> list[RemoteMemory]:  # fmt: skip
        return await self._run(_get_all(user_id, types, include_expired, limit, target_name, workspace, filters))

    async def history(self, memory_id: str) -> list[dict[str, Any]]:
        return await self._run(_history(memory_id))

    async def profile(self, user_id: str, *, target_name: str = "", workspace: str = "") -> RemoteProfile:
        return await self._run(_profile(user_id, target_name, workspace))

    async def status(self, user_id: str, *, target_name: str = "", workspace: str = "") -> dict[str, Any]:
        return await self._run(_status(user_id, target_name, workspace))

    async def tiers(self, user_id: str, *, target_name: str = "", workspace: str = "") -> dict[str, Any]:
        return await self._run(_tiers(user_id, target_name, workspace))

    async def blocks(self, user_id: str, *, target_name: str = "") -> list[dict[str, Any]]:
        return await self._run(_blocks(user_id, target_name))

    async def set_block(self, name: str, value: str, user_id: str, *, target_name: str = "") -> dict[str, Any]:
        return await self._run(_set_block(name, value, user_id, target_name))

    async def export(self, user_id: str, *, target_name: str = "", workspace: str = "") -> AsyncIterator[dict[str, Any]]:
        response = await self._open("GET", _user_path(user_id, "export"), _scope(target_name, workspace))
        seen_end = False
        try:
            async for line in response.aiter_lines():
                item = _export_item(line, seen_end)
                if item is not None:
                    seen_end = bool(item.get("end"))
                    yield item
        except httpx.TransportError as error:
            raise _transport_error(error, self.base_url) from None
        finally:
            await response.aclose()
        _export_end(seen_end)

    async def run_operation(
        self, name: str, user_id: str, *, target_name: str = "", workspace: str = "", **fields: Any
    ) -> dict[str, Any]:
        return await self._run(_run_operation(name, user_id, target_name, workspace, fields))

    @overload
    async def chat(
        self, query: str, user_id: str, *, history: Iterable[Mapping[str, Any]] | None = ...,
        system_prompt: str | None = ..., stream: Literal[False] = ...,
    ) -> ChatResult: ...  # fmt: skip
    @overload
    async def chat(
        self, query: str, user_id: str, *, history: Iterable[Mapping[str, Any]] | None = ...,
        system_prompt: str | None = ..., stream: Literal[True],
    ) -> AsyncChatStream: ...  # fmt: skip
    async def chat(
        self, query: str, user_id: str, *, history: Iterable[Mapping[str, Any]] | None = None,
        system_prompt: str | None = None, stream: bool = False,
    ) -> ChatResult | AsyncChatStream:  # fmt: skip
        body = _chat_body(query, user_id, history, system_prompt, stream)
        if not stream:
            return await self._run(_Call("POST", "/v1/chat/completions", _chat_result, body=body))
        return AsyncChatStream(await self._open("POST", "/v1/chat/completions", body=body), self.base_url)

    async def health(self) -> dict[str, Any]:
        return await self._run(_Call("GET", "/healthz", _as_dict))

    async def ready(self) -> dict[str, Any]:
        return await self._run(_Call("GET", "/readyz", _as_dict, also_ok=(503,)))

    async def _run(self, call: _Call[T]) -> T:
        try:
            response = await self._http.request(
                call.method, call.path, params=call.params or None, json=call.body, headers=dict(call.headers) or None
            )
        except httpx.TransportError as error:
            raise _transport_error(error, self.base_url) from None
        return _answer(call, response)

    async def _open(self, method: str, path: str, params: tuple[tuple[str, str], ...] = (), body: Any = None) -> httpx.Response:
        request = self._http.build_request(method, path, params=params or None, json=body)
        try:
            response = await self._http.send(request, stream=True)
            if not response.is_success:
                try:
                    await response.aread()
                finally:
                    await response.aclose()
        except httpx.TransportError as error:
            raise _transport_error(error, self.base_url) from None
        if not response.is_success:
            raise _error_of(response)
        return response

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryScopeClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
