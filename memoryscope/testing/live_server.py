"""A real uvicorn server on 127.0.0.1 in a background thread, for tests and benchmarks.

    with LiveServer(create_app(scope)) as live:
        requests.get(f"{live.url}/healthz")

The socket is bound before the thread starts (port 0: a free one), so `url` is known at once
and a client never races the server's start. `stop()` asks uvicorn to exit as a signal to
`memoryscope serve` would (stop accepting; requests in flight and background operations get
`shutdown_timeout_s`, by default the app's `server.shutdown_timeout_s`; then the app's shutdown
runs) and waits for it; it raises if the server is still running after `timeout_s`.
Needs the server extra (`pip install 'memoryscope[server]'`).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

__all__ = ["LiveServer"]


class LiveServer:
    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        start_timeout_s: float = 20.0,
        shutdown_timeout_s: float | None = None,
    ) -> None:
        self.app = app
        self.host = host
        self.requested_port = port
        self.start_timeout_s = start_timeout_s
        served = getattr(getattr(app, "state", None), "memoryscope", None)  # an app `create_app` made
        default = served.settings.shutdown_timeout_s if served is not None else 10.0
        self.shutdown_timeout_s = default if shutdown_timeout_s is None else shutdown_timeout_s
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def port(self) -> int:
        if self._socket is None:
            raise RuntimeError("LiveServer is not running; use `with LiveServer(app) as live:`")
        return int(self._socket.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> LiveServer:
        from memoryscope.server.running import graceful_server

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.requested_port))
        self._socket = sock
        self._server = graceful_server(
            self.app, log_level="warning", lifespan="on", timeout_graceful_shutdown=self.shutdown_timeout_s
        )
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, name="live-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server did not start within {self.start_timeout_s:g}s")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop gracefully and wait; RuntimeError when the server still runs after `timeout_s`
        (it is then told to exit at once, skipping the app's shutdown)."""
        server, thread, sock = self._server, self._thread, self._socket
        self._server = self._thread = self._socket = None
        if server is not None:
            server.should_exit = True
        stuck = False
        if thread is not None:
            thread.join(timeout_s)
            if thread.is_alive() and server is not None:
                stuck = True
                server.force_exit = True
                thread.join(5.0)
        if sock is not None:
            sock.close()
        if stuck:
            raise RuntimeError(f"the server did not stop within {timeout_s:g}s; it was told to exit at once")

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
