"""`/metrics`: what a memory server costs and how healthy it is, in Prometheus' text format 0.0.4.

The app records each request with `observe_request` (its route template, never the raw path, so
the label values stay few) and answers `/metrics` with `render(scope)`, sent as `CONTENT_TYPE`.
Everything else is read from the scope when rendering:

- model usage (`scope.usage()`): calls, errors, tokens by kind, seconds spent, per model key;
- the store: memories by type and status across all users, and how many users have any;
- each service's scheduler: backend runs and errors, runs going on, messages waiting.

The store has no count across users (every `MemoryFilter` names one), so the memory figures cost
about five count queries per user. They, and the scheduler statuses (which count each user's
pending messages), are read at most once per `store_cache_seconds` and reused meanwhile, so
scrapers and curious visitors cannot make `/metrics` a load on the store. A store or scheduler
that fails to answer leaves its families out (with a comment saying so) and adds one to
`memoryscope_metrics_errors_total{source}`; the rest is rendered as usual.

The format is small enough to write here: one `# HELP` and one `# TYPE` line per family, then
its samples `name{label="value"} number`, label values escaped (backslash, double quote,
newline). See https://prometheus.io/docs/instrumenting/exposition_formats/.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING

from memoryscope import __version__
from memoryscope.errors import MemoryScopeError

if TYPE_CHECKING:
    from memoryscope.app import MemoryScope

__all__ = ["CONTENT_TYPE", "DEFAULT_BUCKETS", "ServerMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Seconds. Searches take milliseconds; a request that waits for an LLM (an `add` that infers, an
# operation run on demand) takes seconds to a minute.
DEFAULT_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

ERROR_SOURCES = ("store", "scheduler")  # the `source` label of memoryscope_metrics_errors_total

logger = logging.getLogger("memoryscope.server")

Labels = Mapping[str, str]


class ServerMetrics:
    """The server's request figures, kept as requests end; `render` adds the scope's own figures.

    One instance per server; `observe_request` and `render` may be called from any thread."""

    def __init__(
        self,
        buckets: Sequence[float] = DEFAULT_BUCKETS,
        *,
        store_cache_seconds: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`buckets`: the finite upper bounds of the request duration histogram, increasing (`+Inf`
        is always added). `store_cache_seconds`: how long figures read from the store and the
        schedulers are reused (0: read on every render). `clock`: monotonic seconds, for uptime
        and the cache."""
        self.buckets = _checked_buckets(buckets)
        if not store_cache_seconds >= 0:  # also refuses NaN
            raise MemoryScopeError(f"store_cache_seconds must be 0 or more, got {store_cache_seconds!r}")
        self.store_cache_seconds = store_cache_seconds
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()  # guards the request figures
        self._requests: dict[tuple[str, str, str], int] = {}
        self._durations: dict[tuple[str, str], _Histogram] = {}
        self._refresh = threading.Lock()  # one store reading at a time; guards the two fields below
        self._cached: _StoreFigures | None = None
        self._errors = dict.fromkeys(ERROR_SOURCES, 0)

    def observe_request(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        """Count one finished request. `endpoint` is the route template (`/v1/users/{user}/search`),
        never the raw path: each distinct value is a series kept for the server's lifetime."""
        slot = bisect_left(self.buckets, seconds)  # the first bound >= seconds; len(buckets): only +Inf
        with self._lock:
            key = (endpoint, method, str(status))
            self._requests[key] = self._requests.get(key, 0) + 1
            histogram = self._durations.get((endpoint, method))
            if histogram is None:
                histogram = self._durations[(endpoint, method)] = _Histogram([0] * (len(self.buckets) + 1))
            histogram.counts[slot] += 1
            histogram.total += seconds

    def render(self, scope: MemoryScope) -> str:
        """The whole exposition text, ending in a newline. Reads the store (see the module
        docstring): call it off the event loop."""
        figures, errors = self._store_figures(scope)
        text = _Exposition()
        text.family("memoryscope_info", "gauge", "The MemoryScope version serving, as a label; always 1.")
        text.sample("memoryscope_info", {"version": __version__}, 1)
        text.family("memoryscope_uptime_seconds", "gauge", "Seconds since the server's metrics began.")
        text.sample("memoryscope_uptime_seconds", {}, self._clock() - self._started)
        self._render_requests(text)
        _render_models(text, scope)
        _render_store(text, figures)
        _render_services(text, figures)
        errors_name = "memoryscope_metrics_errors_total"
        text.family(errors_name, "counter", "Readings of the store or a scheduler for /metrics that failed.")
        for source in ERROR_SOURCES:
            text.sample(errors_name, {"source": source}, errors[source])
        text.family("memoryscope_metrics_store_read_seconds", "gauge", "Seconds the last reading of the store figures took.")
        text.sample("memoryscope_metrics_store_read_seconds", {}, figures.read_seconds)
        return text.finish()

    # -- the server's own figures ------------------------------------------------------------

    def _render_requests(self, text: _Exposition) -> None:
        with self._lock:
            requests = sorted(self._requests.items())
            durations = sorted((key, list(h.counts), h.total) for key, h in self._durations.items())
        text.family("memoryscope_http_requests_total", "counter", "HTTP requests answered, by route template, method and status.")
        for (endpoint, method, status), count in requests:
            text.sample("memoryscope_http_requests_total", {"endpoint": endpoint, "method": method, "status": status}, count)
        name = "memoryscope_http_request_duration_seconds"
        text.family(name, "histogram", "Seconds from a request's arrival to its answer, by route template and method.")
        for (endpoint, method), counts, total in durations:
            labels = {"endpoint": endpoint, "method": method}
            cumulative = 0
            for bound, count in zip((*self.buckets, math.inf), counts, strict=True):
                cumulative += count
                text.sample(f"{name}_bucket", {**labels, "le": _number(float(bound))}, cumulative)
            text.sample(f"{name}_sum", labels, total)
            text.sample(f"{name}_count", labels, cumulative)

    # -- the store's figures, read at most once per store_cache_seconds ------------------------

    def _store_figures(self, scope: MemoryScope) -> tuple[_StoreFigures, dict[str, int]]:
        """The cached figures when fresh enough and of this scope, else newly read; with the
        failed readings so far, by source."""
        with self._refresh:
            cached = self._cached
            fresh = cached is not None and cached.scope is scope and self._clock() - cached.read_at < self.store_cache_seconds
            if cached is None or not fresh:
                cached = self._cached = _read_store_figures(scope, self._clock)
                for source in cached.failed:
                    self._errors[source] += 1
            return cached, dict(self._errors)


@dataclass
class _Histogram:
    counts: list[int]  # observations per bucket (not cumulative); the last: above every finite bound
    total: float = 0.0


@dataclass(frozen=True)
class _ServiceFigures:
    runs: int
    errors: int
    running: int
    pending: int  # ready for a run or backing off after a failure
    parked: int  # failed too often; retried on demand only


@dataclass
class _StoreFigures:
    """What `render` reads from the store and the schedulers, and when."""

    scope: object  # whose figures these are
    read_at: float
    read_seconds: float = 0.0
    has_store: bool = False
    memories: dict[tuple[str, str], int] | None = None  # (type, status) → count; None: unreadable
    users: int | None = None
    services: dict[str, _ServiceFigures] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # the ERROR_SOURCES that failed this time


def _read_store_figures(scope: MemoryScope, clock: Callable[[], float]) -> _StoreFigures:
    started = clock()
    figures = _StoreFigures(scope=scope, read_at=started, has_store=scope.store is not None)
    # /metrics must answer whatever a store or scheduler raises (a dropped connection, a store
    # closing under it), so every exception is caught here, logged and counted.
    if scope.store is not None:
        try:
            door = scope.door
            figures.memories, figures.users = door.memory_counts(door.caller())
        except Exception as error:
            logger.warning("/metrics: could not count the memories in the store: %s", error)
            figures.failed.append("store")
    for name, service in scope.services.items():
        try:
            status = service.scheduler.status()
        except Exception as error:
            logger.warning("/metrics: could not read the scheduler status of service %r: %s", name, error)
            if "scheduler" not in figures.failed:
                figures.failed.append("scheduler")
            continue
        backlogs = status.messages.values()
        figures.services[name] = _ServiceFigures(
            runs=status.runs,
            errors=status.errors,
            running=len(status.running),
            pending=sum(backlog.ready + backlog.backing_off for backlog in backlogs),
            parked=sum(backlog.parked for backlog in backlogs),
        )
    figures.read_seconds = clock() - started
    return figures


# -- the scope's figures ---------------------------------------------------------------------


def _render_models(text: _Exposition, scope: MemoryScope) -> None:
    usage = sorted(scope.usage().items())
    text.family("memoryscope_model_info", "gauge", "Which backend and model serve each model key; always 1.")
    for key, model in sorted(scope.models.items()):
        backend, model_name = str(getattr(model, "backend", "")), str(getattr(model, "model_name", ""))
        text.sample("memoryscope_model_info", {"model": key, "backend": backend, "model_name": model_name}, 1)
    text.family("memoryscope_model_calls_total", "counter", "Calls to each model key, failed ones included.")
    for key, snapshot in usage:
        text.sample("memoryscope_model_calls_total", {"model": key}, snapshot.get("calls", 0))
    text.family("memoryscope_model_errors_total", "counter", "Calls to each model key that failed.")
    for key, snapshot in usage:
        text.sample("memoryscope_model_errors_total", {"model": key}, snapshot.get("errors", 0))
    text.family("memoryscope_model_tokens_total", "counter", "Tokens sent to (prompt) and made by (completion) each model key.")
    for key, snapshot in usage:
        for figure, value in sorted(snapshot.items()):
            if figure.endswith("_tokens"):
                text.sample("memoryscope_model_tokens_total", {"model": key, "kind": figure.removesuffix("_tokens")}, value)
    latency_help = "Seconds spent in calls to each model key (divided by the calls: the mean latency)."
    text.family("memoryscope_model_latency_seconds_total", "counter", latency_help)
    for key, snapshot in usage:
        text.sample("memoryscope_model_latency_seconds_total", {"model": key}, snapshot.get("latency_s", 0.0))


def _render_store(text: _Exposition, figures: _StoreFigures) -> None:
    if not figures.has_store:
        return  # a config without a store: no such figures, rather than zeros that look counted
    if figures.memories is None or figures.users is None:
        text.comment("memoryscope_memories and memoryscope_users left out: the store could not be read (see the server log)")
        return
    text.family("memoryscope_memories", "gauge", "Memories in the store over all users, by memory type and status.")
    for (memory_type, status), count in sorted(figures.memories.items()):
        text.sample("memoryscope_memories", {"type": memory_type, "status": status}, count)
    text.family("memoryscope_users", "gauge", "Users with at least one memory in the store.")
    text.sample("memoryscope_users", {}, figures.users)


def _render_services(text: _Exposition, figures: _StoreFigures) -> None:
    services = sorted(figures.services.items())
    families = (  # name, type, HELP, the _ServiceFigures field
        ("memoryscope_backend_runs_total", "counter", "Backend operation runs finished, failed ones included.", "runs"),
        ("memoryscope_backend_errors_total", "counter", "Backend operation runs (and trigger checks) that failed.", "errors"),
        ("memoryscope_backend_running", "gauge", "Backend operations running now.", "running"),
        ("memoryscope_pending_messages", "gauge", "Messages waiting for consolidation (ready, or backing off).", "pending"),
        ("memoryscope_parked_messages", "gauge", "Messages parked after failing too often; retried on demand only.", "parked"),
    )
    for name, kind, help_text, attribute in families:
        text.family(name, kind, help_text)
        for service_name, service in services:
            text.sample(name, {"service": service_name}, getattr(service, attribute))


# -- the text format ---------------------------------------------------------------------------


class _Exposition:
    """Lines of the text format, written in order: a family's HELP and TYPE, then its samples."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self._lines.append(f"# HELP {name} {_escape_help(help_text)}")
        self._lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, labels: Labels, value: float) -> None:
        if labels:
            pairs = ",".join(f'{label}="{_escape_label(text)}"' for label, text in labels.items())
            self._lines.append(f"{name}{{{pairs}}} {_number(value)}")
        else:
            self._lines.append(f"{name} {_number(value)}")

    def comment(self, words: str) -> None:
        self._lines.append(f"# {words.replace(chr(10), ' ')}")

    def finish(self) -> str:
        return "\n".join(self._lines) + "\n"


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    """A sample value or `le` bound as Prometheus writes it: integers plain, floats by `repr`."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _checked_buckets(buckets: Iterable[float]) -> tuple[float, ...]:
    bounds = tuple(float(bound) for bound in buckets)
    if not bounds or not all(math.isfinite(bound) for bound in bounds):
        raise MemoryScopeError(f"histogram buckets must be finite numbers, at least one (+Inf is added), got {bounds!r}")
    if any(later <= earlier for earlier, later in pairwise(bounds)):
        raise MemoryScopeError(f"histogram buckets must increase strictly, got {bounds!r}")
    return bounds
