"""The scheduler's records and trigger arithmetic: what `memoryscope.scheduler` keeps per run and user.

Plain data and pure functions; the locking and threads stay in `memoryscope.scheduler`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from memoryscope.context import MemoryContext
from memoryscope.errors import MemoryScopeError
from memoryscope.memory import MemoryStatus, MemoryType, utc_now
from memoryscope.message_retries import Backlog, backlog, pending_filter
from memoryscope.operation import Operation
from memoryscope.stores.base import MemoryFilter, MemoryStore
from memoryscope.workflow import RunResult

__all__ = [
    "Backlog",
    "RunRecord",
    "Running",
    "RunningOperation",
    "SchedulerStatus",
    "Scope",
    "Track",
    "Triggers",
    "check_failure",
    "count_pending",
    "fired_trigger",
    "log_run",
    "message_backlog",
    "message_backlogs",
    "pending_counts",
    "readable",
    "run_record",
    "thresholds",
]


CHECK = "trigger check"  # the operation name under which a failed check is recorded
# Beside the count of ready messages: the failures so far of those ready again after a backoff.
# A change of it is news, so messages ready again fire the trigger even when their count is the
# one of the run that failed on them; a count that does not move never fires twice.
RETRIED = "retried message failures"

logger = logging.getLogger("memoryscope.scheduler")


@dataclass(frozen=True, order=True)
class Scope:
    """Whose memories a backend operation works on: one user's, in one target and workspace
    (the same three fields that keep memories apart in the store)."""

    user_name: str
    target_name: str = ""
    workspace: str = ""

    @classmethod
    def of(cls, context: MemoryContext) -> Scope:
        return cls(context.user_name, context.target_name, context.workspace)

    def context(self) -> MemoryContext:
        """A fresh context for a run in this scope."""
        return MemoryContext(user_name=self.user_name, target_name=self.target_name, workspace=self.workspace)

    @property
    def label(self) -> str:
        """How status and logs name it: the user name, and the target and workspace when set
        (`ann`, `ann [target bob]`, `ann [target bob, workspace work]`)."""
        extra = [f"{name} {value}" for name, value in (("target", self.target_name), ("workspace", self.workspace)) if value]
        return f"{self.user_name} [{', '.join(extra)}]" if extra else self.user_name


@dataclass(frozen=True)
class Triggers:
    """When the scheduler runs one backend operation (all None: on demand only)."""

    messages: int | None = None
    observations: int | None = None
    interval_s: float | None = None

    @classmethod
    def of(cls, operation: Operation) -> Triggers:
        params = operation.params
        return cls(
            getattr(params, "trigger_messages", None),
            getattr(params, "trigger_observations", None),
            getattr(params, "interval_time", None),
        )

    @property
    def counted(self) -> bool:
        return self.messages is not None or self.observations is not None

    def __bool__(self) -> bool:
        return self.counted or self.interval_s is not None


@dataclass(frozen=True)
class RunningOperation:
    user_name: str
    operation: str
    trigger: str  # why it runs: "5 pending messages (trigger_messages: 5)", "on demand", ...
    started_at: datetime
    target_name: str = ""
    workspace: str = ""

    @property
    def scope(self) -> Scope:
        return Scope(self.user_name, self.target_name, self.workspace)


@dataclass(frozen=True)
class RunRecord:
    """One finished run of a backend operation."""

    user_name: str
    operation: str
    trigger: str
    started_at: datetime
    seconds: float
    result: str  # the operation's readable result ("" when it failed)
    error: str = ""  # "" when the run succeeded
    abandoned: bool = False
    target_name: str = ""
    workspace: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and not self.abandoned


@dataclass(frozen=True)
class SchedulerStatus:
    """A snapshot: what runs now, what waits, and how the last runs went, per (who, operation).

    "Who" is a `Scope.label`: the user name, with the target and workspace when they are set."""

    enabled: bool
    started: bool
    closed: bool
    running: tuple[RunningOperation, ...]
    waiting: tuple[str, ...]  # labels of the scopes queued for a trigger check
    last_runs: Mapping[tuple[str, str], RunRecord]
    last_errors: Mapping[tuple[str, str], RunRecord]  # the latest failed run, kept after later successes
    runs: int
    errors: int
    # per scope label, for the scopes seen: pending messages ready, backing off, parked as failed
    messages: Mapping[str, Backlog] = field(default_factory=dict)

    def last_error(self, who: str, operation: str) -> str:
        """The latest error of `operation` for `who` (a `Scope.label`, e.g. the user name); "" if none."""
        record = self.last_errors.get((who, operation))
        return record.error if record is not None else ""


@dataclass
class Track:
    """What the scheduler knows about one (user, operation)."""

    news: bool = True  # something happened since the last run (never run counts as news)
    settled: dict[str, int] = field(default_factory=dict)  # trigger kind → count when it last ran
    interval_due: bool = False  # the timer says the interval has passed
    next_interval: float | None = None  # monotonic time the interval passes next


@dataclass
class Running:
    info: RunningOperation
    context: MemoryContext
    abandoned: bool = False


def message_backlog(store: MemoryStore, scope: Scope) -> Backlog:
    """The scope's pending messages by state (see `memoryscope.message_retries`)."""
    return backlog(store, pending_filter(scope.user_name, scope.target_name, scope.workspace))


