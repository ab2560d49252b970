"""The background scheduler of one memory service: runs backend operations when their triggers fire.

Triggers come from each backend operation's config:

- `trigger_messages: N` — the user has N or more pending messages (conversation memories not
  yet consolidated, `reflected=False`), not counting those backing off or parked after failed
  runs (`memoryscope.message_retries`; one ready again after its backoff is news);
- `trigger_observations: N` — N or more valid observations (and memories the user added,
  `obs_customized`, which reflection reads too) not yet reflected on;
- `interval_time: S` — every S seconds, for each user this scheduler has seen.

"User" below means a `Scope`: a user in one target and workspace, as memories are kept apart.

A count trigger fires when its count is at or over the threshold *and* there is news since the
operation last ran for that user: messages were stored here (`notify`), another backend
operation finished for the user, or the count changed (a write from another process). So a run
that could not use its input (a failing model, no LLM) is not repeated until something new
arrives: a trigger never spins.

When triggers are checked: after messages are stored (the service calls `notify(user)`), after a
backend operation finishes, and on a timer every `check_interval_s` seconds for every user seen
since start (this picks up writes made by other processes).

One backend operation per user at a time: scheduled runs and on-demand runs (`run_now`) take the
same per-user lock, and the store's lease for the user (`memoryscope.leases`), which holds across
processes sharing the store: a scheduled run finding the lease taken is tried again later, an
on-demand run waits up to `lease_wait_s` for it. A user is queued at most once; a trigger for a
user who is already queued or running asks for one more check when the current work ends
(coalesced, never queued twice). Jobs run on a pool of `threads` threads, so different users'
operations run side by side.

`close(timeout)` stops the timer, drops queued checks and waits up to `timeout` seconds for
running operations. One still running then is abandoned: its context is told to stop, so the
runner ends it after the current step and runs no later step. Backend workflows write once, at
their end, in one atomic store write — an abandoned run therefore writes nothing, and its input
is still pending for the next start (only the failure notes of messages the model's answer about
was unreadable are written when found). Errors in a background run never stop the scheduler:
they are logged and kept in `status()`, with each seen user's pending messages by state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext

from memoryscope._scheduler_state import (
    Running,
    RunningOperation,
    RunRecord,
    SchedulerStatus,
    Scope,
    Track,
    Triggers,
    check_failure,
    fired_trigger,
    log_run,
    message_backlogs,
    pending_counts,
    run_record,
)
from memoryscope.context import MemoryContext
from memoryscope.errors import MemoryScopeError, ServiceClosed, StoreError
from memoryscope.leases import LeaseBusy, held_lease, holder_id, lease_name
from memoryscope.memory import utc_now
from memoryscope.operation import Operation
from memoryscope.stores.base import MemoryStore
from memoryscope.workflow import RunResult

__all__ = ["Scheduler", "SchedulerStatus", "RunRecord", "RunningOperation", "Scope", "Triggers"]

logger = logging.getLogger("memoryscope.scheduler")

ABANDONED = "abandoned: the scheduler was stopped before the operation finished"


class Scheduler:
    """Runs the backend operations of one service in the background. See the module docstring."""

    def __init__(
        self,
        service_name: str,
        operations: Mapping[str, Operation],
        store: MemoryStore | None,
        *,
        enabled: bool = True,
        threads: int = 2,
        check_interval_s: float = 30.0,
        shutdown_timeout_s: float = 30.0,
        lease_ttl_s: float = 300.0,
        lease_wait_s: float = 60.0,
    ) -> None:
        if threads < 1:
            raise MemoryScopeError(f"scheduler of service {service_name!r}: threads must be at least 1, got {threads}")
        self.service_name = service_name
        self.enabled = enabled
        self.threads = threads
        self.check_interval_s = check_interval_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self.lease_ttl_s = lease_ttl_s
        self.lease_wait_s = lease_wait_s
        self._holder = holder_id()
        self._store = store
        self._clock = time.monotonic
        self._triggered: dict[str, tuple[Operation, Triggers]] = {
            name: (op, Triggers.of(op)) for name, op in operations.items() if op.backend and Triggers.of(op)
        }
        self._state = threading.Condition()  # guards every field below
        self._users: dict[Scope, threading.Lock] = {}  # users seen → their one-backend-operation lock
        self._tracks: dict[tuple[Scope, str], Track] = {}
        self._queued: set[Scope] = set()  # users with a job submitted and not finished
        self._active: set[Scope] = set()  # users whose job a pool thread is running
        self._recheck: set[Scope] = set()  # users told about news while queued
        self._running: dict[Scope, Running] = {}
        self._last_runs: dict[tuple[str, str], RunRecord] = {}
        self._last_errors: dict[tuple[str, str], RunRecord] = {}
        self._runs = 0
        self._errors = 0
        self._executor: ThreadPoolExecutor | None = None
        self._timer: threading.Thread | None = None
        self._wake = threading.Event()
        self._started = False
        self._paused = False
        self._closing = False
        self._closed = False

    # -- public ------------------------------------------------------------------------------

    @property
    def operations(self) -> list[str]:
        """The operations this scheduler runs by trigger."""
        return list(self._triggered)

    def start(self) -> None:
        """Begin running triggered operations (no-op when disabled, started or closed)."""
        with self._state:
            if not self.enabled or self._started or self._closing or not self._triggered:
                return
            self._started = True
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix=f"memoryscope-scheduler-{self.service_name}")
            self._timer = threading.Thread(target=self._tick, name=f"memoryscope-timer-{self.service_name}", daemon=True)
        self._timer.start()

    def pause(self) -> None:
        """Stop starting operations by trigger (runs going on finish; `run_now` still runs)."""
        with self._state:
            self._paused = True

    def resume(self) -> None:
        """Start operations by trigger again after `pause`."""
        with self._state:
            self._paused = False

    def notify(self, user_name: str, target_name: str = "", workspace: str = "") -> None:
        """News for the user (new messages, say): check their triggers soon, off this thread."""
        scope = Scope(user_name, target_name, workspace)
        with self._state:
            self._know(scope)
            for name in self._triggered:
                self._track(scope, name).news = True
        self._submit(scope)

    def check(self, user_name: str | None = None) -> None:
        """Check triggers now, without news: for every scope of one user (the default scope if
        none was seen), or for every scope seen."""
        with self._state:
            scopes = [scope for scope in self._users if user_name is None or scope.user_name == user_name]
            if user_name is not None and not scopes:
                scopes = [Scope(user_name)]
                self._know(scopes[0])
        for scope in scopes:
            self._submit(scope)

    def users(self) -> list[str]:
        return list(dict.fromkeys(scope.user_name for scope in self.scopes()))

    def scopes(self) -> list[Scope]:
        with self._state:
            return list(self._users)

    def run_now(self, operation: Operation, context: MemoryContext, trigger: str = "on demand") -> RunResult:
        """Run `operation` on `context` on this thread, as the user's one backend operation.

        Waits for a run already going for the user. Recorded in `status()`; errors are re-raised.
        """
        scope = Scope.of(context)
        context.on_demand = True
        with self._state:
            if self._closing:
                raise ServiceClosed(f"the scheduler of service {self.service_name!r} is stopped")
            lock = self._know(scope)
        with lock, self._lease(scope, self.lease_wait_s):
            counts = self._counts(operation.name, scope)
            result = self._run(operation, context, trigger, counts, reraise=True)
        self._submit(scope)  # what this run wrote may fire another operation (observations → reflection)
        if result is None:  # the scheduler stopped while this call waited for the user's lock
            raise ServiceClosed(ABANDONED)
        return result

    def status(self) -> SchedulerStatus:
        messages = message_backlogs(self._store, self.scopes())  # store reads, outside the lock
        with self._state:
            return SchedulerStatus(
                enabled=self.enabled,
                started=self._started,
                closed=self._closed,
                running=tuple(running.info for running in self._running.values()),
                waiting=tuple(scope.label for scope in sorted(self._queued - set(self._running))),
                last_runs=dict(self._last_runs),
                last_errors=dict(self._last_errors),
                runs=self._runs,
                errors=self._errors,
                messages=messages,
            )

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no check is queued and no operation runs; False if `timeout` passed first."""
        with self._state:
            return self._state.wait_for(lambda: not self._queued and not self._running and not self._active, timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Stop; wait up to `timeout` seconds (default `shutdown_timeout_s`) for running operations.

        Returns True when nothing was left running, False when some run was abandoned.
        """
        timeout = self.shutdown_timeout_s if timeout is None else timeout
        with self._state:
            if self._closed:
                return not self._running
            self._closing = True
            self._recheck.clear()
        self._wake.set()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        deadline = self._clock() + max(timeout, 0.0)
        if self._timer is not None:
            self._timer.join(max(deadline - self._clock(), 0.0))
        with self._state:
            self._state.wait_for(lambda: not self._running and not self._active, max(deadline - self._clock(), 0.0))
            left = list(self._running.values())
            for running in left:
                running.abandoned = True
                running.context.stop(ABANDONED)
            self._queued &= self._active  # the jobs that never started were cancelled with the pool
            self._closed = True
            self._state.notify_all()
        self._release_leases(left)
        for running in left:
            logger.warning(
                "service %s: %s for user %r did not finish within %.1fs; abandoned, nothing of it is written",
                self.service_name,
                running.info.operation,
                running.info.scope.label,
                timeout,
            )
        return not left

    def _release_leases(self, abandoned: list[Running]) -> None:
        """Free the leases of runs given up on now, while the store is still open: their own
        release comes only when they end, perhaps after the store is closed, and a lease left in
        the store would hold up the user's backend runs in every process for `lease_ttl_s`."""
        if self._store is None:
            return
        for running in abandoned:
            scope = running.info.scope
            try:
                self._store.release_lease(lease_name(scope.user_name, scope.target_name, scope.workspace), self._holder)
            except StoreError as error:
                logger.warning("service %s: could not release the lease of %s: %s", self.service_name, scope.label, error)

    # -- triggers ----------------------------------------------------------------------------

    def _know(self, scope: Scope) -> threading.Lock:
        """The scope's lock; registers the scope (and starts its interval clocks). Holds `_state`."""
        lock = self._users.get(scope)
        if lock is not None:
            return lock
        lock = self._users[scope] = threading.Lock()
        now = self._clock()
        for name, (_, triggers) in self._triggered.items():
            track = self._tracks[(scope, name)] = Track()
            if triggers.interval_s is not None:
                track.next_interval = now + triggers.interval_s
                self._wake.set()  # the timer may sleep past this user's first interval
        return lock

    def _lease(self, scope: Scope, wait_s: float) -> AbstractContextManager[None]:
        """The store's lease of the scope's backend work (nothing to take without a store)."""
        if self._store is None:
            return nullcontext()
        name = lease_name(scope.user_name, scope.target_name, scope.workspace)
        renew = lambda: not self._closing  # noqa: E731  # a closing scheduler's runs stop holding on
        return held_lease(self._store, name, self._holder, ttl_s=self.lease_ttl_s, wait_s=wait_s, renew=renew)

    def _track(self, scope: Scope, name: str) -> Track:
        return self._tracks.setdefault((scope, name), Track())

    def _counts(self, name: str, scope: Scope) -> dict[str, int]:
        entry = self._triggered.get(name)
        if entry is None:
            return {}
        return pending_counts(self._store, entry[1], scope)

    def _due(self, scope: Scope) -> tuple[Operation, str, dict[str, int]] | None:
        """The first operation (in config order) whose trigger fires for `scope`, why, and its counts."""
        for name, (operation, triggers) in self._triggered.items():
            counts = self._counts(name, scope)
            with self._state:
                track = self._track(scope, name)
                snapshot = Track(track.news, dict(track.settled), track.interval_due)
            trigger = fired_trigger(triggers, counts, snapshot)
            if trigger is not None:
                return operation, trigger, counts
        return None

    # -- jobs --------------------------------------------------------------------------------

    def _submit(self, scope: Scope) -> None:
        with self._state:
            if not self._started or self._paused or self._closing or self._executor is None:
                return
            if scope in self._queued:
                self._recheck.add(scope)  # coalesced: the running job checks once more before it ends
                return
            self._queued.add(scope)
            try:
                self._executor.submit(self._drain, scope)
            except RuntimeError:  # the pool shut down between the check above and here
                self._queued.discard(scope)

    def _drain(self, scope: Scope) -> None:
        """Run every operation due for `scope`, one after the other, until none is due."""
        with self._state:
            self._active.add(scope)
        try:
            while True:
                with self._state:
                    self._recheck.discard(scope)
                    if self._closing:
                        return
                try:
                    due = self._due(scope)
                except Exception as error:  # a store failure must not kill the scheduler thread
                    if not self._closing:
                        self._record_check_failure(scope, error)
                    return
                if due is None:
                    with self._state:
                        if scope in self._recheck and not self._closing:
                            continue
                        return
                operation, trigger, counts = due
                with self._users[scope]:
                    if self._closing:
                        return
                    try:
                        with self._lease(scope, wait_s=0.0):
                            self._run(operation, scope.context(), trigger, counts, reraise=False)
                    except LeaseBusy:  # another process runs it now; its news stays, so a later check retries
                        logger.info(
                            "service %s: %s for user %r runs in another process", self.service_name, operation.name, scope.label
                        )
                        return
        finally:
            with self._state:
                self._active.discard(scope)
                self._queued.discard(scope)
                self._state.notify_all()

    def _run(
        self, operation: Operation, context: MemoryContext, trigger: str, counts: dict[str, int], *, reraise: bool
    ) -> RunResult | None:
        """One run under the scope's lock: bookkeeping before and after, errors recorded."""
        scope, name = Scope.of(context), operation.name
        info = RunningOperation(scope.user_name, name, trigger, utc_now(), scope.target_name, scope.workspace)
        running = Running(info, context)
        with self._state:
            if self._closing:
                return None
            track = self._track(scope, name)
            track.news, track.settled, track.interval_due = False, dict(counts), False
            entry = self._triggered.get(name)
            if entry is not None and entry[1].interval_s is not None:
                track.next_interval = self._clock() + entry[1].interval_s
            self._running[scope] = running
        started = time.perf_counter()
        result: RunResult | None = None
        error: BaseException | None = None
        try:
            result = operation.runner.run(context)
        except Exception as failure:  # any failure of a run is recorded, and never escapes a pool thread
            error = failure
            if reraise:
                raise
        finally:
            self._finish(running, result, error, time.perf_counter() - started)
        return result

    def _finish(self, running: Running, result: RunResult | None, error: BaseException | None, seconds: float) -> None:
        info = running.info
        record = run_record(running, result, error, seconds)
        key = (info.scope.label, info.operation)
        with self._state:
            self._running.pop(info.scope, None)
            self._last_runs[key] = record
            self._runs += 1
            if error is not None:
                self._errors += 1
                self._last_errors[key] = record
            elif result is not None and not running.abandoned:
                # its writes are news for the user's other observation-triggered operations
                for name, (_, triggers) in self._triggered.items():
                    if name != info.operation and triggers.observations is not None:
                        self._track(info.scope, name).news = True
            self._state.notify_all()
        log_run(logger, self.service_name, record, error)

    def _record_check_failure(self, scope: Scope, error: Exception) -> None:
        record = check_failure(scope, error)
        with self._state:
            self._last_errors[(scope.label, record.operation)] = record
            self._errors += 1
        logger.error("service %s: checking triggers for user %r failed: %s", self.service_name, scope.label, record.error)

    # -- timer -------------------------------------------------------------------------------

    def _tick(self) -> None:
        """The timer thread: due intervals, and a sweep over all known users every `check_interval_s`."""
        next_sweep = self._clock() + self.check_interval_s
        while True:
            with self._state:
                if self._closing:
                    return
                deadlines = [t.next_interval for t in self._tracks.values() if t.next_interval is not None]
            wait = min([next_sweep, *deadlines]) - self._clock()
            if wait > 0 and self._wake.wait(wait):
                self._wake.clear()
                continue  # woken: closing, or a new deadline to sleep towards
            now = self._clock()
            scopes: set[Scope] = set()
            with self._state:
                if self._closing:
                    return
                for (scope, name), track in self._tracks.items():
                    if track.next_interval is not None and track.next_interval <= now:
                        track.interval_due = True
                        track.next_interval = now + (self._triggered[name][1].interval_s or 0.0)
                        scopes.add(scope)
                if now >= next_sweep:
                    scopes.update(self._users)
                    next_sweep = now + self.check_interval_s
            for scope in scopes:
                self._submit(scope)
