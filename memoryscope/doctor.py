"""`memoryscope doctor --config C`: a full check of a config's memory store, as a readable report.

What is checked is the store's `check(full=True)`: for `sqlite_memory_store` SQLite's own
`integrity_check` of the file, every row (each decodes), every vector (the store's dimension,
finite numbers) and the keyword index (an entry for every memory, none left over); for other
stores every memory of every user is read and counted. A SQLite file too damaged to open as a
store gets SQLite's check alone. Each problem names the memory and what to do; the exit status
is 0 when nothing is wrong and 1 when something is (2, from the command, for a bad config).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from memoryscope.errors import ConfigError, StoreError

__all__ = ["run_doctor"]

_SHOWN = 50  # problems listed per check; the rest are counted


def run_doctor(config: str, out: TextIO | None = None) -> int:
    """Check the store of `config` (a name or a YAML path), print the report to `out`; the exit status."""
    from memoryscope.config import load_config
    from memoryscope.text import terminal_safe  # stored text may hold escape codes: shown, never run
    from memoryscope.transfer.stores import open_store

    stream = out or sys.stdout

    def say(line: str) -> None:
        print(terminal_safe(line), file=stream)

    loaded = load_config(config)
    spec = loaded.store
    if spec is None:
        raise ConfigError([("memory_store", "this config has no memory store")], source=loaded.source)
    path = getattr(spec.params, "path", None)
    say(f"memory store: {spec.cls.__name__}" + (f" at {path}" if path is not None else ""))
    if isinstance(path, Path) and not path.exists():
        say(f"  no such file: {path} (nothing to check; the store creates it when first opened)")
        return 1
    try:
        store = open_store(loaded)
    except StoreError as error:
        say(f"  cannot open it: {error}")
        check_file = getattr(spec.cls, "check_file", None)
        if isinstance(path, Path) and check_file is not None:
            _print_problems(say, "file (PRAGMA integrity_check)", [str(line) for line in check_file(path, full=True)])
        return 1
    try:
        with store:
            counts = store.user_counts()
            say(f"  {sum(counts.values())} memories of {len(counts)} users")
            for user_name, count in sorted(counts.items())[:20]:
                say(f"    {user_name!r}: {count}")
            if len(counts) > 20:
                say(f"    ... and {len(counts) - 20} more users")
            report = store.check(full=True)
    except StoreError as error:
        say(f"  the check stopped: {error}")
        return 1
    for name, problems in report.items():
        _print_problems(say, name, problems)
    failed = any(report.values())
    say("something is wrong: see above" if failed else "ok: nothing wrong found")
    return 1 if failed else 0


def _print_problems(say: Callable[[str], None], name: str, problems: list[str]) -> None:
    if not problems:
        say(f"  {name}: ok")
        return
    say(f"  {name}: {len(problems)} problem{'s' if len(problems) > 1 else ''}")
    for problem in problems[:_SHOWN]:
        say(f"    - {problem}")
    if len(problems) > _SHOWN:
        say(f"    ... and {len(problems) - _SHOWN} more")