def message_backlogs(store: MemoryStore | None, scopes: Iterable[Scope]) -> dict[str, Backlog]:
    """`message_backlog` per scope label; a scope the store cannot count now is left out (a
    status is read while a store may be closing)."""
    found: dict[str, Backlog] = {}
    if store is None:
        return found
    for scope in scopes:
        try:
            found[scope.label] = message_backlog(store, scope)
        except MemoryScopeError as error:
            logger.debug("could not count the pending messages of %r: %s", scope.label, error)
    return found


def count_pending(store: MemoryStore, kind: str, scope: Scope) -> int:
    """Pending messages ready for a run, or unreflected observations, in `scope`."""
    if kind == "messages":
        return message_backlog(store, scope).ready
    memory_filter = MemoryFilter(
        user_name=scope.user_name,
        target_name=scope.target_name,
        workspace=scope.workspace,
        memory_types=(MemoryType.OBSERVATION, MemoryType.OBS_CUSTOMIZED),  # what reflection loads
        status=MemoryStatus.VALID,
        reflected=False,
    )
    return store.count(memory_filter)


def thresholds(triggers: Triggers) -> tuple[tuple[str, int | None], ...]:
    """Each counted trigger kind with its threshold (None: that trigger is not set)."""
    return (("messages", triggers.messages), ("observations", triggers.observations))


def pending_counts(store: MemoryStore | None, triggers: Triggers, scope: Scope) -> dict[str, int]:
    """The scope's count for each counted trigger that is set (none without a store)."""
    if store is None:
        return {}
    counts: dict[str, int] = {}
    if triggers.messages is not None:
        messages = message_backlog(store, scope)
        counts["messages"], counts[RETRIED] = messages.ready, messages.retried_failures
    if triggers.observations is not None:
        counts["observations"] = count_pending(store, "observations", scope)
    return counts


def fired_trigger(triggers: Triggers, counts: Mapping[str, int], track: Track) -> str | None:
    """Why the operation is due for the user (`track` is a snapshot), or None when it is not."""
    for kind, threshold in thresholds(triggers):
        count = counts.get(kind)
        if threshold is None or count is None or count < threshold:
            continue
        retried = kind == "messages" and track.settled.get(RETRIED) != counts.get(RETRIED)
        if track.news or track.settled.get(kind) != count or retried:
            noun = "pending messages" if kind == "messages" else "unreflected observations"
            return f"{count} {noun} (trigger_{kind}: {threshold})"
    if track.interval_due:
        return f"interval_time: {triggers.interval_s:g}s"
    return None


def run_record(running: Running, result: RunResult | None, error: BaseException | None, seconds: float) -> RunRecord:
    info = running.info
    return RunRecord(
        user_name=info.user_name,
        operation=info.operation,
        trigger=info.trigger,
        started_at=info.started_at,
        seconds=seconds,
        result=readable(result) if result is not None else "",
        error=f"{type(error).__name__}: {error}" if error is not None else "",
        abandoned=running.abandoned,
        target_name=info.target_name,
        workspace=info.workspace,
    )


def check_failure(scope: Scope, error: Exception) -> RunRecord:
    """The record of a trigger check that failed (a store error, say), kept as a failed run of
    the pseudo-operation "trigger check"."""
    return RunRecord(
        user_name=scope.user_name,
        operation=CHECK,
        trigger=CHECK,
        started_at=utc_now(),
        seconds=0.0,
        result="",
        error=f"{type(error).__name__}: {error}",
        target_name=scope.target_name,
        workspace=scope.workspace,
    )


def log_run(logger: logging.Logger, service_name: str, record: RunRecord, error: BaseException | None) -> None:
    """Log a finished run: an error with its traceback at debug level, a result at info level."""
    if error is not None:
        logger.error(
            "service %s: %s for %s (%s) failed: %s",
            service_name,
            record.operation,
            _who(record),
            record.trigger,
            record.error,
        )
        logger.debug("traceback of the failed run", exc_info=error)
    elif record.result:
        logger.info(
            "service %s: %s for %s (%s): %s",
            service_name,
            record.operation,
            _who(record),
            record.trigger,
            record.result,
        )


def _who(record: RunRecord) -> str:
    return f"user {Scope(record.user_name, record.target_name, record.workspace).label!r}"


def readable(result: RunResult) -> str:
    """A one-line account of a run: its result, why it stopped, what it skipped."""
    text = result.context.result or (f"stopped: {result.stopped}" if result.stopped else "done")
    if result.skipped:
        text += f" (skipped: {', '.join(result.skipped)})"
    return text
