"""Running the app with uvicorn as `memoryscope serve` promises (used by the CLI and `LiveServer`)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

from memoryscope.server.app import begin_shutdown
from memoryscope.server.middleware import CutOff

__all__ = ["graceful_server"]


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

    served = getattr(getattr(app, "state", None), "memoryscope", None)  # an app `create_app` made
    if served is not None:
        options.setdefault("timeout_graceful_shutdown", served.settings.shutdown_timeout_s)
        options.setdefault("timeout_keep_alive", served.settings.keep_alive_s)
    cut_off = CutOff(app)

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
