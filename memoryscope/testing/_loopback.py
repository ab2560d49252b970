"""What the fake servers share: real HTTP on a local port, served from a daemon thread.

A `LoopbackServer` starts on `host:port` (port 0 picks a free one), stops, works as a context
manager and knows its `port` and `url`. Its handler class derives from `LoopbackHandler`, which
finds the server as `self.owner`, keeps quiet and tracks its connection.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, TypeVar

__all__ = ["LoopbackHandler", "LoopbackServer", "serve_until_interrupted"]

_Server = TypeVar("_Server", bound="LoopbackServer")


class LoopbackServer:
    """The lifecycle of one fake server; subclasses name their handler and thread."""

    handler_class: ClassVar[type[LoopbackHandler]]
    thread_name: ClassVar[str]
    listen_backlog: ClassVar[int] = 5  # the socketserver default
    close_connections_on_stop: ClassVar[bool] = False  # shut idle keep-alive connections down in `stop()`

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.requested_port = port
        self._stopping = threading.Event()  # set by `stop()`: wakes handlers that wait on it
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        self._httpd: _LoopbackHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self: _Server) -> _Server:
        if self._httpd is not None:
            raise RuntimeError(f"{type(self).__name__} is already running")
        self._stopping.clear()
        httpd = _LoopbackHTTPServer((self.host, self.requested_port), self.handler_class, bind_and_activate=False)
        httpd.owner = self
        httpd.request_queue_size = self.listen_backlog
        try:
            httpd.server_bind()
            httpd.server_activate()
        except BaseException:
            httpd.server_close()
            raise
        self._httpd = httpd
        # a short poll interval: `stop()` waits up to one interval for the serving loop to notice
        self._thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        if self.close_connections_on_stop:
            with self._connections_lock:
                for connection in list(self._connections):  # idle keep-alive connections: wake their threads
                    with contextlib.suppress(OSError):
                        connection.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self: _Server) -> _Server:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            name = type(self).__name__
            raise RuntimeError(f"{name} is not running; use `with {name}() as server:`")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


class _LoopbackHTTPServer(ThreadingHTTPServer):
    owner: LoopbackServer | None = None  # the fake whose state the handlers read


class LoopbackHandler(BaseHTTPRequestHandler):
    """Finds its fake as `owner`; logs nothing; its connection is known to the fake while open."""

    disable_nagle_algorithm = True  # headers and body are separate writes: avoid a 40 ms delayed-ACK stall

    @property
    def owner(self) -> Any:
        server = self.server
        if not isinstance(server, _LoopbackHTTPServer) or server.owner is None:
            raise RuntimeError(f"{type(self).__name__} serves only a LoopbackServer")
        return server.owner

    def log_message(self, format: str, *args: Any) -> None:  # `format`: the base class names it so
        """Silent: tests read `server.requests` instead of stderr."""

    def setup(self) -> None:
        super().setup()
        owner = self.owner
        with owner._connections_lock:
            owner._connections.add(self.connection)

    def finish(self) -> None:
        owner = self.owner
        with owner._connections_lock:
            owner._connections.discard(self.connection)
        super().finish()


def serve_until_interrupted(server: LoopbackServer, announcement: str) -> None:
    """For `python -m ...`: run `server`, print `announcement` and serve until Ctrl-C."""
    with server:
        try:
            print(announcement.format(server=server), flush=True)
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
