"""The ASGI layers under the app, each answering in the API's JSON error shape:

- `RequestMetrics` counts and times every request by its route template, for `/metrics`;
- `EncodedSlashGuard` refuses an id with `/` in a path before routing (it would be misrouted);
- `BodyLimit` refuses a body over `server.max_body_bytes` with 413;
- `CutOff` answers 503 for a request the server cancels when its shutdown time is over.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memoryscope.server.errors import ApiError, error_body
from memoryscope.server.metrics import ServerMetrics

__all__ = ["BodyLimit", "CutOff", "EncodedSlashGuard", "RequestMetrics", "send_json_error"]


class BodyLimit:
    """413 for a body over `max_bytes`: at once by its Content-Length, else when it grows past it."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await send_json_error(send, self._too_large())
            return
        received = 0
        started = over = False

        async def counted_receive() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    over = True
                    raise _BodyTooLarge()
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if over:
                # FastAPI turns an exception raised while it reads the body into its own 400
                # ("There was an error parsing the body"); the 413 is the answer, not that
                if message["type"] == "http.response.start" and not started:
                    started = True
                    await send_json_error(send, self._too_large())
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _BodyTooLarge:
            if not started:
                await send_json_error(send, self._too_large())

    def _too_large(self) -> ApiError:
        return ApiError(413, "body_too_large", f"the request body is over {self.max_bytes} bytes (server.max_body_bytes)")


class _BodyTooLarge(Exception):
    pass


async def send_json_error(send: Send, error: ApiError) -> None:
    """Answer with `error` in the API's JSON shape, from below the app (no handler runs)."""
    body = json.dumps(error_body(error.status, error.code, error.message)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in error.headers.items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class RequestMetrics:
    """Counts and times every request by its route template (never the raw path: a bounded set)."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def tracked_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, tracked_send)
        finally:
            route: Any = scope.get("route")
            endpoint = getattr(route, "path", None) or "unmatched"
            self.metrics.observe_request(endpoint, scope.get("method", ""), status, time.perf_counter() - started)


_ENCODED_SLASH = (b"%2f", b"%2F", b"%5c", b"%5C")  # `/` and `\`, which some clients turn into `/`


class EncodedSlashGuard:
    """422 for a path whose ids hold an encoded `/` or `\\`: the router reads decoded paths, so
    `/v1/users/a%2Fb/memories` would reach user `a` and another route."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") or b""
        if scope["type"] == "http" and any(mark in raw for mark in _ENCODED_SLASH):
            message = "a user or memory id in the path cannot contain '/' or '\\'; use ids without them"
            await send_json_error(send, ApiError(422, "slash_in_id", message))
            return
        await self.app(scope, receive, send)


class CutOff:
    """ASGI wrapper: once the server shuts down, a request it cancels (its graceful time is over)
    is answered 503 in the API's JSON error shape, and the cancellation ends there."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.shutting_down = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked_send(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked_send)
        except asyncio.CancelledError:
            if not self.shutting_down:
                raise
            if not started:  # a response already begun (a stream) just ends here
                message = "the server is shutting down and this request did not finish in time; try again"
                await send_json_error(send, ApiError(503, "shutting_down", message))
