"""`memoryscope status | profile | tiers`: what waits for one user's background operations and
what ran; what is known about them; their memories by the policy's tiers (MemoryOS's).

    memoryscope status --config default --user ann
    memoryscope profile --config memoryos --user ann [--json]
    memoryscope tiers --config memoryos --user ann [--json]

prints the figures the scheduler goes by: pending messages (ready for the next run), those
backing off after a failed run (with the next retry time), those parked as failed (with the
last error; `memoryscope run consolidate_memory --user ann --retry-failed` takes them again),
unreflected observations, and the runs that changed the user's memories, read from the store
(any process's: a server's background consolidation too). A face over `memoryscope.door`.
"""

from __future__ import annotations

import argparse
import json
import shlex
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from memoryscope.cli.scope import command_scope
from memoryscope.door import Status
from memoryscope.door.failures import EXIT_OK
from memoryscope.text import terminal_safe  # errors and names come from the store: shown, never run

__all__ = ["add_status_commands", "status_lines"]


def add_status_commands(commands: Any) -> None:
    """Register `status` on the `memoryscope` command's subparsers."""
    status = commands.add_parser("status", help="pending, backing-off and failed messages of one user, and recent runs")
    _user_options(status).set_defaults(handler=_status)
    profile = commands.add_parser("profile", help="what is known about one user, by the config's memory policy")
    _user_options(profile).add_argument("--json", action="store_true", help="the profile as one JSON object")
    profile.set_defaults(handler=_profile)
    tiers = commands.add_parser("tiers", help="one user's memories by the policy's tiers (MemoryOS: short, mid, long)")
    _user_options(tiers).add_argument("--json", action="store_true", help="the tiers as one JSON object")
    tiers.set_defaults(handler=_tiers)


def _user_options(command: argparse.ArgumentParser) -> argparse.ArgumentParser:
    command.add_argument("--config", default="default", help="config name or path (default: default)")
    command.add_argument("--store", default=None, help="SQLite file to use instead of the config's")
    command.add_argument("--user", default=None, help="whose memories (default: the service's human_name)")
    command.add_argument("--target", default="", help="the target the memories are about, if any")
    command.add_argument("--workspace", default="", help="the workspace, if any")
    return command


def _status(args: argparse.Namespace) -> int:
    with command_scope(args, "status") as scope:
        door = scope.door
        found = door.status(door.caller(args.user, workspace=args.workspace, target=args.target))
        for line in status_lines(found, scope.config.settings.tzinfo):
            print(terminal_safe(line))
    return EXIT_OK


def _profile(args: argparse.Namespace) -> int:
    with command_scope(args, "profile") as scope:
        door = scope.door
        found = door.profile(door.caller(args.user, workspace=args.workspace, target=args.target))
    if args.json:
        print(terminal_safe(json.dumps(found.to_dict(), ensure_ascii=False)))
    else:
        print(terminal_safe(found.text or f"no profile of {found.user_id} yet ({found.policy})"))
    return EXIT_OK


def _tiers(args: argparse.Namespace) -> int:
    with command_scope(args) as scope:
        door = scope.door
        found = door.tiers(door.caller(args.user, workspace=args.workspace, target=args.target))
    if args.json:
        print(terminal_safe(json.dumps(found.to_dict(), ensure_ascii=False)))
        return EXIT_OK
    if found.policy != "memoryos":
        print(terminal_safe(f"the {found.policy} policy keeps no tiers; see `memoryscope profile`"))
        return EXIT_OK
    threshold = f", promoted at heat {found.heat_threshold:g}" if found.heat_threshold is not None else ""
    lines = [f"long term: profile: {found.profile.memory if found.profile else '(none yet)'}"]
    lines += [f"  knowledge: {entry.memory}" for entry in found.knowledge]
    lines.append(f"mid term: {len(found.mid_term)} segments{threshold}")
    lines += [f"  heat {segment.heat:.2f} ({len(segment.pages)} pages): {segment.record.memory}" for segment in found.mid_term]
    lines.append(f"short term: {len(found.short_term)} pages, oldest first")
    lines += ["  " + page.memory.replace("\n", " ") for page in found.short_term]
    for line in lines:
        print(terminal_safe(line))
    return EXIT_OK


def status_lines(status: Status, zone: ZoneInfo) -> list[str]:
    """The figures of one user, one per line."""
    backlog = status.pending_messages
    next_retry = f" (next retry {_when(backlog.get('next_retry'), zone)})" if backlog.get("next_retry") else ""
    command = f"memoryscope run consolidate_memory --user {shlex.quote(status.user_id)} --retry-failed"
    retry = f" (retry them: {command})" if backlog.get("parked") else ""
    lines = [
        f"user {status.label}",
        f"  pending messages: {backlog.get('ready', 0)}",
        f"  backing off: {backlog.get('backing_off', 0)}{next_retry}",
        f"  parked as failed: {backlog.get('parked', 0)}{retry}",
    ]
    if backlog.get("last_error") and (backlog.get("parked") or backlog.get("backing_off") or backlog.get("retried_failures")):
        lines.append(f"  last error: {backlog['last_error']}")
    lines.append(f"  unreflected observations: {status.unreflected_observations}")
    if not status.stored_runs:
        lines.append("  last runs: none recorded")
    for change in status.stored_runs:
        lines.append(f"  last {change.operation or 'change'} ({_when(change.at, zone)}): run {change.run_id}")
    for operation, record in status.last_errors.items():
        lines.append(f"  last {operation} in this process failed: {record.get('error', '')}")
    return lines


def _when(moment: datetime | str | None, zone: ZoneInfo) -> str:
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z") if moment is not None else "-"
