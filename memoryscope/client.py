"""A client for `memoryscope serve`: the simple memory API (`memoryscope.memory_api`), over HTTP.

    with MemoryScopeClient("http://127.0.0.1:8000", api_key=KEY) as client:
        client.add("I moved to Hangzhou last week", user_id="lin")          # kept; consolidation learns from it
        client.add("prefers tea", user_id="lin", infer=False, metadata={"source": "crm"})
        hits = client.search("where does Lin live?", user_id="lin", top_k=5)
        hits[0].memory, hits[0].score, hits[0].text                         # RemoteMemory, as MemoryRecord
        client.chat("where do I live?", user_id="lin").content
        for delta in client.chat("and since when?", user_id="lin", stream=True):
            print(delta, end="")

`AsyncMemoryScopeClient` has the same verbs as coroutines (`async with`, `await client.search(...)`;
`export` is an async iterator). As in the library, `get` of an unknown memory is None and `delete`
of one False; a user with no memories has none to list (`get_all`, `search`, `profile`: [];
`delete_all`: 0). Every other error the server answers raises `MemoryScopeClientError` with the
server's `code` and message; so does a server that cannot be reached (code "unreachable") or that
does not answer within `timeout` (code "timeout"). Datetimes are sent as ISO 8601 (a naive one is
read in the server's configured zone). Needs only httpx (`pip install 'memoryscope[server]'`, or
just httpx); nothing of the engine or the server is imported.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import Enum
from typing import Any, Generic, Literal, TypeVar, overload
from urllib.parse import quote

import httpx

from memoryscope import __version__
from memoryscope.errors import MemoryScopeError

__all__ = [
    "MemoryScopeClient",
    "AsyncMemoryScopeClient",
    "RemoteMemory",
    "ChatResult",
    "ChatStream",
    "AsyncChatStream",
    "MemoryScopeClientError",
]

T = TypeVar("T")
Messages = str | Mapping[str, Any] | Iterable[str | Mapping[str, Any]]
TimeBounds = tuple[datetime | None, datetime | None] | Any  # or anything with .start and .end (a TimeRange)


class MemoryScopeClientError(MemoryScopeError):
    """What went wrong, as the server said it: its HTTP `status`, its stable `code` (`unknown_memory`,
    `unauthorized`, `forbidden`, ...) and its `message`. `status` is None when no HTTP answer says it:
    the server could not be reached (`unreachable`), did not answer in time (`timeout`), sent an error
    inside a stream, or a call was refused before sending (`invalid_argument`)."""

    def __init__(self, status: int | None, code: str, message: str) -> None:
        self.status = status
        self.code = code
        self.message = message
        super().__init__(f"[{status} {code}] {message}" if status is not None else f"[{code}] {message}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.status, self.code, self.message))


@dataclass(frozen=True)
class RemoteMemory:
    """One memory as the server returns it: `MemoryRecord`'s fields (without `node`), times as datetimes."""

    id: str
    memory: str
    user_id: str
    memory_type: str
    status: str
    score: float | None
    text: str
    time: datetime
    created_at: datetime
    updated_at: datetime
    event_time: datetime | None
    message_time: datetime | None
    role: str | None
    metadata: dict[str, Any]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RemoteMemory:
        """From `MemoryRecord.to_dict()`'s JSON; fields the server adds later are ignored."""
        return cls(
            id=str(data["id"]),
            memory=str(data["memory"]),
            user_id=str(data["user_id"]),
            memory_type=str(data["memory_type"]),
            status=str(data["status"]),
            score=None if data.get("score") is None else float(data["score"]),
            text=str(data["text"]),
            time=datetime.fromisoformat(data["time"]),
            created_at=datetime.fromisoformat(data["created_at"]),
            updated_at=datetime.fromisoformat(data["updated_at"]),
            event_time=_time_or_none(data.get("event_time")),
            message_time=_time_or_none(data.get("message_time")),
            role=data.get("role"),
            metadata=dict(data.get("metadata") or {}),
        )


@dataclass(frozen=True)
class ChatResult:
    """A chat reply: its text, the memory lines put into the prompt and their ids, token `usage`."""

    content: str
    memories: tuple[str, ...] = ()
    memory_ids: tuple[str, ...] = ()
    usage: dict[str, int] = field(default_factory=dict)
    id: str = ""


