"""`memoryscope serve`: the configured memory service over HTTP (see `memoryscope.server`).

    memoryscope serve --config default                        # http://127.0.0.1:8000, docs at /docs
    memoryscope serve --config my.yaml --host 0.0.0.0 --port 8080 --workers 2
    memoryscope serve --hash-key                              # the sha256 of a key read from stdin

Host, port and everything else default to the config's `server:` section. A port out of range
(0-65535), in use or reserved for root is refused before anything is built, naming `--port` (or
`server.port`) and a free port to use instead. Without API keys
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
import errno
import ipaddress
import json
import logging
import os
import socket
import sys
from typing import Any

from memoryscope.errors import MemoryScopeError

__all__ = ["add_serve_commands", "is_loopback"]


def add_serve_commands(commands: Any) -> None:
    serve = commands.add_parser("serve", help="serve the memory service over HTTP (REST, OpenAI-compatible chat)")
    serve.add_argument("--config", default="default", help="config name or path (default: default)")
    serve.add_argument("--host", default=None, help="address to listen on (default: server.host, 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=None, help="port, 0 to 65535; 0: any free one (default: server.port, 8000)")
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
    from memoryscope.server.running import graceful_server

    overrides = {"memory_store.path": args.store} if args.store else {}
    if args.host:
        overrides["server.host"] = args.host  # the app answers for the name it is bound to
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
    named = f"--port {port}" if args.port is not None else f"server.port {port} ({config.source})"
    check_port_free(host, port, named)
    logging.getLogger("memoryscope").setLevel(args.log_level.upper())
    options: dict[str, Any] = {
        "host": host, "port": port, "log_level": args.log_level,
        "timeout_graceful_shutdown": settings.shutdown_timeout_s, "timeout_keep_alive": settings.keep_alive_s,
    }  # fmt: skip
    if args.workers > 1:
        os.environ[SERVE_ENV] = json.dumps({"config": args.config, "overrides": overrides, "log_level": args.log_level})
        print(_banner(config.source, host, port, args.workers), file=sys.stderr, flush=True)
        uvicorn.run("memoryscope.server.app:app_from_environment", factory=True, workers=args.workers, **options)
        return 0
    from memoryscope.app import MemoryScope

    scope = MemoryScope(config=config)
    try:
        app = create_app(scope, keys=keys)
    except BaseException:
        scope.close()
        raise
    print(_banner(config.source, host, port, 1), file=sys.stderr, flush=True)
    try:
        graceful_server(app, **options).run()
    finally:
        scope.close()  # the app's shutdown closed it already, unless the server never started (a port in use)
    return 0


def _port(text: str) -> int:
    """`--port`'s value: a whole number from 0 to 65535 (argparse names the flag in its error)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to 65535 (0: any free port), got {text!r}")
    return value


def check_port_free(host: str, port: int, named: str) -> None:
    """Refuse, before anything is built, a port this process cannot listen on: in use (with a
    free one to use instead), reserved for root, or an address this machine does not have.
    `named`: how the user gave the port (`--port 8000`, `server.port 8000 (my.yaml)`)."""
    if port == 0:
        return
    try:
        _bind_and_release(host, port)
    except OSError as error:
        where = f"{host}:{port}"
        if error.errno == errno.EADDRINUSE:
            free = _free_port_near(host, port)
            instead = f"--port {free}" if free else "--port 0 (any free port)"
            raise MemoryScopeError(
                f"{named}: {where} is in use (another server?); stop it, or serve on another port: {instead}"
            ) from None
        if error.errno == errno.EACCES:
            raise MemoryScopeError(
                f"{named}: ports below 1024 need root; pick one from 1024 to 65535, e.g. --port 8000"
            ) from None
        if error.errno == errno.EADDRNOTAVAIL or isinstance(error, socket.gaierror):
            raise MemoryScopeError(
                f"--host {host}: not an address of this machine ({error.strerror or error}); "
                "use 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)"
            ) from None
        raise MemoryScopeError(f"{named}: cannot listen on {where}: {error.strerror or error}") from None


def _bind_and_release(host: str, port: int) -> None:
    """Bind every address `host` stands for at `port`, as uvicorn will (SO_REUSEADDR), then let go."""
    for family, kind, proto, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE):
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
            probe.listen()
        return  # uvicorn listens on the first address


def _free_port_near(host: str, port: int) -> int | None:
    """A port after `port` that is free now, to suggest (None if the next few are all taken)."""
    for candidate in range(port + 1, min(port + 20, 65535) + 1):
        try:
            _bind_and_release(host, candidate)
        except OSError:
            continue
        return candidate
    return None


def _banner(source: str, host: str, port: int, workers: int) -> str:
    processes = f" in {workers} processes" if workers > 1 else ""
    return f"memoryscope: serving {source} on http://{host}:{port}{processes} (API docs at /docs)"
