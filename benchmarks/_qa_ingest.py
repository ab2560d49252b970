"""Ingest one LoCoMo conversation for `benchmarks.locomo_qa`, and run the config's backend
operations as its scheduler would, on demand, counting their LLM calls.

Turns go through the config's own ingest path, `MemoryScope.add(messages, infer=True)` (its
chat's store operation, `read_message` in the shipped configs): `batch_size` messages a call
(2 by default: one exchange, as a chatbot stores each), every turn as a user message of the
conversation's user (the file name) with its speaker's name, its session's date-time (in the
config's timezone) and its `dia_id`. Both speakers are "user": consolidation mines only user messages, and LoCoMo asks
about both people.

After each call, the backend operations with count triggers (`trigger_messages`,
`trigger_observations`: consolidation and reflection in the shipped configs) run on this
thread whenever the scheduler's own rule (`memoryscope._scheduler_state.fired_trigger`) says
they are due, until none is, exactly as the background scheduler would after the same messages
but deterministically (the background scheduler is turned off). Operations that only have an
`interval_time` trigger, or none, are not run. A failed run is counted and the next one goes on,
as the scheduler does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._common import Progress
from benchmarks._locomo import Conversation
from memoryscope._scheduler_state import Scope, Track, Triggers, fired_trigger, pending_counts
from memoryscope.app import MemoryScope
from memoryscope.context import Message

__all__ = ["ingest_conversation", "llm_keys", "llm_usage", "usage_delta"]

logger = logging.getLogger("benchmarks.locomo_qa")
_MOST_RUNS_PER_CHECK = 1000  # far past any real backlog: more means a trigger that spins
USAGE_FIELDS = ("calls", "errors", "prompt_tokens", "completion_tokens")


def llm_keys(scope: MemoryScope) -> list[str]:
    """The config's generation models that were built (an unreachable optional one is left out)."""
    return [name for name, spec in scope.config.models.items() if spec.role == "generation" and name in scope.models]


def llm_usage(scope: MemoryScope, keys: Sequence[str]) -> dict[str, int]:
    """Calls, errors and tokens of these models so far, summed."""
    usage = scope.usage()
    return {field: int(sum(usage[key][field] for key in keys)) for field in USAGE_FIELDS}


def usage_delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, int]:
    return {field: int(after[field] - before[field]) for field in USAGE_FIELDS}


def ingest_conversation(scope: MemoryScope, conversation: Conversation, batch_size: int, progress: Progress) -> dict[str, Any]:
    """Store every turn, run the backend operations that come due; the ingest record."""
    user = conversation.name
    service = scope.default_service
    triggered = [
        (name, Triggers.of(operation))
        for name, operation in service.operations.items()
        if operation.backend and not operation.unavailable and Triggers.of(operation).counted
    ]
    tracks = {name: Track() for name, _ in triggered}
    runs = {name: 0 for name, _ in triggered}
    errors = {name: 0 for name, _ in triggered}
    keys = llm_keys(scope)
    zone = scope.config.settings.tzinfo  # LoCoMo's times are local times without a zone: the config's
    before = llm_usage(scope, keys)
    started = time.perf_counter()
    for _, _, turns in conversation.sessions:
        messages = [Message("user", turn.content, turn.time.replace(tzinfo=zone), turn.speaker, turn.dia_id) for turn in turns]
        size = batch_size or len(messages)
        for start in range(0, len(messages), size):
            scope.add(messages[start : start + size], user_id=user, infer=True)
            for track in tracks.values():
                track.news = True  # new messages: what `notify` tells the scheduler
            _run_due(scope, user, triggered, tracks, runs, errors)
        progress.advance(len(turns))
    return {
        "record": "ingest",
        "conversation": user,
        "turns": len(conversation.turns),
        "seconds": round(time.perf_counter() - started, 3),
        "backend_runs": runs,
        "backend_errors": errors,
        "llm": usage_delta(llm_usage(scope, keys), before),
    }


def _run_due(
    scope: MemoryScope,
    user: str,
    triggered: Sequence[tuple[str, Triggers]],
    tracks: dict[str, Track],
    runs: dict[str, int],
    errors: dict[str, int],
) -> None:
    """Run the first due operation (config order), again and again, until none is due."""
    who = Scope(user)
    for _ in range(_MOST_RUNS_PER_CHECK):
        due = None
        for name, triggers in triggered:
            counts = pending_counts(scope.store, triggers, who)
            if fired_trigger(triggers, counts, tracks[name]) is not None:
                due = name, counts
                break
        if due is None:
            return
        name, counts = due
        tracks[name].news, tracks[name].settled = False, dict(counts)
        try:
            scope.default_service.run_operation(name, user)
        except Exception as error:  # the scheduler logs a failed run and goes on; so do we, counting it
            errors[name] += 1
            logger.warning("%s for %s failed: %s", name, user, error)
            continue
        runs[name] += 1
        for other, triggers in triggered:
            if other != name and triggers.observations is not None:
                tracks[other].news = True  # its writes are news for observation-triggered operations
    raise RuntimeError(f"backend operations of {user!r} still due after {_MOST_RUNS_PER_CHECK} runs: a trigger spins")
