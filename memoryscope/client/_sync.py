"""`MemoryScopeClient`: the simple memory API over HTTP, blocking."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
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
from memoryscope.client._streams import ChatStream


class MemoryScopeClient:
    """The memory API of a MemoryScope server at `base_url` (`http://127.0.0.1:8000`), sending
    `Authorization: Bearer api_key` when a key is given. Close it, or use it in `with`."""

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout: float = 30.0) -> None:
        self.base_url = _normalised(base_url)
        self._http = httpx.Client(base_url=self.base_url, headers=_headers(api_key), timeout=timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    # -- writing -------------------------------------------------------------------------------

    def add(
        self, messages: Messages, user_id: str, *, metadata: Mapping[str, Any] | None = None, infer: bool = True,
        time: datetime | None = None, target_name: str = "", workspace: str = "", idempotency_key: str | None = None,
    ) -> list[RemoteMemory]:  # fmt: skip
        """Remember a text, a message (`{"role", "content"}`, optionally `"time"`, `"name"`) or a list
        of them. `infer=True`: kept as the conversation, consolidation learns from it; `infer=False`:
        each text stored as one memory, as given. Returns the memories stored. Each add is sent with
        an `Idempotency-Key` (`idempotency_key`, else a new one): the same add sent again with the
        same key stores nothing twice."""
        return self._run(_add(messages, user_id, metadata, infer, time, target_name, workspace, idempotency_key))

    def update(self, memory_id: str, text: str | None = None, *, metadata: Mapping[str, Any] | None = None) -> RemoteMemory:
        """Change a memory's text and/or metadata (a key given as None is removed)."""
        return self._run(_update(memory_id, text, metadata))

    def delete(self, memory_id: str) -> bool:
        """Delete one memory; False when no memory (this key reaches) has that id."""
        return self._run(_delete(memory_id))

    def pin(self, memory_id: str) -> RemoteMemory:
        """Keep a memory from being expired or rewritten by consolidation and reflection."""
        return self._run(_pin(memory_id, True))

    def unpin(self, memory_id: str) -> RemoteMemory:
        """Let consolidation and reflection change a pinned memory again."""
        return self._run(_pin(memory_id, False))

    def undo(self, run_id: str) -> dict[str, Any]:
        """Take back what one run changed (`history` names each change's run); twice changes nothing more."""
        return self._run(_undo(run_id))

    def delete_all(self, user_id: str, *, target_name: str = "", workspace: str = "") -> int:
        """Delete every memory of the user (in that target and workspace); returns how many."""
        return self._run(_delete_all(user_id, target_name, workspace))

    # -- reading -------------------------------------------------------------------------------

    def search(
        self, query: str, user_id: str, *, top_k: int = 10, filters: Mapping[str, Any] | None = None,
        types: Any = None, time_range: TimeBounds | None = None, query_time: datetime | None = None,
        target_name: str = "", workspace: str = "", threshold: float | None = None,
    ) -> list[RemoteMemory]:  # fmt: skip
        """The server's retrieval: the `top_k` memories that best answer `query`, best first.
        `time_range` is `(since, until)` (either may be None) or a `TimeRange`; `threshold`
        (0 to 1) keeps only memories scoring at least that."""
        return self._run(
            _search(query, user_id, top_k, filters, types, time_range, query_time, target_name, workspace, threshold)
        )

    def get(self, memory_id: str) -> RemoteMemory | None:
        """The memory with this id, or None."""
        return self._run(_get(memory_id))

    def get_all(
        self, user_id: str, *, filters: Mapping[str, Any] | None = None, types: Any = None, include_expired: bool = False,
        limit: int | None = None, target_name: str = "", workspace: str = "",
    ) -> list[RemoteMemory]:  # fmt: skip
        """The user's memories, newest first; only those whose metadata passes `filters` and of
        `types`, when given; expired ones only with `include_expired`."""
        return self._run(_get_all(user_id, types, include_expired, limit, target_name, workspace, filters))

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """Every change to one memory, oldest first (`action`, `at`, `operation`, `run_id`, `before`, `after`)."""
        return self._run(_history(memory_id))

    def profile(self, user_id: str, *, target_name: str = "", workspace: str = "") -> RemoteProfile:
        """What is known about the user, by the server's memory policy: its memories (reflection's
        insights, newest first; MemoryOS's profile and knowledge; an agent's `human` block), with
        `.policy` and `.text`."""
        return self._run(_profile(user_id, target_name, workspace))

    def status(self, user_id: str, *, target_name: str = "", workspace: str = "") -> dict[str, Any]:
        """The scheduler's status for the user: running, waiting, last runs and errors, pending messages."""
        return self._run(_status(user_id, target_name, workspace))

    def tiers(self, user_id: str, *, target_name: str = "", workspace: str = "") -> dict[str, Any]:
        """The user's memories by the server's policy's tiers (MemoryOS: `short_term`, `mid_term`
        with `heat`, `profile`, `knowledge`, `heat_threshold`); `policy` names the policy."""
        return self._run(_tiers(user_id, target_name, workspace))

    def blocks(self, user_id: str, *, target_name: str = "") -> list[dict[str, Any]]:
        """The core memory blocks of the user's agent (an agent server): `name`, `value`, `size`, `limit`."""
        return self._run(_blocks(user_id, target_name))

    def set_block(self, name: str, value: str, user_id: str, *, target_name: str = "") -> dict[str, Any]:
        """Make `value` the whole text of the agent's block `name`, within its limit."""
        return self._run(_set_block(name, value, user_id, target_name))

    def export(self, user_id: str, *, target_name: str = "", workspace: str = "") -> Iterator[dict[str, Any]]:
        """The user's memories as `memoryscope export` writes them, one dict per line: a header, the
        memories, an end line with the count. Streamed; the request is sent when iteration starts."""
        response = self._open("GET", _user_path(user_id, "export"), _scope(target_name, workspace))
        seen_end = False
        try:
            for line in response.iter_lines():
                item = _export_item(line, seen_end)
                if item is not None:
                    seen_end = bool(item.get("end"))
                    yield item
        except httpx.TransportError as error:
            raise _transport_error(error, self.base_url) from None
        finally:
            response.close()
        _export_end(seen_end)

    # -- operations, chat, health ----------------------------------------------------------------

    def run_operation(
        self, name: str, user_id: str, *, target_name: str = "", workspace: str = "", **fields: Any
    ) -> dict[str, Any]:
        """Run a configured operation for the user; `fields`: query, query_time, memory_ids,
        new_memories, retry_failed. Returns the server's summary (result, memories, timings, ...)."""
        return self._run(_run_operation(name, user_id, target_name, workspace, fields))

    @overload
    def chat(
        self, query: str, user_id: str, *, history: Iterable[Mapping[str, Any]] | None = ...,
        system_prompt: str | None = ..., stream: Literal[False] = ...,
    ) -> ChatResult: ...  # fmt: skip
    @overload
    def chat(
        self, query: str, user_id: str, *, history: Iterable[Mapping[str, Any]] | None = ...,
        system_prompt: str | None = ..., stream: Literal[True],
    ) -> ChatStream: ...  # fmt: skip
    def chat(
        self, query: str, user_id: str, *, history: Iterable[Mapping[str, Any]] | None = None,
        system_prompt: str | None = None, stream: bool = False,
    ) -> ChatResult | ChatStream:  # fmt: skip
        """Answer `query` with the user's memories (`/v1/chat/completions`); the turn is remembered.
        `history`: earlier `{"role", "content"}` messages; `system_prompt` replaces the persona."""
        body = _chat_body(query, user_id, history, system_prompt, stream)
        if not stream:
            return self._run(_Call("POST", "/v1/chat/completions", _chat_result, body=body))
        return ChatStream(self._open("POST", "/v1/chat/completions", body=body), self.base_url)

    def health(self) -> dict[str, Any]:
        """`/healthz`: `{"status": "ok"}` when the server answers."""
        return self._run(_Call("GET", "/healthz", _as_dict))

    def ready(self) -> dict[str, Any]:
        """`/readyz`: `{"ready": bool, "checks": {...}}` (not ready is an answer, not an error)."""
        return self._run(_Call("GET", "/readyz", _as_dict, also_ok=(503,)))

    # -- plumbing --------------------------------------------------------------------------------

    def _run(self, call: _Call[T]) -> T:
        try:
            response = self._http.request(
                call.method, call.path, params=call.params or None, json=call.body, headers=dict(call.headers) or None
            )
        except httpx.TransportError as error:
            raise _transport_error(error, self.base_url) from None
        return _answer(call, response)

    def _open(self, method: str, path: str, params: tuple[tuple[str, str], ...] = (), body: Any = None) -> httpx.Response:
        """A streamed answer, its status checked (an error's body is read and the answer closed)."""
        request = self._http.build_request(method, path, params=params or None, json=body)
        try:
            response = self._http.send(request, stream=True)
            if not response.is_success:
                try:
                    response.read()
                finally:
                    response.close()
        except httpx.TransportError as error:
            raise _transport_error(error, self.base_url) from None
        if not response.is_success:
            raise _error_of(response)
        return response

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemoryScopeClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
