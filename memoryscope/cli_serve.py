"""`memoryscope serve`: the configured memory service over HTTP (see `memoryscope.server`).

    memoryscope serve --config default                        # http://127.0.0.1:8000, docs at /docs
    memoryscope serve --config my.yaml --host 0.0.0.0 --port 8080 --workers 2
    memoryscope serve --hash-key                              # the sha256 of a key read from stdin

Host, port and everything else default to the config's `server:` section. Without API keys
(`server.api_keys_file`) the server refuses to bind anything but loopback unless `--insecure`
says that is meant. Ctrl-C or SIGTERM stops it gracefully: no new connections; requests in flight
and background operations get `server.shutdown_timeout_s` to finish (counted from the signal),
after which requests are answered 503 and operations abandoned before their atomic write; exit
status 0. (An abandoned operation's current step, a model call, still holds the process until
it returns; it writes nothing.) With `--workers N`, uvicorn's own workers stop the same way,
except that their background operations get the time only once their requests are done.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from memoryscope.errors import MemoryScopeError

__all__ = ["add_serve_commands", "is_loopback", "graceful_server"]


def add_serve_commands(commands: Any) -> None:
    serve = commands.add_parser("serve", help="serve the memory service over HTTP (REST, OpenAI-compatible chat)")
    serve.add_argument("--config", default="default", help="config name or path (default: default)")
    serve.add_argument("--host", default=None, help="address to listen on (default: server.host, 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default: server.port, 8000)")
    serve.add_argument("--store", default=None, help="SQLite file to use instead of the config's")
    serve.add_argument("--workers", type=int, default=1, help="server processes (uvicorn workers); each builds the config")
    serve.add_argument("--insecure", action="store_true", help="allow a non-loopback address without API keys")
    serve.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    serve.add_argument("--hash-key", action="store_true", help="print the sha256 of a key read from stdin, for a keys file")
    serve.set_defaults(handler=_serve)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _serve(args: argparse.Namespace) -> int:
    if args.hash_key:
        from memoryscope.server.access import hash_key

        key = sys.stdin.readline().strip()
        if not key:
            raise MemoryScopeError("--hash-key reads the key from stdin: echo -n KEY | memoryscope serve --hash-key")
        print(hash_key(key))
        return 0
    if args.workers < 1:
        raise MemoryScopeError(f"--workers must be 1 or more, got {args.workers}")
    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError as error:
        raise MemoryScopeError(
            f"`memoryscope serve` needs the server extra ({error.name} is missing): pip install 'memoryscope[server]'"
        ) from None

    from memoryscope.config.loading import load_config
    from memoryscope.server.app import SERVE_ENV, create_app, keys_for

    overrides = {"memory_store.path": args.store} if args.store else {}
    config = load_config(args.config, overrides or None)
    settings = config.server
    host = args.host or settings.host
    port = settings.port if args.port is None else args.port
    keys = keys_for(config.source, settings)  # read now: a bad keys file fails before anything starts
    if not keys and not is_loopback(host) and not args.insecure:
        raise MemoryScopeError(
            f"refusing to serve on {host} without API keys: anyone who reaches it could read every user's memories. "
            "Name a keys file in server.api_keys_file, bind 127.0.0.1, or pass --insecure if this is meant"
        )
    logging.getLogger("memoryscope").setLevel(args.log_level.upper())
    options: dict[str, Any] = {
        "host": host, "port": port, "log_level": args.log_level,
        "timeout_graceful_shutdown": settings.shutdown_timeout_s, "timeout_keep_alive": settings.keep_alive_s,
    }  # fmt: skip
    if args.workers > 1:
        os.environ[SERVE_ENV] = json.dumps({"config": args.config, "overrides": overrides})
        uvicorn.run("memoryscope.server.app:app_from_environment", factory=True, workers=args.workers, **options)
        return 0
    from memoryscope.app import MemoryScope

    scope = MemoryScope(config=config)
    try:
        app = create_app(scope, keys=keys)
    except BaseException:
        scope.close()
        raise
    print(f"memoryscope: serving {config.source} on http://{host}:{port} (API docs at /docs)", file=sys.stderr, flush=True)
    try:
        graceful_server(app, **options).run()
    finally:
        scope.close()  # the app's shutdown closed it already, unless the server never started (a port in use)
    return 0


def graceful_server(app: Any, **options: Any) -> Any:
    """A `uvicorn.Server` for `app` (options are `uvicorn.Config`'s) that stops as `memoryscope
    serve` promises: `begin_shutdown(app)` as soon as it stops taking requests, so background
    operations get their time while the requests in flight finish; a request still running when
    `timeout_graceful_shutdown` is over gets a JSON 503 `shutting_down`; and a graceful stop by a
    signal exits 0. That timeout and `timeout_keep_alive` default to the app's `server:` settings.
    (uvicorn raises the signal again once it has shut down, which kills the process by it: status
    -15 for SIGTERM, a KeyboardInterrupt traceback for Ctrl-C; and a request it cuts off gets a
    plain-text 500 and a traceback in the log.)"""
    import uvicorn
    from uvicorn.server import HANDLED_SIGNALS

    from memoryscope.server.app import begin_shutdown

    served = getattr(getattr(app, "state", None), "memoryscope", None)  # an app `create_app` made
    if served is not None:
        options.setdefault("timeout_graceful_shutdown", served.settings.shutdown_timeout_s)
        options.setdefault("timeout_keep_alive", served.settings.keep_alive_s)
    cut_off = _CutOff(app)

    class GracefulServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
                yield
                return
            previous = {number: signal.signal(number, self.handle_exit) for number in HANDLED_SIGNALS}
            try:
                yield
            finally:
                for number, handler in previous.items():
                    signal.signal(number, handler)

        async def shutdown(self, sockets: Any = None) -> None:
            begin_shutdown(app)
            cut_off.shutting_down = True
            await super().shutdown(sockets)

    return GracefulServer(uvicorn.Config(cut_off, **options))


class _CutOff:
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
                from memoryscope.server.errors import error_body

                message = "the server is shutting down and this request did not finish in time; try again"
                body = json.dumps(error_body(503, "shutting_down", message)).encode()
                headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
                await send({"type": "http.response.start", "status": 503, "headers": headers})
                await send({"type": "http.response.body", "body": body})
