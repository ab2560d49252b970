"""`/mcp` of the app, with the MCP SDK imported only when a client first calls it.

The SDK (`mcp`, with the libraries it brings: `rich`, `jsonschema`, `sse_starlette`, ...) took
~0.4 s of CPU to import, a third of `memoryscope serve`'s start before `/healthz` answered; a
server whose clients never speak MCP should not wait for it. So `create_app` routes `/mcp` to an
`McpEndpoint` (`install`), which checks each request as every `/v1` endpoint does (a valid key:
401; its rate: 429; the user the key reaches: 403, 422) before anything of the SDK is needed.
The first request that passes has the MCP server built (`routes_mcp.build_for`, which imports
the SDK) on a worker thread, so the event loop keeps answering meanwhile; its session manager
then runs inside the app's lifespan until shutdown, as it would have from the start.
`routes_mcp.mount_mcp` builds it at once instead (for a caller that wants the server object).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from fastapi import FastAPI, Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from memoryscope.server.errors import ApiError
from memoryscope.server.middleware import send_json_error
from memoryscope.server.routes_chat import USER_HEADER
from memoryscope.server.state import ServerState, caller

__all__ = ["MCP_PATH", "McpEndpoint", "USER_KEY"]

MCP_PATH = "/mcp"
USER_KEY = "memoryscope.mcp_user"  # where the checked user rides in the request's ASGI scope
_log = logging.getLogger("memoryscope.server")


class McpEndpoint:
    """The ASGI app at `/mcp`: the caller's checks and user, then the SDK's handler, built at
    the first request that passes unless `use` gave it a built server first."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build  # () -> an MCP server whose session manager is made (imports the SDK)
        self.server: Any = None  # the MCP server, once built
        self._events: tuple[anyio.Event, anyio.Event] | None = None  # (wanted, ready) while the app runs
        self._handle: Callable[[Scope, Receive, Send], Any] | None = None
        self._failure: BaseException | None = None

    @classmethod
    def install(cls, app: FastAPI, state: ServerState) -> McpEndpoint:
        """The app's endpoint, routed at `/mcp` and run by the app's lifespan (not yet started);
        a second call returns the first one's."""
        installed = getattr(app.state, "memoryscope_mcp_endpoint", None)
        if isinstance(installed, McpEndpoint):
            return installed
        endpoint = cls(lambda: _built_for(state))
        app.router.routes.append(Route(MCP_PATH, endpoint=endpoint, methods=["GET", "POST", "DELETE"]))
        served = app.router.lifespan_context

        @asynccontextmanager
        async def lifespan(running: Any) -> AsyncIterator[Any]:
            async with served(running) as value, endpoint.running():  # MCP sessions end before the scope closes
                yield value

        app.router.lifespan_context = lifespan
        app.state.memoryscope_mcp_endpoint = endpoint
        return endpoint

    def use(self, server: Any) -> Any:
        """Serve `server` (built already, its session manager made) instead of building one;
        returns the server this endpoint serves (the first one given)."""
        if self.server is None:
            self.server = server
        return self.server

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """For the app's lifespan: the session manager runs in here, from the first request on."""
        wanted, ready, stopping = anyio.Event(), anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(self._host, wanted, ready, stopping)
            self._events = (wanted, ready)
            try:
                yield
            finally:
                self._events = None
                stopping.set()
                wanted.set()  # a host still waiting for its first request returns

    async def _host(self, wanted: anyio.Event, ready: anyio.Event, stopping: anyio.Event) -> None:
        """Once a request wants it: build the server unless given one, run its session manager
        until `stopping`; `ready` either way (with `_handle` unset when it could not start)."""
        await wanted.wait()
        try:
            if not stopping.is_set():
                if self.server is None:
                    # imports the SDK (~0.4 s): on a worker thread, so other requests are answered meanwhile
                    self.use(await anyio.to_thread.run_sync(self._build))
                manager = self.server.session_manager
                async with manager.run():
                    self._handle = manager.handle_request
                    ready.set()
                    await stopping.wait()
        except Exception as error:  # a broken install must fail `/mcp` calls, not stop the server
            _log.exception("the MCP endpoint could not start")
            self._failure = error
        finally:
            self._handle = None
            ready.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            scope[USER_KEY] = _user_of(Request(scope, receive))
        except ApiError as refused:
            await send_json_error(send, refused)
            return
        events = self._events
        if events is None:
            raise RuntimeError("the MCP endpoint runs inside its app's lifespan: serve the app with uvicorn")
        wanted, ready = events
        wanted.set()
        await ready.wait()
        if self._handle is None:
            raise RuntimeError("the MCP endpoint is not available (see the server's log)") from self._failure
        await self._handle(scope, receive, send)


def _built_for(state: ServerState) -> Any:
    from memoryscope.server.routes_mcp import build_for  # the MCP SDK, imported at the first MCP call

    return build_for(state)


def _user_of(request: Request) -> str:
    who = caller(request)  # 401 / 429 as for every endpoint
    state = request.app.state.memoryscope
    return who.for_user(state, request.headers.get(USER_HEADER), default_user=True).user_id