# -- the requests, built once for both clients ----------------------------------------------------


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One request and how to read its answer. An error whose code is in `absent_codes` means
    "nothing there" and answers `absent()` instead (as the library returns None, [] or 0)."""

    method: str
    path: str
    read: Callable[[Any], T]
    params: tuple[tuple[str, str], ...] = ()
    body: Any = None
    absent_codes: tuple[str, ...] = ()
    absent: Callable[[], T] | None = None
    also_ok: tuple[int, ...] = ()  # statuses whose JSON is an answer, not an error (503 from /readyz)


def _segment(value: str, what: str) -> str:
    text = str(value)
    if not text:
        raise MemoryScopeClientError(None, "invalid_argument", f"{what} is empty; give one")
    if set(text) == {"."}:  # "." and ".." would be resolved away by URL normalisation: send them escaped
        return "%2E" * len(text)
    return quote(text, safe="")


def _user_path(user_id: str, tail: str) -> str:
    return f"/v1/users/{_segment(user_id, 'user_id')}/{tail}"


def _memory_path(memory_id: str, tail: str = "") -> str:
    return f"/v1/memories/{_segment(memory_id, 'memory_id')}{tail}"


def _scope(target_name: str, workspace: str) -> tuple[tuple[str, str], ...]:
    return tuple((name, value) for name, value in (("workspace", workspace), ("target", target_name)) if value)


def _wire(value: Any) -> Any:
    """JSON-ready: datetimes as ISO 8601 texts, enums as their values, tuples as lists."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(key): _wire(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_wire(item) for item in value]
    return value


def _time_or_none(value: Any) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _memories(found: Iterable[Mapping[str, Any]]) -> list[RemoteMemory]:
    return [RemoteMemory.from_dict(item) for item in found]


def _message(item: str | Mapping[str, Any], time: datetime | None) -> dict[str, Any]:
    if isinstance(item, str):
        message: dict[str, Any] = {"role": "user", "content": item}
    elif isinstance(item, Mapping):
        message = dict(item)  # unknown keys go as given: the server names them in its 422
    else:
        raise MemoryScopeClientError(None, "invalid_argument", f"add takes texts or messages (dicts), got {type(item).__name__}")
    if time is not None and message.get("time") is None:
        message["time"] = time
    return message


def _text(item: str | Mapping[str, Any]) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping) and set(item) <= {"role", "content"} and item.get("role", "user") == "user":
        return str(item.get("content", ""))
    raise MemoryScopeClientError(
        None, "invalid_argument",
        "add(infer=False) stores texts as the user's own memories: give texts (or {'content': ...}); "
        "pass time= for when they were said, and store other roles with infer=True",
    )  # fmt: skip


def _add(
    messages: Messages, user_id: str, metadata: Mapping[str, Any] | None, infer: bool, time: datetime | None,
    target_name: str, workspace: str,
) -> _Call[list[RemoteMemory]]:  # fmt: skip
    items = [messages] if isinstance(messages, str | Mapping) else list(messages)
    body: dict[str, Any]
    if infer:
        body = {"messages": [_message(item, time) for item in items]}
        path, key = _user_path(user_id, "messages"), "stored"
    else:
        body = {"texts": [_text(item) for item in items]}
        if time is not None:
            body["time"] = time
        path, key = _user_path(user_id, "memories"), "added"
    if metadata is not None:
        body["metadata"] = metadata
    return _Call("POST", path, lambda data: _memories(data[key]), _scope(target_name, workspace), _wire(body))


def _type_names(types: Any) -> list[str]:
    chosen = [types] if isinstance(types, str | Enum) else list(types)
    return [str(_wire(name)) for name in chosen]


def _search(
    query: str, user_id: str, top_k: int, filters: Mapping[str, Any] | None, types: Any, time_range: TimeBounds | None,
    query_time: datetime | None, target_name: str, workspace: str,
) -> _Call[list[RemoteMemory]]:  # fmt: skip
    body: dict[str, Any] = {"query": query, "top_k": top_k}
    if types is not None:
        body["types"] = _type_names(types)
    if filters is not None:
        body["filters"] = filters
    if time_range is not None:
        bounds: Any = time_range  # (since, until), or a TimeRange (its field is the server's: message_time)
        since, until = (bounds.start, bounds.end) if hasattr(bounds, "start") else bounds
        body.update({name: moment for name, moment in (("since", since), ("until", until)) if moment is not None})
    if query_time is not None:
        body["query_time"] = query_time
    return _Call(
        "POST", _user_path(user_id, "search"), lambda data: _memories(data["memories"]), _scope(target_name, workspace),
        _wire(body), absent_codes=("unknown_user",), absent=list,
    )  # fmt: skip


