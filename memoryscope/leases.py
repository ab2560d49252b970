"""Leases in the store: one backend operation per user at a time across processes sharing a store.

The scheduler's per-user lock holds within one process; two processes (two chat servers, a CLI
run beside a service) share only the store. So before a backend operation runs, the scheduler
takes the store's lease for the user (`MemoryStore.acquire_lease`): a named row (SQLite) or
document (Elasticsearch) with a holder and an expiry. The holder renews it while the run goes
on; a holder that was killed stops renewing, so its lease expires after `ttl_s` and never
blocks the user for good.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from memoryscope.errors import MemoryScopeError, StoreError

if TYPE_CHECKING:
    from memoryscope.stores.base import MemoryStore

__all__ = ["LeaseBusy", "holder_id", "lease_name", "held_lease"]

logger = logging.getLogger("memoryscope.leases")

_POLL_S = 0.2


class LeaseBusy(MemoryScopeError):
    """Another process holds the lease and did not give it up in time."""


def holder_id() -> str:
    """Who holds a lease: this host and process, and a random part (one per scheduler)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lease_name(user_name: str, target_name: str = "", workspace: str = "") -> str:
    """The lease of one user's backend work (in one target and workspace)."""
    return "backend:" + "\x1f".join((user_name, target_name, workspace))


@contextmanager
def held_lease(
    store: MemoryStore, name: str, holder: str, *, ttl_s: float, wait_s: float = 0.0, renew: Callable[[], bool] | None = None
) -> Iterator[None]:
    """Hold lease `name` while the body runs, renewing it every `ttl_s / 3` seconds (while
    `renew()` says so: a run given up on stops renewing, so a lease released for it stays free).

    Waits up to `wait_s` seconds while another holder has it, then raises LeaseBusy.
    """
    deadline = time.monotonic() + wait_s
    while not store.acquire_lease(name, holder, ttl_s):
        if time.monotonic() >= deadline:
            raise LeaseBusy(f"another process is running a backend operation ({_label(name)}); try again later")
        time.sleep(min(_POLL_S, max(deadline - time.monotonic(), 0.0)))
    stop = threading.Event()
    renewer = threading.Thread(
        target=_renew, args=(store, name, holder, ttl_s, stop, renew), name="memoryscope-lease", daemon=True
    )
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        renewer.join()
        try:
            store.release_lease(name, holder)
        except StoreError as error:  # e.g. the store was closed under a run given up on: it ages out instead
            logger.warning("could not release lease %r: %s", name, error)


def _label(name: str) -> str:
    user, target, workspace = name.split(":", 1)[1].split("\x1f")
    extra = [f"{kind} {value}" for kind, value in (("target", target), ("workspace", workspace)) if value]
    return f"user {user!r}" + (f" [{', '.join(extra)}]" if extra else "")


def _renew(
    store: MemoryStore, name: str, holder: str, ttl_s: float, stop: threading.Event, renew: Callable[[], bool] | None
) -> None:
    while not stop.wait(ttl_s / 3):
        if renew is not None and not renew():
            return
        try:
            if not store.acquire_lease(name, holder, ttl_s):
                logger.warning("lease %r was taken over while its run went on (it had expired)", name)
                return
        except Exception as error:  # a store hiccup must not kill the run; the lease just ages
            logger.warning("could not renew lease %r: %s", name, error)
