"""The FastAPI application of `memoryscope serve`.

    scope = MemoryScope("default")
    app = create_app(scope)                     # serve it with uvicorn; the app closes the scope on shutdown

`create_app` mounts the REST API (`/v1/users/{user}/...`, `/v1/memories/{id}`), the
OpenAI-compatible chat (`/v1/chat/completions`, `/v1/models`), `/healthz`, `/readyz`,
`/metrics`, the MCP tools at `/mcp` (the MCP SDK imported at the first call, `mcp_endpoint`)
and the web playground at `/`; OpenAPI is at `/docs`.
Requests pass three checks before any handler: what a web page of another site could make a
browser send is refused (`browser_guard`: the Host, the Origin of a change, a form's content
type), a body larger than `server.max_body_bytes` is refused with 413 (by its Content-Length, or
as it streams in), and every request is counted and timed per route for `/metrics`. On shutdown the scope is closed:
its schedulers stop taking work and a background operation still running gets
`server.shutdown_timeout_s` to finish, after which it is abandoned before its atomic write; the
store is closed once the requests in flight are done. The servers MemoryScope runs (`memoryscope
serve`, `LiveServer`) call `begin_shutdown` when they stop taking requests, so that time counts
from then, not from when the last request ended.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from memoryscope import __version__
from memoryscope.app import MemoryScope
from memoryscope.config.server_settings import ServerSettings
from memoryscope.server import routes_chat, routes_health, routes_mem0, routes_memory, routes_ops, routes_playground
from memoryscope.server.access import KeyRing
from memoryscope.server.browser_guard import BrowserGuard, HostPolicy
from memoryscope.server.errors import install_error_handlers
from memoryscope.server.limits import RateLimiter
from memoryscope.server.mcp_endpoint import McpEndpoint
from memoryscope.server.metrics import ServerMetrics
from memoryscope.server.middleware import BodyLimit, EncodedSlashGuard, RequestMetrics
from memoryscope.server.state import ServerState

__all__ = ["create_app", "keys_for", "app_from_environment", "begin_shutdown", "SERVE_ENV"]

logger = logging.getLogger("memoryscope.server")
SERVE_ENV = "MEMORYSCOPE_SERVE_CONFIG"  # what `memoryscope serve --workers N` hands each worker process


def create_app(
    scope: MemoryScope,
    *,
    settings: ServerSettings | None = None,
    keys: KeyRing | None = None,
    close_scope_on_shutdown: bool = True,
) -> FastAPI:
    """The application serving `scope`; `settings` default to the config's `server:` section,
    `keys` to the keys file it names (none: every caller may do everything)."""
    settings = settings or scope.config.server
    if keys is None:
        keys = keys_for(scope.config.source, settings)
    state = ServerState(
        scope=scope,
        settings=settings,
        keys=keys,
        limiter=RateLimiter(settings.rate_limit_per_minute),
        metrics=ServerMetrics(),
        service=scope.services[settings.service] if settings.service else scope.default_service,
        chat=scope.chats.get(settings.chat) if settings.chat else next(iter(scope.chats.values()), None),
    )

    policy = HostPolicy(settings.host, settings.allowed_hosts, (*settings.allowed_origins, *settings.cors_origins))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        for line in keys.describe() if keys else ["no API keys: every caller may reach every user"]:
            logger.info("access: %s", line)
        for line in policy.describe():
            logger.info("access: %s", line)
        shutdown = _ScopeShutdown(scope, settings.shutdown_timeout_s) if close_scope_on_shutdown else None
        app.state.memoryscope_shutdown = shutdown
        yield
        state.accepted.close()  # writes accepted but not begun are dropped: their clients send them again
        if shutdown is not None:
            # off the event loop: waiting for a background operation must not block the loop
            await asyncio.to_thread(shutdown.finish)

    app = FastAPI(
        title="MemoryScope",
        version=__version__,
        description="Long-term memory for LLM chatbots and agents: store conversations, retrieve memories, "
        "chat with memory (OpenAI-compatible). Send `Authorization: Bearer KEY` when the server has API keys.",
        lifespan=lifespan,
    )
    app.state.memoryscope = state
    install_error_handlers(app)
    for router in (routes_health.router, routes_memory.router, routes_ops.router, routes_chat.router, routes_mem0.router):
        app.include_router(router)
    if settings.playground:
        app.include_router(routes_playground.router)
    _mount_mcp_if_installed(app, state)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_methods=["*"], allow_headers=["*"])
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(EncodedSlashGuard)
    app.add_middleware(BrowserGuard, policy=policy)
    app.add_middleware(RequestMetrics, metrics=state.metrics)
    return app


def _mount_mcp_if_installed(app: FastAPI, state: ServerState) -> None:
    """The MCP tools over streamable HTTP at `/mcp`, key-scoped like the rest, when the `mcp`
    extra is installed; the SDK itself is imported at the first MCP call (`mcp_endpoint`)."""
    if importlib.util.find_spec("mcp") is not None:  # not installed: no /mcp endpoint
        McpEndpoint.install(app, state)


def begin_shutdown(app: Any) -> None:
    """The server has stopped taking requests: start stopping the scope's background operations
    now, while the requests in flight finish (returns at once). Anything but a started app that
    `create_app` made, closing its scope, is left alone."""
    shutdown = getattr(getattr(app, "state", None), "memoryscope_shutdown", None)
    if isinstance(shutdown, _ScopeShutdown):
        shutdown.begin()


class _ScopeShutdown:
    """A served scope closed in two steps: its schedulers as soon as the server stops taking
    requests (`begin`), the rest once the requests in flight are done (`finish`): they still
    run frontend operations and store chat turns."""

    def __init__(self, scope: MemoryScope, timeout_s: float) -> None:
        self.scope = scope
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._stopping: threading.Thread | None = None

    def begin(self) -> None:
        with self._lock:
            if self._stopping is not None:
                return
            logger.info("shutting down: background operations get %gs to finish", self.timeout_s)
            self._stopping = threading.Thread(target=self._stop_schedulers, name="memoryscope-shutdown", daemon=True)
            self._stopping.start()

    def finish(self) -> None:
        self.begin()
        if self._stopping is not None:
            self._stopping.join()
        self.scope.close(timeout=self.timeout_s)  # its schedulers are closed: nothing is waited for twice

    def _stop_schedulers(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        for service in self.scope.services.values():
            service.scheduler.close(max(deadline - time.monotonic(), 0.0))


def keys_for(config_source: str, settings: ServerSettings) -> KeyRing:
    """The keys file the settings name, read relative to the config file's folder."""
    if not settings.api_keys_file:
        return KeyRing.of()
    path = Path(settings.api_keys_file).expanduser()
    if not path.is_absolute():
        source = Path(config_source)
        base = source.parent if source.suffix in (".yaml", ".yml", ".json") and source.exists() else Path.cwd()
        path = base / path
    return KeyRing.load(path)


def app_from_environment() -> FastAPI:
    """The app for one of several uvicorn worker processes: each builds its own scope from the
    config `memoryscope serve` named (in `MEMORYSCOPE_SERVE_CONFIG`, a JSON object)."""
    import json

    given = json.loads(os.environ[SERVE_ENV])
    # a worker process starts with logging unset: log as the parent `memoryscope` command does
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("memoryscope").setLevel(str(given.get("log_level") or "info").upper())
    scope = MemoryScope(given["config"], overrides=given.get("overrides") or None)
    return create_app(scope)