def _get_all(
    user_id: str, types: Any, include_expired: bool, limit: int | None, target_name: str, workspace: str,
    filters: Mapping[str, Any] | None = None,
) -> _Call[list[RemoteMemory]]:  # fmt: skip
    params = [("type", name) for name in _type_names(types)] if types is not None else []
    if filters is not None:
        params.append(("filters", json.dumps(_wire(filters))))
    if limit is not None:
        params.append(("limit", str(limit)))
    if include_expired:
        params.append(("include_expired", "true"))
    return _Call(
        "GET", _user_path(user_id, "memories"), lambda data: _memories(data["memories"]),
        (*params, *_scope(target_name, workspace)), absent_codes=("unknown_user",), absent=list,
    )  # fmt: skip


def _get(memory_id: str) -> _Call[RemoteMemory | None]:
    return _Call("GET", _memory_path(memory_id), RemoteMemory.from_dict, absent_codes=("unknown_memory",), absent=lambda: None)


def _update(memory_id: str, text: str | None, metadata: Mapping[str, Any] | None) -> _Call[RemoteMemory]:
    body = {name: value for name, value in (("text", text), ("metadata", metadata)) if value is not None}
    return _Call("PATCH", _memory_path(memory_id), RemoteMemory.from_dict, body=_wire(body))


def _delete(memory_id: str) -> _Call[bool]:
    read = lambda data: bool(data["deleted"])  # noqa: E731 - a one-line reader, as the others
    return _Call("DELETE", _memory_path(memory_id), read, absent_codes=("unknown_memory",), absent=lambda: False)


def _delete_all(user_id: str, target_name: str, workspace: str) -> _Call[int]:
    return _Call(
        "DELETE", _user_path(user_id, "memories"), lambda data: int(data["deleted"]), _scope(target_name, workspace),
        absent_codes=("unknown_user",), absent=lambda: 0,
    )  # fmt: skip


def _history(memory_id: str) -> _Call[list[dict[str, Any]]]:
    return _Call("GET", _memory_path(memory_id, "/history"), lambda data: list(data["changes"]))


def _profile(user_id: str, target_name: str, workspace: str) -> _Call[list[RemoteMemory]]:
    return _Call(
        "GET", _user_path(user_id, "profile"), lambda data: _memories(data["insights"]), _scope(target_name, workspace),
        absent_codes=("unknown_user",), absent=list,
    )  # fmt: skip


