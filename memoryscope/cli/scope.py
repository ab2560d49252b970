"""The `MemoryScope` a command works on: `--config`, with `--store` (a SQLite file) over the
config's store. Built when the command runs, so `memoryscope --help` stays fast."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memoryscope.app import MemoryScope

__all__ = ["command_scope", "store_override"]


def store_override(args: argparse.Namespace) -> dict[str, str]:
    """`--store FILE` as a config override (none when not given)."""
    store = getattr(args, "store", None)
    return {"memory_store.path": store} if store else {}


@contextmanager
def command_scope(args: argparse.Namespace) -> Iterator[MemoryScope]:
    """The command's scope, closed when the command is done."""
    from memoryscope.app import MemoryScope

    with MemoryScope(args.config, overrides=store_override(args) or None) as scope:
        yield scope
