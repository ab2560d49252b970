"""`memoryscope status`: what waits for one user's background operations.

    memoryscope status --config default --user ann

prints the figures the scheduler goes by: pending messages (ready for the next run), those
backing off after a failed run (with the next retry time), those parked as failed (with the
last error; `memoryscope run consolidate_memory --user ann --retry-failed` takes them again),
unreflected observations, and the runs this process made, if any.
"""

from __future__ import annotations

import argparse
import shlex
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    from memoryscope._scheduler_state import SchedulerStatus, Scope
    from memoryscope.stores.base import MemoryStore

__all__ = ["add_status_commands", "status_lines"]


def add_status_commands(commands: Any) -> None:
    """Register `status` on the `memoryscope` command's subparsers."""
    status = commands.add_parser("status", help="pending, backing-off and failed messages of one user, and recent runs")
    status.add_argument("--config", default="default", help="config name or path (default: default)")
    status.add_argument("--user", default=None, help="whose memories (default: the service's human_name)")
    status.add_argument("--target", default="", help="the target the memories are about, if any")
    status.add_argument("--workspace", default="", help="the workspace, if any")
    status.set_defaults(handler=_status)


def _status(args: argparse.Namespace) -> int:
    from memoryscope._scheduler_state import Scope
    from memoryscope.app import MemoryScope
    from memoryscope.errors import MemoryScopeError
    from memoryscope.text import terminal_safe  # errors and names come from the store: shown, never run

    with MemoryScope(args.config) as scope:
        service = scope.default_service
        if scope.store is None:
            raise MemoryScopeError("this config has no memory_store: nothing is pending anywhere")
        who = Scope(args.user or service.params.human_name, args.target, args.workspace)
        for line in status_lines(scope.store, service.scheduler.status(), who, scope.config.settings.tzinfo):
            print(terminal_safe(line))
    return 0


def status_lines(store: MemoryStore, status: SchedulerStatus, who: Scope, zone: ZoneInfo) -> list[str]:
    """The figures of `who`, one per line."""
    from memoryscope._scheduler_state import count_pending, message_backlog

    messages = message_backlog(store, who)
    next_retry = f" (next retry {_when(messages.next_retry, zone)})" if messages.next_retry else ""
    command = f"memoryscope run consolidate_memory --user {shlex.quote(who.user_name)} --retry-failed"
    retry = f" (retry them: {command})" if messages.parked else ""
    lines = [
        f"user {who.label}",
        f"  pending messages: {messages.ready}",
        f"  backing off: {messages.backing_off}{next_retry}",
        f"  parked as failed: {messages.parked}{retry}",
    ]
    if messages.last_error and (messages.parked or messages.backing_off or messages.retried_failures):
        lines.append(f"  last error: {messages.last_error}")
    lines.append(f"  unreflected observations: {count_pending(store, 'observations', who)}")
    runs = sorted(
        (record for (label, _), record in status.last_runs.items() if label == who.label),
        key=lambda record: record.started_at,
    )
    if not runs:
        lines.append("  last runs: none in this process")
    for record in runs:
        outcome = f"failed: {record.error}" if record.error else ("abandoned" if record.abandoned else record.result)
        lines.append(f"  last {record.operation} ({_when(record.started_at, zone)}, {record.trigger}): {outcome}")
    return lines


def _when(moment: datetime | None, zone: ZoneInfo) -> str:
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z") if moment is not None else "-"
