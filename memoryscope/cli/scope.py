"""The `MemoryScope` a command works on: `--config`, with `--store` (a SQLite file) over the
config's store. Built when the command runs, so `memoryscope --help` stays fast.

A command that only reads (its verb's scope in the door's table is `read`) opens an existing
store only: a store file that does not exist is named as such and nothing is created. A write
creates the file and its missing folders, as the default `~/.memoryscope/` is made on first use.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from memoryscope.door.caller import READ
from memoryscope.door.verbs import VERBS

if TYPE_CHECKING:
    from memoryscope.app import MemoryScope

__all__ = ["command_scope", "run_verb", "store_override"]


def store_override(args: argparse.Namespace) -> dict[str, str]:
    """`--store FILE` as a config override (none when not given)."""
    store = getattr(args, "store", None)
    return {"memory_store.path": store} if store else {}


def run_verb(operation: str) -> str:
    """The verb `memoryscope run OPERATION` is, by the door's table: `get_all` for `run
    list_memory`, `search` for `run retrieve_memory`, else `run`."""
    for verb in VERBS:
        if verb.cli == f"run {operation}" or (verb.scope == READ and verb.operation == operation):
            return verb.name
    return "run"


@contextmanager
def command_scope(args: argparse.Namespace, verb: str = "run") -> Iterator[MemoryScope]:
    """The scope of a command that is `verb` (a name in the door's table), closed when it is done."""
    from memoryscope.app import MemoryScope

    reads = any(each.name == verb and each.scope == READ for each in VERBS)
    with MemoryScope(args.config, overrides=store_override(args) or None, store_must_exist=reads) as scope:
        yield scope
