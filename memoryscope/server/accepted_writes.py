"""Large writes accepted now and done in the background: `POST .../messages?wait=false` (and
`.../memories`) answers 202 at once, and the write runs on a small pool of its own, apart from
the threads that answer requests, so a 400 KB add neither holds its client past its timeout nor
takes a request thread from other users.

Every accepted write has an idempotency key: the client's `Idempotency-Key` header, or one made
here and returned. The door gives each message of the request an id from it (`KEY#i`), so the
same request sent again — after a timeout, or with `wait=true` to learn the outcome — stores
nothing twice (`memoryscope.door.Door.add`). The door keeps each accepted write's outcome in the
store (`accept_write`, `finish_write`): `GET /v1/users/{user}/writes/{key}` says `accepted`,
`done` (with the ids stored) or `failed` (with the failure's code), from any process.

A write still running when the server stops is abandoned with it, before its atomic store; the
client sends the same request again, with its key, to have it done.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["AcceptedWrites", "idempotency_key_of"]

logger = logging.getLogger("memoryscope.server")
_WORKERS = 2  # writes in the background at once; the rest wait their turn


def idempotency_key_of(given: str | None, wait: bool) -> str | None:
    """The request's key: the client's, else a new one for a write done in the background (None
    for a write the client waits for without naming it)."""
    if given is not None and given.strip():
        return given.strip()
    return None if wait else uuid.uuid4().hex


class AcceptedWrites:
    """The background pool of one server (made on first use, stopped with the server)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[str, str] = {}  # idempotency key -> "user: what", while it runs

    def is_running(self, key: str) -> bool:
        """Whether a write with this key is accepted here and not finished yet."""
        with self._lock:
            return key in self._pending

    def submit(self, key: str, what: str, write: Callable[[], Any]) -> bool:
        """Run `write` in the background; False when a write with this key is running already."""
        with self._lock:
            if key in self._pending:
                return False
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="memoryscope-write")
            self._pending[key] = what
            self._pool.submit(self._run, key, what, write)
        return True

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _run(self, key: str, what: str, write: Callable[[], Any]) -> None:
        try:
            write()
        except Exception as error:  # the client learns it by sending the request again with wait=true
            logger.warning("an accepted write (%s, idempotency key %s) failed: %s", what, key, error)
        finally:
            with self._lock:
                self._pending.pop(key, None)
