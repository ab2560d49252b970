"""Pending messages the model could not be read about: their retries, backoff and parking.

A conversation memory is pending while `reflected=False`. When the model's answer about it
(its information score) stays unreadable after the one repair request, `info_filter` leaves it
pending instead of calling it "not informative", and notes in its `meta`:

- `consolidation_failures`: how many runs failed on it;
- `consolidation_error`: the last error, one short line (no model output, no secrets);
- `consolidation_retry_after`: the ISO time before which no run takes it again, the backoff
  being `retry_backoff_s` × 2^(failures - 1), at most `MAX_BACKOFF_S`;
- `consolidation_failed`: True once it failed `max_consolidation_failures` times: *parked*,
  taken again only on demand (`retry_failed`: `memoryscope run consolidate_memory --retry-failed`).

A pending message is *ready* (no note, or its backoff passed), *backing off*, or *parked*. Only
ready ones are loaded by a run and counted for `trigger_messages`, so the scheduler never spins
on messages that keep failing. A message consolidated at last loses the notes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from typing import Literal

from memoryscope.memory import MemoryNode, MemoryType, utc_now
from memoryscope.stores.base import MemoryFilter, MemoryStore

__all__ = [
    "FAILURES",
    "ERROR",
    "RETRY_AFTER",
    "FAILED",
    "MAX_BACKOFF_S",
    "Backlog",
    "backlog",
    "backoff",
    "cleared",
    "message_state",
    "note_failure",
    "pending_filter",
    "pending_messages",
    "waiting_note",
]

FAILURES = "consolidation_failures"
ERROR = "consolidation_error"
RETRY_AFTER = "consolidation_retry_after"
FAILED = "consolidation_failed"
_KEYS = (FAILURES, ERROR, RETRY_AFTER, FAILED)
DEFAULT_MAX_FAILURES = 3  # runs a message may fail on before it is parked
DEFAULT_BACKOFF_S = 60.0  # the wait after a first failure, doubled after each further one
MAX_BACKOFF_S = 86_400.0  # a day: a message keeps being retried daily until it is parked
_MAX_ERROR_CHARS = 200
_PAGE = 500

State = Literal["ready", "backing off", "parked"]


def pending_filter(user_name: str, target_name: str = "", workspace: str = "") -> MemoryFilter:
    """The pending (not yet consolidated) conversation memories of one user, target and workspace."""
    return MemoryFilter(
        user_name=user_name,
        target_name=target_name,
        workspace=workspace,
        memory_types=(MemoryType.CONVERSATION,),
        reflected=False,
    )


def failures(node: MemoryNode) -> int:
    value = node.meta.get(FAILURES, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def retry_after(node: MemoryNode) -> datetime | None:
    """When the message's backoff ends (None: it has none, or the note is unreadable)."""
    value = node.meta.get(RETRY_AFTER)
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def message_state(node: MemoryNode, now: datetime) -> State:
    if node.meta.get(FAILED) is True:
        return "parked"
    after = retry_after(node)
    return "backing off" if after is not None and after > now else "ready"


def backoff(failure_count: int, base_s: float) -> timedelta:
    """How long a message waits after its `failure_count`-th failure."""
    exponent = min(max(failure_count - 1, 0), 32)  # 2**32 × any base is past the cap already
    return timedelta(seconds=min(base_s * 2**exponent, MAX_BACKOFF_S))


def note_failure(node: MemoryNode, error: str, now: datetime, *, max_failures: int, backoff_s: float) -> MemoryNode:
    """`node`, still pending, with one more failure noted: backing off, or parked at `max_failures`."""
    count = failures(node) + 1
    meta = {key: value for key, value in node.meta.items() if key not in (RETRY_AFTER, FAILED)}
    meta[FAILURES] = count
    meta[ERROR] = " ".join(error.split())[:_MAX_ERROR_CHARS]
    if count >= max_failures:
        meta[FAILED] = True
    else:
        meta[RETRY_AFTER] = (now + backoff(count, backoff_s)).isoformat()
    return node.replace(meta=meta, reflected=False, updated_at=now)


def cleared(node: MemoryNode) -> MemoryNode:
    """`node` without the failure notes (itself when it has none)."""
    if not any(key in node.meta for key in _KEYS):
        return node
    return node.replace(meta={key: value for key, value in node.meta.items() if key not in _KEYS})


