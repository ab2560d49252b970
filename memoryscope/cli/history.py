"""`memoryscope history | undo | pin | unpin`: what happened to memories, and taking a run back.

    memoryscope history 6f1c...                 # every change to one memory
    memoryscope history --user ann [--json]     # a user's changes, with the run that made each
    memoryscope undo RUN_ID                     # revert one consolidation or reflection run
    memoryscope pin 6f1c...                     # consolidation and reflection never expire or change it

A face over `memoryscope.door`: `--user` narrows a memory id or a run to that user's (without
it, any user's). Each handler returns the exit code: 0 done, 1 when `undo` refused some memories
or something named by id does not exist; the other failures as the door's table says (printed by
`memoryscope.cli.main`). Undoing a run twice does nothing the second time, and says so.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from memoryscope.cli.scope import command_scope
from memoryscope.door.failures import EXIT_OK
from memoryscope.errors import InvalidInputError
from memoryscope.history import MemoryChange
from memoryscope.text import terminal_safe

__all__ = ["add_history_commands"]

EXIT_REFUSED = 1  # undo refused some memories (a later change built on them)


def add_history_commands(subparsers: Any) -> None:
    history = subparsers.add_parser("history", help="show the changes made to memories (one memory, a user, a run)")
    history.add_argument("memory_id", nargs="?", default=None, help="the memory (list_memory shows ids)")
    history.add_argument("--user", default=None, help="every change to this user's memories")
    history.add_argument("--run", default=None, help="every change one run made")
    history.add_argument("--limit", type=int, default=1000, help="at most this many changes (default: 1000)")
    history.add_argument("--json", action="store_true", help="one JSON object per change")
    _store_options(history, user=False)
    history.set_defaults(handler=_history)

    undo = subparsers.add_parser("undo", help="revert what one run (a consolidation, a reflection) changed")
    undo.add_argument("run_id", help="the run (memoryscope history --user U shows runs)")
    _store_options(undo)
    undo.set_defaults(handler=_undo)

    for name, pinned in (("pin", True), ("unpin", False)):
        command = subparsers.add_parser(
            name, help="keep a memory from being expired or changed by consolidation and reflection" if pinned else "undo `pin`"
        )
        command.add_argument("memory_id", help="the memory (list_memory shows ids)")
        _store_options(command)
        command.set_defaults(handler=_pin, pinned=pinned)


def _store_options(command: argparse.ArgumentParser, *, user: bool = True) -> None:
    command.add_argument("--config", default="default", help="config name or YAML path (default: default)")
    command.add_argument("--store", default=None, help="SQLite file to use instead of the config's")
    if user:
        command.add_argument("--user", default=None, help="only a memory or run of this user (default: any user's)")


def _history(args: argparse.Namespace) -> int:
    if args.memory_id is None and args.user is None and args.run is None:
        raise InvalidInputError("say whose history: a memory id, --user NAME or --run RUN_ID")
    with command_scope(args, "history") as scope:
        door = scope.door
        if args.memory_id is not None:
            changes = door.history(door.caller(args.user, workspace=None), args.memory_id)[: args.limit]
        else:
            changes = door.changes(door.caller(args.user, workspace=None), run_id=args.run, limit=args.limit)
    for change in changes:
        print(terminal_safe(json.dumps(change.to_dict(), ensure_ascii=False) if args.json else _line(change)))
    if not changes and not args.json:
        print("no changes recorded")
    return EXIT_OK


def _undo(args: argparse.Namespace) -> int:
    with command_scope(args) as scope:
        door = scope.door
        outcome = door.undo(door.caller(args.user, workspace=None), args.run_id)
    if outcome.already_undone:
        print(f"run {args.run_id} was undone already (as run {outcome.undo_run_id}): nothing more to do")
        return EXIT_OK
    restored, deleted = len(outcome.restored), len(outcome.deleted)
    print(f"undo of run {args.run_id} (recorded as run {outcome.undo_run_id}): {restored} restored, {deleted} deleted")
    for memory_id, reason in outcome.refused.items():
        print(f"  refused {memory_id}: {reason}")
    return EXIT_REFUSED if outcome.refused else EXIT_OK


def _pin(args: argparse.Namespace) -> int:
    with command_scope(args) as scope:
        door = scope.door
        door.pin(door.caller(args.user, workspace=None), args.memory_id, pinned=args.pinned)
    print(f"{'pinned' if args.pinned else 'unpinned'} {args.memory_id}")
    return EXIT_OK


def _line(change: MemoryChange) -> str:
    state = change.after or change.before or {}
    text = state.get("content", "(content not kept)")
    by = change.operation or "direct"
    run = f" run {change.run_id}" if change.run_id else ""
    return f"{change.at.isoformat(timespec='seconds')} {change.action:<8} {change.memory_id} by {by}{run}: {text}"
