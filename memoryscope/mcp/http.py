"""`mount_mcp`: the MCP server at `/mcp` of the FastAPI app, over streamable HTTP, key-scoped.

    app = create_app(scope)
    mount_mcp(app, app.state.memoryscope)          # before the app starts: it joins the app's lifespan

Each request to `/mcp` passes the REST API's checks first: with API keys configured it needs a
valid key (`Authorization: Bearer KEY` or `X-API-Key`; 401 otherwise) within its rate (429). Its
user is the key's sole user; else the `X-MemoryScope-User` header, which the key must reach (403
outside its scope; 400 when missing). Without keys, `X-MemoryScope-User` or the service's
`human_name`. No tool argument names a user, so a model cannot reach anyone else.

This module reads the server's state by its attributes (`scope`, `settings`, `keys`, `limiter`),
never importing `memoryscope.server`, so that `create_app` can call it (the layer order).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from starlette.routing import Route

from memoryscope.errors import MemoryScopeError
from memoryscope.mcp.server import build_mcp

__all__ = ["mount_mcp", "MCP_PATH", "USER_HEADER"]

MCP_PATH = "/mcp"
USER_HEADER = "x-memoryscope-user"
_USER_KEY = "memoryscope.mcp_user"  # where the checked user rides in the request's ASGI scope

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_TYPES = {400: "invalid_request", 401: "authentication_error", 403: "permission_denied", 429: "rate_limit_exceeded"}


def mount_mcp(app: Any, state: Any) -> MCPServer:
    """Serve `state.scope` over MCP at `/mcp` of `app` (a FastAPI app `create_app` made, not yet
    started); its session manager runs inside the app's lifespan. Returns the MCP server; a
    second call on the same app returns the first one's."""
    mounted = getattr(app.state, "memoryscope_mcp", None)
    if isinstance(mounted, MCPServer):
        return mounted  # mounted already (by `create_app`): one endpoint, one session manager
    server = build_mcp(state.scope, request_user)
    # builds the session manager; the Starlette app it returns is not used: the route below serves it, behind the keys
    server.streamable_http_app(streamable_http_path=MCP_PATH, host=state.settings.host)
    manager = server.session_manager
    endpoint = _KeyScoped(manager.handle_request, state)
    app.router.routes.append(Route(MCP_PATH, endpoint=endpoint, methods=["GET", "POST", "DELETE"]))
    served = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(running: Any) -> AsyncIterator[Any]:
        async with served(running) as value, manager.run():  # MCP sessions end before the scope closes
            yield value

    app.router.lifespan_context = lifespan
    app.state.memoryscope_mcp = server
    return server


def request_user(context: Context) -> str:
    """The user `_KeyScoped` checked for this call's HTTP request."""
    request = context.request_context.request
    user = getattr(request, "scope", {}).get(_USER_KEY)
    if not isinstance(user, str):
        raise MemoryScopeError("this MCP call came without a checked user; call the server over its /mcp endpoint")
    return user


class _KeyScoped:
    """The ASGI app at `/mcp`: checks the key and decides the user, then hands the request to the SDK."""

    def __init__(self, handle: Callable[[Scope, Receive, Send], Awaitable[None]], state: Any) -> None:
        self.handle = handle
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}
        refused = self.refusal(headers)
        if isinstance(refused, tuple):
            await _error(send, *refused)
            return
        scope[_USER_KEY] = refused
        await self.handle(scope, receive, send)

    def refusal(self, headers: dict[str, str]) -> str | tuple[int, str, str, dict[str, str]]:
        """The request's user, or why it is refused: (status, code, message, headers)."""
        state = self.state
        asked = headers.get(USER_HEADER, "").strip() or None
        if not state.keys:
            return asked or str(state.service.params.human_name)
        key = state.keys.authenticate(_presented_key(headers))
        if key is None:
            message = "a valid API key is required: send `Authorization: Bearer KEY` (or `X-API-Key: KEY`)"
            return 401, "unauthorized", message, {"WWW-Authenticate": "Bearer"}
        wait_s = state.limiter.check(key.name)
        if wait_s is not None:
            seconds = max(1, int(wait_s + 0.999))
            message = f"the API key {key.name!r} is over its rate; retry in {seconds} s"
            return 429, "rate_limited", message, {"Retry-After": str(seconds)}
        sole = next(iter(key.users)) if not key.admin and len(key.users) == 1 else None
        user = asked or sole
        if user is None:
            message = f"the API key {key.name!r} reaches several users: name one in the X-MemoryScope-User header"
            return 400, "user_required", message, {}
        if not key.permits(user, ""):
            message = f"the API key {key.name!r} may not reach user {user!r}; use a key scoped to them"
            return 403, "forbidden", message, {}
        return str(user)


def _presented_key(headers: dict[str, str]) -> str | None:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return headers.get("x-api-key", "").strip() or None


async def _error(send: Send, status: int, code: str, message: str, extra: dict[str, str]) -> None:
    body = json.dumps({"error": {"code": code, "message": message, "type": _TYPES.get(status, "error")}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