def _every_pending(store: MemoryStore, memory_filter: MemoryFilter) -> Iterator[MemoryNode]:
    offset = 0
    while True:
        page = store.scan(memory_filter, limit=_PAGE, offset=offset, newest_first=False)
        yield from page
        if len(page) < _PAGE:
            return
        offset += len(page)


def pending_messages(store: MemoryStore, memory_filter: MemoryFilter, limit: int, *, retry_failed: bool) -> list[MemoryNode]:
    """The first stored `limit` pending messages a run takes: the ready ones, or with
    `retry_failed` the backing-off and parked ones too."""
    if retry_failed:
        return store.scan(memory_filter, limit=limit, newest_first=False)
    now = utc_now()
    taken: list[MemoryNode] = []
    for node in _every_pending(store, memory_filter):
        if message_state(node, now) == "ready":
            taken.append(node)
            if len(taken) >= limit:
                break
    return taken


@dataclass(frozen=True)
class Backlog:
    """One user's pending messages by state."""

    ready: int = 0  # what the next run takes (and `trigger_messages` counts)
    backing_off: int = 0
    parked: int = 0  # failed `max_consolidation_failures` times; retried on demand only
    next_retry: datetime | None = None  # when the first backoff ends
    last_error: str = ""  # of the message that failed last
    retried_failures: int = 0  # failures so far of the ready messages: grows with every failed retry

    @property
    def pending(self) -> int:
        return self.ready + self.backing_off + self.parked


def backlog(store: MemoryStore, memory_filter: MemoryFilter, now: datetime | None = None) -> Backlog:
    """Count the pending messages of `memory_filter` by state (one count when there are none).
    Only the user's messages count: the assistant's replies a chat stores wait with them."""
    if store.count(memory_filter) == 0:
        return Backlog()
    now = now or utc_now()
    counts = {"ready": 0, "backing off": 0, "parked": 0}
    next_retry: datetime | None = None
    last_failed: MemoryNode | None = None
    retried = 0
    for node in _every_pending(store, memory_filter):
        if node.meta.get("role") == "assistant":
            continue  # a reply is never mined: consolidated with the user's messages, not waited for
        state = message_state(node, now)
        counts[state] += 1
        if state == "ready":
            retried += failures(node)
        elif state == "backing off":
            after = retry_after(node)
            next_retry = after if next_retry is None or (after is not None and after < next_retry) else next_retry
        if failures(node) and (last_failed is None or node.updated_at > last_failed.updated_at):
            last_failed = node
    error = last_failed.meta.get(ERROR, "") if last_failed is not None else ""
    return Backlog(
        ready=counts["ready"],
        backing_off=counts["backing off"],
        parked=counts["parked"],
        next_retry=next_retry,
        last_error=error if isinstance(error, str) else "",
        retried_failures=retried,
    )


_WAITING = {
    "en": {
        "lead": "{n} message(s) wait: ",
        "ready": "{n} ready for the next run",
        "backing off": "{n} backing off until {when} after a failed run",
        "parked": "{n} parked after repeated failures (`memoryscope run consolidate_memory --retry-failed` retries them)",
        "error": " (last error: {error})",
        "separator": ", ",
    },
    "zh": {
        "lead": "{n} 条消息在等待：",
        "ready": "{n} 条等下次整理",
        "backing off": "{n} 条因整理失败暂缓到 {when}",
        "parked": "{n} 条多次失败后搁置（`memoryscope run consolidate_memory --retry-failed` 可重试）",
        "error": "（最近的错误：{error}）",
        "separator": "，",
    },
}


def waiting_note(waiting: Backlog, language: str, zone: tzinfo) -> str:
    """What still waits for consolidation, in words ("" when nothing does): how many are ready
    for the next run, backing off until when, parked, and the last error, so a run's summary
    never reads "nothing to do" while messages wait."""
    if not waiting.pending:
        return ""
    words = _WAITING.get(language, _WAITING["en"])
    when = f"{waiting.next_retry.astimezone(zone):%Y-%m-%d %H:%M:%S %Z}".strip() if waiting.next_retry else "?"
    counts = (("ready", waiting.ready), ("backing off", waiting.backing_off), ("parked", waiting.parked))
    parts = [words[state].format(n=count, when=when) for state, count in counts if count]
    failed = waiting.backing_off or waiting.parked
    error = words["error"].format(error=waiting.last_error) if failed and waiting.last_error else ""
    return words["lead"].format(n=waiting.pending) + words["separator"].join(parts) + error
