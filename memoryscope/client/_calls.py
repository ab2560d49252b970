"""Every request, built once for both clients (`_Call`), and how an answer becomes a result or an error."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from enum import Enum
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from memoryscope import __version__
from memoryscope.client._records import ChatResult, MemoryScopeClientError, RemoteMemory, RemoteProfile

T = TypeVar("T")
Messages = str | Mapping[str, Any] | Iterable[str | Mapping[str, Any]]
TimeBounds = tuple[datetime | None, datetime | None] | Any  # or anything with .start and .end (a TimeRange)


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
    headers: tuple[tuple[str, str], ...] = ()  # besides the client's own (an add's Idempotency-Key)


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
    target_name: str, workspace: str, idempotency_key: str | None = None,
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
    # the request's name: sent again (a retry after a timeout), the server stores nothing twice
    sent_key = idempotency_key or uuid.uuid4().hex

    def read(data: Any) -> list[RemoteMemory]:
        return _memories(data[key])

    return _Call("POST", path, read, _scope(target_name, workspace), _wire(body), headers=(("Idempotency-Key", sent_key),))


def _type_names(types: Any) -> list[str]:
    chosen = [types] if isinstance(types, str | Enum) else list(types)
    return [str(_wire(name)) for name in chosen]


def _search(
    query: str, user_id: str, top_k: int, filters: Mapping[str, Any] | None, types: Any, time_range: TimeBounds | None,
    query_time: datetime | None, target_name: str, workspace: str, threshold: float | None = None,
) -> _Call[list[RemoteMemory]]:  # fmt: skip
    body: dict[str, Any] = {"query": query, "top_k": top_k}
    if threshold is not None:
        body["threshold"] = threshold
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


def _pin(memory_id: str, pinned: bool) -> _Call[RemoteMemory]:
    return _Call("POST" if pinned else "DELETE", _memory_path(memory_id, "/pin"), RemoteMemory.from_dict)


def _undo(run_id: str) -> _Call[dict[str, Any]]:
    return _Call("POST", f"/v1/runs/{_segment(run_id, 'run_id')}/undo", _as_dict)


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


def _profile(user_id: str, target_name: str, workspace: str) -> _Call[RemoteProfile]:
    return _Call(
        "GET", _user_path(user_id, "profile"), RemoteProfile.from_dict, _scope(target_name, workspace),
        absent_codes=("unknown_user",), absent=lambda: RemoteProfile([]),
    )  # fmt: skip


def _as_dict(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    return data


def _status(user_id: str, target_name: str, workspace: str) -> _Call[dict[str, Any]]:
    return _Call("GET", _user_path(user_id, "status"), _as_dict, _scope(target_name, workspace))


def _tiers(user_id: str, target_name: str, workspace: str) -> _Call[dict[str, Any]]:
    return _Call("GET", _user_path(user_id, "tiers"), _as_dict, _scope(target_name, workspace))


def _blocks(user_id: str, target_name: str) -> _Call[list[dict[str, Any]]]:
    return _Call("GET", _user_path(user_id, "blocks"), lambda data: list(data["blocks"]), _scope(target_name, ""))


def _set_block(name: str, value: str, user_id: str, target_name: str) -> _Call[dict[str, Any]]:
    path = _user_path(user_id, f"blocks/{_segment(name, 'block name')}")
    return _Call("PUT", path, _as_dict, _scope(target_name, ""), {"value": value})


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
