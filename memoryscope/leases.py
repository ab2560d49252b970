"""Leases in the store: one backend operation per user at a time across processes sharing a store.

The scheduler's per-user lock holds within one process; two processes (two chat servers, a CLI
run beside a service) share only the store. So before a backend operation runs, the scheduler
takes the store's lease for the user (`MemoryStore.acquire_lease`): a named row (SQLite) or
document (Elasticsearch) with a holder and an expiry. The holder renews it while the run goes
on; a holder that was killed stops renewing, so its lease expires after `ttl_s` and never
blocks the user for good.

A holder killed on this very host need not be waited out: the holder id names the host (with
its process namespace), the process id and the process's start time (`holder_id`), so
`holder_gone` can tell that the process is gone, or that its id now belongs to a newer process,
and the next run takes its lease over at once. A holder on another host, or one whose process
cannot be judged, is waited out as before.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from memoryscope.errors import MemoryScopeError, StoreError

if TYPE_CHECKING:
    from memoryscope.stores.base import MemoryStore

__all__ = ["LeaseBusy", "holder_gone", "holder_id", "lease_name", "held_lease"]

logger = logging.getLogger("memoryscope.leases")

_POLL_S = 0.2


class LeaseBusy(MemoryScopeError):
    """Another process holds the lease and did not give it up in time."""


def holder_id() -> str:
    """Who holds a lease: `host:pid:start:random`: this host (with its process namespace, so
    two containers of one name never judge each other's processes), this process and its
    start time (a later process given the same id is another holder), and a random part (one
    per scheduler)."""
    start = process_start(os.getpid()) or "-"
    return f"{_host()}:{os.getpid()}:{start}:{uuid.uuid4().hex[:8]}"


def holder_gone(holder: str) -> bool:
    """Whether `holder` (a `holder_id`) was a process of this host that is no longer running:
    its process id is free, or taken by a process that started at another time. False when
    that cannot be told (another host, an id of another shape, no `/proc`)."""
    parts = holder.split(":")
    if len(parts) != 4 or parts[0] != _host() or not parts[1].isdigit():
        return False
    pid, start = int(parts[1]), parts[2]
    if pid == os.getpid():
        return start != "-" and process_start(pid) not in (None, start)  # this process, or a reused id
    if not _running(pid):
        return True
    now = process_start(pid)
    return start != "-" and now is not None and now != start


def process_start(pid: int) -> str | None:
    """When process `pid` started, in clock ticks since boot (Linux `/proc/<pid>/stat`, field
    22); None where that cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after `pid (name) `: the name may hold spaces
    return fields[19] if len(fields) > 19 and fields[19].isdigit() else None


def _running(pid: int) -> bool:
    if sys.platform == "win32":  # os.kill(pid, 0) would end the process there: judge nothing
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process: it exists
        return True
    return True


def _host() -> str:
    try:
        namespace = os.readlink("/proc/self/ns/pid").removeprefix("pid:[").removesuffix("]")
    except OSError:
        namespace = ""
    host = socket.gethostname().replace(":", "_")
    return f"{host}@{namespace}" if namespace else host


def lease_name(user_name: str, target_name: str = "", workspace: str = "") -> str:
    """The lease of one user's backend work (in one target and workspace)."""
    return "backend:" + "\x1f".join((user_name, target_name, workspace))


@contextmanager
def held_lease(
    store: MemoryStore, name: str, holder: str, *, ttl_s: float, wait_s: float = 0.0, renew: Callable[[], bool] | None = None
) -> Iterator[None]:
    """Hold lease `name` while the body runs, renewing it every `ttl_s / 3` seconds (while
    `renew()` says so: a run given up on stops renewing, so a lease released for it stays free).

    Waits up to `wait_s` seconds while another holder has it, then raises LeaseBusy. A lease
    whose holder is known gone (`holder_gone`: killed on this host) is taken over at once.
    """
    deadline = time.monotonic() + wait_s
    while not store.acquire_lease(name, holder, ttl_s, stale=holder_gone):
        if time.monotonic() >= deadline:
            raise LeaseBusy(f"another process is running a backend operation ({_label(name)}){_held_by(store, name)}")
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


def _held_by(store: MemoryStore, name: str) -> str:
    """`: process 4242 on host box holds it until 03:20:00 UTC ...; try again then`, as far as the store tells."""
    try:
        held = store.lease_holder(name)
    except StoreError:
        held = None
    if held is None:
        return "; try again later"
    holder, expires = held
    parts = holder.split(":")
    who = f"process {parts[1]} on host {parts[0].split('@')[0]}" if len(parts) >= 3 and parts[1].isdigit() else repr(holder)
    until = datetime.fromtimestamp(expires, timezone.utc).strftime("%H:%M:%S UTC")
    return (
        f": {who} holds it until {until}, renewed while it runs (a process killed on another host is waited "
        "out until then); try again later"
    )


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
