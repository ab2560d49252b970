"""A real uvicorn server on 127.0.0.1 in a background thread, for tests and benchmarks.

    with LiveServer(create_app(scope)) as live:
        requests.get(f"{live.url}/healthz")

The socket is bound before the thread starts (port 0: a free one), so `url` is known at once
and a client never races the server's start. `stop()` asks uvicorn to exit as a signal would
(stop accepting, let requests in flight finish, run the app's shutdown) and waits for it.
Needs the server extra (`pip install 'memoryscope[server]'`).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

__all__ = ["LiveServer"]


class LiveServer:
    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, *, start_timeout_s: float = 20.0) -> None:
        self.app = app
        self.host = host
        self.requested_port = port
        self.start_timeout_s = start_timeout_s
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
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.requested_port))
        self._socket = sock
        config = uvicorn.Config(self.app, log_level="warning", lifespan="on", timeout_graceful_shutdown=None)
        self._server = uvicorn.Server(config)
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
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
