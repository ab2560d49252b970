"""`memoryscope history | undo | pin | unpin`: what happened to memories, and taking a run back.

    memoryscope history 6f1c...                 # every change to one memory
    memoryscope history --user ann [--json]     # a user's changes, with the run that made each
    memoryscope undo RUN_ID                     # revert one consolidation or reflection run
    memoryscope pin 6f1c...                     # consolidation and reflection never expire or change it

Each handler returns the exit code: 0 done, 1 when `undo` refused some memories, 2 on a
MemoryScope error (printed by `memoryscope.cli.main`).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from memoryscope.errors import MemoryScopeError
from memoryscope.history import MemoryChange, undo_run
from memoryscope.text import terminal_safe

if TYPE_CHECKING:
    from memoryscope.stores.base import MemoryStore

__all__ = ["add_history_commands"]


def add_history_commands(subparsers: Any) -> None:
    history = subparsers.add_parser("history", help="show the changes made to memories (one memory, a user, a run)")
    history.add_argument("memory_id", nargs="?", default=None, help="the memory (list_memory shows ids)")
    history.add_argument("--user", default=None, help="every change to this user's memories")
    history.add_argument("--run", default=None, help="every change one run made")
    history.add_argument("--limit", type=int, default=1000, help="at most this many changes (default: 1000)")
    history.add_argument("--json", action="store_true", help="one JSON object per change")
    _store_options(history)
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


def _store_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--config", default="default", help="config name or YAML path (default: default)")
    command.add_argument("--store", default=None, help="SQLite file to use instead of the config's")


def _open(args: argparse.Namespace) -> MemoryStore:
    from memoryscope.transfer.stores import open_store

    return open_store(args.config, overrides={"memory_store.path": args.store} if args.store else None)


def _history(args: argparse.Namespace) -> int:
    if args.memory_id is None and args.user is None and args.run is None:
        raise MemoryScopeError("say whose history: a memory id, --user NAME or --run RUN_ID")
    with _open(args) as store:
        changes = store.history(memory_id=args.memory_id, user_name=args.user, run_id=args.run, limit=args.limit)
    for change in changes:
        print(terminal_safe(json.dumps(change.to_dict(), ensure_ascii=False) if args.json else _line(change)))
    if not changes and not args.json:
        print("no changes recorded")
    return 0


def _undo(args: argparse.Namespace) -> int:
    with _open(args) as store:
        plan, undo_id = undo_run(store, args.run_id)
    print(f"undo of run {args.run_id} (recorded as run {undo_id}): {len(plan.restore)} restored, {len(plan.delete)} deleted")
    for memory_id, reason in plan.refused.items():
        print(f"  refused {memory_id}: {reason}")
    return 1 if plan.refused else 0


def _pin(args: argparse.Namespace) -> int:
    with _open(args) as store:
        found = store.get([args.memory_id])
        if not found:
            raise MemoryScopeError(f"no memory {args.memory_id!r} (list_memory shows ids)")
        meta = {key: value for key, value in found[0].meta.items() if key != "pinned"}
        store.update(args.memory_id, meta={**meta, "pinned": True} if args.pinned else meta)
    print(f"{'pinned' if args.pinned else 'unpinned'} {args.memory_id}")
    return 0


def _line(change: MemoryChange) -> str:
    state = change.after or change.before or {}
    text = state.get("content", "(content not kept)")
    by = change.operation or "direct"
    run = f" run {change.run_id}" if change.run_id else ""
    return f"{change.at.isoformat(timespec='seconds')} {change.action:<8} {change.memory_id} by {by}{run}: {text}"
