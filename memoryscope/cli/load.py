"""`memoryscope load`: read files, folders or stdin into a named data source (MemGPT's `memgpt load`).

    memoryscope load --name docs handbook.pdf notes/          # files and folders (.txt, .md, .pdf)
    cat notes.md | memoryscope load --name docs -             # stdin
    memoryscope load directory --name docs --input-dir notes/ --recursive   # MemGPT's spelling
    memoryscope load --list                                   # the sources and their sizes
    memoryscope load --delete docs

The text is cut into passages (by paragraphs, about 1,000 characters, overlapping) and embedded
into the source, kept in the store for the user (`--user`, default the config's user); loading
the same file again adds nothing. `/attach NAME` in `memoryscope agent` lets the agent's
`archival_memory_search` find the passages. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from memoryscope.errors import InvalidInputError

__all__ = ["add_load_commands", "run_load"]

_MEMGPT_WORD = "directory"  # `memgpt load directory --name ...`
_DEFAULT_EXTENSIONS = ".txt,.md,.pdf"  # MemGPT's


def add_load_commands(commands: Any) -> None:
    load = commands.add_parser(
        "load", help="read files, folders or stdin into a named data source an agent can /attach", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    load.add_argument("paths", nargs="*", help="files and folders to read; - reads stdin")
    load.add_argument("--name", default=None, help="the data source's name (made on first load)")
    load.add_argument("--input-dir", dest="input_dir", default=None, help="a folder to read (MemGPT's spelling)")
    load.add_argument(
        "--input-files", dest="input_files", nargs="+", action="extend", default=[], help="files to read (MemGPT's spelling)"
    )
    load.add_argument("--recursive", action="store_true", help="read the folders' subfolders too")
    load.add_argument(
        "--extensions",
        default=_DEFAULT_EXTENSIONS,
        help=f"comma-separated suffixes read in folders (default {_DEFAULT_EXTENSIONS})",
    )
    load.add_argument("--description", default=None, help="a line saying what the source holds")
    load.add_argument("--list", action="store_true", help="list the data sources")
    load.add_argument("--delete", default=None, metavar="NAME", help="delete a data source and its passages")
    load.add_argument("--config", default="agent", help="config name or YAML path (default: agent)")
    load.add_argument("--user", default=None, help="whose source (default: the config's user)")
    load.set_defaults(handler=lambda args: run_load(args))


def run_load(
    args: argparse.Namespace, *, stdin: TextIO | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run `memoryscope load` as parsed into `args`; the exit code."""
    from memoryscope.app import MemoryScope
    from memoryscope.door import Document, read_documents
    from memoryscope.progress import StderrProgress

    stdout, stderr = out or sys.stdout, err or sys.stderr
    paths = list(args.paths)
    if paths and paths[0] == _MEMGPT_WORD and not Path(_MEMGPT_WORD).exists():
        paths = paths[1:]
    paths += ([args.input_dir] if args.input_dir else []) + list(args.input_files)
    if not args.list and not args.delete:
        if not args.name:
            raise InvalidInputError("load: name the data source (--name NAME)")
        if not paths:
            raise InvalidInputError("load: give files or folders to read (or - for stdin)")
    suffixes = [part.strip() for part in args.extensions.split(",") if part.strip()]
    if not suffixes:
        raise InvalidInputError(f"load: --extensions {args.extensions!r} names no suffix; e.g. {_DEFAULT_EXTENSIONS}")
    with MemoryScope(args.config, overrides=_no_llm_needed(args.config)) as scope:
        door = scope.door
        caller = door.caller(args.user)
        if args.list:
            for source in door.list_sources(caller):
                count = len(source.documents)
                print(f"{source.name}\t{source.passages} passages from {count} documents\t{source.description}", file=stdout)
            return 0
        if args.delete:
            source = door.delete_source(caller, args.delete)
            print(f"deleted data source {source.name!r} ({source.passages} passages)", file=stdout)
            return 0
        files = [path for path in paths if path != "-"]
        documents, skipped = read_documents(files, recursive=args.recursive, suffixes=suffixes) if files else ([], [])
        if "-" in paths:
            documents.append(Document("<stdin>", (stdin or sys.stdin).read()))
        for path in skipped:
            print(f"skipped {path} (not {', '.join(suffixes)})", file=stderr)
        loaded = door.load_source(caller, args.name, documents, description=args.description, progress=StderrProgress(stderr))
        source = loaded.source
        print(
            f"loaded {loaded.documents} document{'s' if loaded.documents != 1 else ''} into data source {source.name!r}: "
            f"{loaded.added} passages added, {loaded.already_loaded} already there"
            + (f", {loaded.removed} no longer in their documents removed" if loaded.removed else "")
            + f" ({source.passages} in all)",
            file=stdout,
        )
        return 0


def _no_llm_needed(config: str) -> dict[str, bool]:
    """Overrides that let the config open without its LLM's key: loading only embeds (the
    `agent` config requires its generation model, which the agent needs and `load` does not)."""
    from memoryscope.config import load_config

    models = load_config(config).models.items()
    return {f"model.{name}.required": False for name, spec in models if spec.required and spec.role == "generation"}
