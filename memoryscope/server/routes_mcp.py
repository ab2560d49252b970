"""`/mcp`: the MCP tools (`memoryscope.mcp`) over streamable HTTP, behind the REST API's checks.

    app = create_app(scope)                      # mounts it when the mcp extra is installed
    mount_mcp(app, app.state.memoryscope)        # by hand: before the app starts (it joins the lifespan)

Each request passes the same checks as every `/v1` endpoint (`memoryscope.server.state.caller`):
a valid key when keys are configured (401), its rate (429). Its user is the key's sole user, else
the `X-MemoryScope-User` header, which the key must reach (403; 400 when a key reaching several
users names none); without keys, that header or the service's `human_name`. No tool argument
names a user, so a model cannot reach anyone else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from mcp.server.mcpserver import Context, MCPServer
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from memoryscope.errors import MemoryScopeError
from memoryscope.mcp.server import build_mcp
from memoryscope.server.errors import ApiError
from memoryscope.server.middleware import send_json_error
from memoryscope.server.routes_chat import USER_HEADER
from memoryscope.server.state import ServerState, caller

__all__ = ["mount_mcp", "MCP_PATH"]

MCP_PATH = "/mcp"
_USER_KEY = "memoryscope.mcp_user"  # where the checked user rides in the request's ASGI scope


def mount_mcp(app: FastAPI, state: ServerState) -> MCPServer:
    """Serve `state.scope` over MCP at `/mcp` of `app` (not yet started); its session manager runs
    inside the app's lifespan. A second call on the same app returns the first one's server."""
    mounted = getattr(app.state, "memoryscope_mcp", None)
    if isinstance(mounted, MCPServer):
        return mounted
    server = build_mcp(state.scope, request_user, door=state.door)
    # builds the session manager; the Starlette app it returns is not used: the route below serves it, behind the keys
    server.streamable_http_app(streamable_http_path=MCP_PATH, host=state.settings.host)
    manager = server.session_manager
    app.router.routes.append(Route(MCP_PATH, endpoint=_KeyScoped(manager.handle_request), methods=["GET", "POST", "DELETE"]))
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
    """The ASGI app at `/mcp`: the caller's checks and user, then the SDK's handler."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            scope[_USER_KEY] = _user_of(Request(scope, receive))
        except ApiError as refused:
            await send_json_error(send, refused)
            return
        await self.handle(scope, receive, send)


def _user_of(request: Request) -> str:
    who = caller(request)  # 401 / 429 as for every endpoint
    state = request.app.state.memoryscope
    return who.for_user(state, request.headers.get(USER_HEADER), default_user=True).user_id