def _as_dict(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    return data


def _status(user_id: str, target_name: str, workspace: str) -> _Call[dict[str, Any]]:
    return _Call("GET", _user_path(user_id, "status"), _as_dict, _scope(target_name, workspace))


def _run_operation(name: str, user_id: str, target_name: str, workspace: str, fields: dict[str, Any]) -> _Call[dict[str, Any]]:
    path = _user_path(user_id, f"operations/{_segment(name, 'operation name')}")
    return _Call("POST", path, _as_dict, _scope(target_name, workspace), _wire(fields))


def _chat_body(
    query: str, user_id: str, history: Iterable[Mapping[str, Any]] | None, system_prompt: str | None, stream: bool
) -> dict[str, Any]:
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages += [dict(turn) for turn in history or ()]
    messages.append({"role": "user", "content": query})
    body: dict[str, Any] = {"model": "memoryscope", "messages": messages, "user": user_id, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return _wire(body)


def _chat_result(data: Any) -> ChatResult:
    extension = data.get("memoryscope") or {}
    return ChatResult(
        content=data["choices"][0]["message"]["content"] or "",
        memories=tuple(extension.get("memories") or ()),
        memory_ids=tuple(extension.get("memory_ids") or ()),
        usage=dict(data.get("usage") or {}),
        id=str(data.get("id", "")),
    )


# -- answers ---------------------------------------------------------------------------------------


def _normalised(base_url: str) -> str:
    """`http://host:8000`, also from `http://host:8000/` or an OpenAI-style `http://host:8000/v1`."""
    url = base_url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise MemoryScopeClientError(None, "invalid_argument", f"base_url must start with http:// or https://, got {base_url!r}")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"User-Agent": f"memoryscope-client/{__version__}", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def _transport_error(error: httpx.TransportError, base_url: str) -> MemoryScopeClientError:
    what = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    if isinstance(error, httpx.TimeoutException) and not isinstance(error, httpx.ConnectTimeout):
        message = f"the MemoryScope server at {base_url} did not answer in time ({what}); raise the client's timeout="
        return MemoryScopeClientError(None, "timeout", message)
    message = f"cannot reach the MemoryScope server at {base_url} ({what}); is `memoryscope serve` running there?"
    return MemoryScopeClientError(None, "unreachable", message)


def _error_of(response: httpx.Response) -> MemoryScopeClientError:
    """The server's error, from its JSON (`{"error": {"code", "message", "type"}}`) or, from a proxy
    that answers otherwise, from the status and the start of the body."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        return MemoryScopeClientError(response.status_code, error["code"], str(error.get("message", "")))
    request = response.request
    snippet = response.text[:200].strip() or "(no body)"
    message = f"{request.method} {request.url} answered {response.status_code} {response.reason_phrase}: {snippet}"
    return MemoryScopeClientError(response.status_code, "http_error", message)


def _answer(call: _Call[T], response: httpx.Response) -> T:
    if not (response.is_success or response.status_code in call.also_ok):
        error = _error_of(response)
        if error.code in call.absent_codes and call.absent is not None:
            return call.absent()
        raise error
    try:
        return call.read(response.json())
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as problem:
        where = f"{call.method} {response.request.url}"
        message = (
            f"{where} answered a body this client cannot read ({type(problem).__name__}: {problem}); "
            "do the versions of client and server match?"
        )
        raise MemoryScopeClientError(response.status_code, "invalid_response", message) from None


class _ChatEvents:
    """Reads the chat's server-sent events: text deltas out, memories, usage and errors kept or raised."""

    def __init__(self) -> None:
        self.content = ""
        self.memories: tuple[str, ...] = ()
        self.memory_ids: tuple[str, ...] = ()
        self.usage: dict[str, int] = {}
        self.done = False
        self._data: list[str] = []

    def feed(self, line: str) -> str | None:
        """One line of the stream; the text delta its event completes, if any."""
        if line.startswith("data:"):
            self._data.append(line[5:].removeprefix(" "))
            return None
        if line or not self._data:
            return None  # a comment, another field, or a blank line between events
        payload, self._data = "\n".join(self._data), []
        if payload == "[DONE]":
            self.done = True
            return None
        try:
            event = _as_dict(json.loads(payload))
        except (ValueError, TypeError):
            message = f"the chat stream sent an event that is not a JSON object: {payload[:200]}"
            raise MemoryScopeClientError(None, "invalid_response", message) from None
        error = event.get("error")
        if isinstance(error, dict):
            raise MemoryScopeClientError(None, str(error.get("code", "stream_error")), str(error.get("message", "")))
        extension = event.get("memoryscope")
        if extension:
            self.memories = tuple(extension.get("memories") or ())
            self.memory_ids = tuple(extension.get("memory_ids") or ())
        if event.get("usage"):
            self.usage = dict(event["usage"])
        delta = "".join(str((choice.get("delta") or {}).get("content") or "") for choice in event.get("choices") or ())
        self.content += delta
        return delta or None

    def finish(self) -> None:
        if not self.done:
            message = "the chat stream ended before its last event ([DONE]); the reply may be cut short"
            raise MemoryScopeClientError(None, "incomplete_stream", message)


def _export_item(line: str, seen_end: bool) -> dict[str, Any] | None:
    """One line of an export, read; None for a blank one."""
    if not line.strip():
        return None
    if seen_end:
        raise MemoryScopeClientError(None, "invalid_response", "the export has lines after its end line")
    try:
        return _as_dict(json.loads(line))
    except (ValueError, TypeError):
        raise MemoryScopeClientError(None, "invalid_response", f"an export line is not a JSON object: {line[:200]}") from None


def _export_end(seen_end: bool) -> None:
    if not seen_end:
        message = "the export ended before its end line; the server may have failed midway (see its log)"
        raise MemoryScopeClientError(None, "incomplete_export", message)


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
        time: datetime | None = None, target_name: str = "", workspace: str = "",
    ) -> list[RemoteMemory]:  # fmt: skip
        """Remember a text, a message (`{"role", "content"}`, optionally `"time"`, `"name"`) or a list
        of them. `infer=True`: kept as the conversation, consolidation learns from it; `infer=False`:
        each text stored as one memory, as given. Returns the memories stored."""
        return self._run(_add(messages, user_id, metadata, infer, time, target_name, workspace))

    def update(self, memory_id: str, text: str | None = None, *, metadata: Mapping[str, Any] | None = None) -> RemoteMemory:
        """Change a memory's text and/or metadata (a key given as None is removed)."""
        return self._run(_update(memory_id, text, metadata))

    def delete(self, memory_id: str) -> bool:
        """Delete one memory; False when no memory (this key reaches) has that id."""
        return self._run(_delete(memory_id))

    def delete_all(self, user_id: str, *, target_name: str = "", workspace: str = "") -> int:
        """Delete every memory of the user (in that target and workspace); returns how many."""
        return self._run(_delete_all(user_id, target_name, workspace))

    # -- reading -------------------------------------------------------------------------------

    def search(
        self, query: str, user_id: str, *, top_k: int = 10, filters: Mapping[str, Any] | None = None,
        types: Any = None, time_range: TimeBounds | None = None, query_time: datetime | None = None,
        target_name: str = "", workspace: str = "",
    ) -> list[RemoteMemory]:  # fmt: skip
        """The server's retrieval: the `top_k` memories that best answer `query`, best first.
        `time_range` is `(since, until)` (either may be None) or a `TimeRange`."""
        return self._run(_search(query, user_id, top_k, filters, types, time_range, query_time, target_name, workspace))

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

    def profile(self, user_id: str, *, target_name: str = "", workspace: str = "") -> list[RemoteMemory]:
        """What reflection concluded about the user: their insights, newest first."""
        return self._run(_profile(user_id, target_name, workspace))

    def status(self, user_id: str, *, target_name: str = "", workspace: str = "") -> dict[str, Any]:
        """The scheduler's status for the user: running, waiting, last runs and errors, pending messages."""
        return self._run(_status(user_id, target_name, workspace))

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
            response = self._http.request(call.method, call.path, params=call.params or None, json=call.body)
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


class AsyncMemoryScopeClient:
    """`MemoryScopeClient`'s verbs as coroutines; `export` is an async iterator. `async with` it, or `await aclose()`."""

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout: float = 30.0) -> None:
        self.base_url = _normalised(base_url)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=_headers(api_key), timeout=timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    async def add(
        self, messages: Messages, user_id: str, *, metadata: Mapping[str, Any] | None = None, infer: bool = True,
        time: datetime | None = None, target_name: str = "", workspace: str = "",
    ) -> list[RemoteMemory]:  # fmt: skip
        return await self._run(_add(messages, user_id, metadata, infer, time, target_name, workspace))

    async def update(self, memory_id: str, text: str | None = None, *, metadata: Mapping[str, Any] | None = None) -> RemoteMemory:
        return await self._run(_update(memory_id, text, metadata))

    async def delete(self, memory_id: str) -> bool:
        return await self._run(_delete(memory_id))

    async def delete_all(self, user_id: str, *, target_name: str = "", workspace: str = "") -> int:
        return await self._run(_delete_all(user_id, target_name, workspace))

    async def search(
        self, query: str, user_id: str, *, top_k: int = 10, filters: Mapping[str, Any] | None = None,
        types: Any = None, time_range: TimeBounds | None = None, query_time: datetime | None = None,
        target_name: str = "", workspace: str = "",
    ) -> list[RemoteMemory]:  # fmt: skip
        return await self._run(_search(query, user_id, top_k, filters, types, time_range, query_time, target_name, workspace))

    async def get(self, memory_id: str) -> RemoteMemory | None:
        return await self._run(_get(memory_id))

    async def get_all(
        self, user_id: str, *, filters: Mapping[str, Any] | None = None, types: Any = None, include_expired: bool = False,
        limit: int | None = None, target_name: str = "", workspace: str = "",
    ) -> list[RemoteMemory]:  # fmt: skip
        return await self._run(_get_all(user_id, types, include_expired, limit, target_name, workspace, filters))

    async def history(self, memory_id: str) -> list[dict[str, Any]]:
        return await self._run(_history(memory_id))

    async def profile(self, user_id: str, *, target_name: str = "", workspace: str = "") -> list[RemoteMemory]:
        return await self._run(_profile(user_id, target_name, workspace))

    async def status(self, user_id: str, *, target_name: str = "", workspace: str = "") -> dict[str, Any]:
        return await self._run(_status(user_id, target_name, workspace))

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
            response = await self._http.request(call.method, call.path, params=call.params or None, json=call.body)
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
