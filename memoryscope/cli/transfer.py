"""`memoryscope export | import | migrate | reembed`, for the command-line parser to add.

    commands = parser.add_subparsers(dest="command", required=True)
    add_transfer_commands(commands)
    args = parser.parse_args(argv)
    return args.handler(args)

Each handler returns the exit code: 0 done, 2 on a MemoryScope error (printed as `error: ...`
on stderr), 130 when interrupted. Progress and summaries go to stderr, so `export --out -`
can write the memories to stdout. This module imports nothing heavy until a command runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from memoryscope.errors import MemoryScopeError

__all__ = ["add_transfer_commands"]


def add_transfer_commands(subparsers: Any) -> None:
    """Add the four commands to `subparsers` (what `ArgumentParser.add_subparsers()` returned)."""
    export = subparsers.add_parser("export", help="write a store's memories to a JSON lines file", description=_export.__doc__)
    export.add_argument("--config", default="default", help="config name or YAML path (default: default)")
    export.add_argument("--out", required=True, help="file to write (`-` for stdout)")
    export.add_argument("--vectors", action="store_true", help="include each memory's vector")
    export.add_argument("--user", default=None, help="only this user's memories")
    export.add_argument("--batch", type=_positive, default=500, help="memories per read (default: 500)")
    export.set_defaults(handler=_guarded(_export))

    load = subparsers.add_parser("import", help="add the memories of a JSON lines file to a store", description=_import.__doc__)
    load.add_argument("file", help="file written by `memoryscope export` (`-` for stdin)")
    load.add_argument("--config", default="default", help="config name or YAML path (default: default)")
    load.add_argument("--batch", type=_positive, default=500, help="memories per write (default: 500)")
    load.set_defaults(handler=_guarded(_import))

    migrate = subparsers.add_parser(
        "migrate", help="copy every memory from one config's store to another's", description=_migrate.__doc__
    )
    migrate.add_argument("--from", dest="from_config", required=True, help="config of the store to read")
    migrate.add_argument("--to", dest="to_config", required=True, help="config of the store to write")
    migrate.add_argument("--batch", type=_positive, default=500, help="memories per write (default: 500)")
    migrate.add_argument("--restart", action="store_true", help="write every memory again, even those already in the target")
    migrate.set_defaults(handler=_guarded(_migrate))

    reembed = subparsers.add_parser(
        "reembed", help="embed every memory again after changing the embedding model", description=_reembed.__doc__
    )
    reembed.add_argument("--config", default="default", help="config name or YAML path (default: default)")
    reembed.add_argument("--store", default=None, help="SQLite file to use instead of the config's")
    reembed.add_argument("--batch", type=_positive, default=256, help="memories per embedding call (default: 256)")
    reembed.add_argument("--force", action="store_true", help="re-embed even if the store already uses this model")
    reembed.set_defaults(handler=_guarded(_reembed))


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _guarded(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except MemoryScopeError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            hint = "; run the same command again to resume" if handler in (_migrate, _reembed) else ""
            print(f"\ninterrupted{hint}", file=sys.stderr)
            return 130

    run.__doc__ = handler.__doc__
    return run


def _export(args: argparse.Namespace) -> int:
    """Write every memory of the config's store (or of one user) to a JSON lines file: a header
    naming the embedding model, one memory per line (every field, and its vector with
    --vectors), an end line with the count."""
    from memoryscope.app import require_store_file
    from memoryscope.config.loading import load_config
    from memoryscope.progress import StderrProgress
    from memoryscope.transfer.jsonl import export_memories
    from memoryscope.transfer.stores import open_store

    config = load_config(args.config)
    require_store_file(config)  # a read: a store that does not exist is named, not created
    with open_store(config) as store:
        out = sys.stdout if args.out == "-" else args.out
        count = export_memories(
            store, out, include_vectors=args.vectors, user_name=args.user, batch_size=args.batch, progress=StderrProgress()
        )
    print(f"exported {count} memories to {'stdout' if args.out == '-' else args.out}", file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    """Add (or replace, by memory id) the memories of a file written by `memoryscope export`.
    Every line is checked before anything is written. The file's vectors are used when they
    were made by the store's embedding model; otherwise the memories are embedded again."""
    from memoryscope.progress import StderrProgress
    from memoryscope.transfer.jsonl import import_memories
    from memoryscope.transfer.stores import open_store

    with open_store(args.config) as store:
        source = sys.stdin if args.file == "-" else args.file
        count = import_memories(store, source, batch_size=args.batch, progress=StderrProgress())
    print(f"imported {count} memories into {store!r}", file=sys.stderr)
    return 0


def _migrate(args: argparse.Namespace) -> int:
    """Copy every memory of every user from one config's store to another's (e.g. embedded
    SQLite to Elasticsearch), then check the counts per user. Interrupted or failed, the same
    command resumes: memories already in the target are skipped."""
    from memoryscope.progress import StderrProgress
    from memoryscope.transfer.stores import migrate

    report = migrate(args.from_config, args.to_config, batch_size=args.batch, progress=StderrProgress(), resume=not args.restart)
    print(
        f"migrated {report.total} memories of {len(report.users)} users in {report.seconds:.1f}s "
        f"({report.copied} written, {report.skipped} already there); counts verified",
        file=sys.stderr,
    )
    return 0


def _reembed(args: argparse.Namespace) -> int:
    """After changing the embedding model in a config, embed every memory of its store again
    with the new model; the store then opens with it. Stop other users of the store first.
    With the model unchanged, it fills the keyword field of an Elasticsearch index's older
    memories in place (nothing is embedded)."""
    from memoryscope.config.loading import load_config
    from memoryscope.progress import StderrProgress
    from memoryscope.transfer.stores import reembed

    config = load_config(args.config, {"memory_store.path": args.store} if args.store else None)
    count = reembed(config, batch_size=args.batch, progress=StderrProgress(), force=args.force)
    print(f"re-embedded {count} memories", file=sys.stderr)
    return 0
