"""`memoryscope add | search | get | update | delete`: the simple memory API on the command line.

    memoryscope add "I moved to Hangzhou" --user lin                # kept; consolidation extracts facts
    memoryscope add "prefers tea" --user lin --no-infer --meta source=crm --meta rating=4
    memoryscope search "where does Lin live?" --user lin --top-k 5 --filter source=crm --json
    memoryscope search "tea" --user lin --filters '{"rating": {"gte": 3}}' --type obs_customized
    memoryscope get ID [--json]
    memoryscope update ID --text "prefers green tea" --meta rating=5
    memoryscope delete ID [ID ...]          # or: memoryscope delete --all --user lin
    memoryscope history ID                  # (memoryscope.cli_history)

`--meta KEY=VALUE` and `--filter KEY=VALUE` read VALUE as JSON when it is JSON (`4`, `true`,
`["a", "b"]`), else as text. `--json` prints one JSON object per memory and nothing else on
stdout. Exit codes: 0 done, 1 when a memory asked for by id does not exist, 2 on misuse.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memoryscope.errors import MemoryScopeError
from memoryscope.text import terminal_safe

if TYPE_CHECKING:
    from memoryscope.app import MemoryScope
    from memoryscope.memory_api import MemoryRecord

__all__ = ["add_memory_commands"]


def add_memory_commands(subparsers: Any) -> None:
    add = _command(subparsers, "add", "remember texts for a user (kept as the conversation, or as given with --no-infer)")
    add.add_argument("text", nargs="+", help="what to remember (each argument one message)")
    add.add_argument("--role", choices=("user", "assistant"), default="user", help="who said it (default: user)")
    add.add_argument("--no-infer", dest="infer", action="store_false", help="store each text as one memory, as given")
    add.add_argument("--time", default=None, help="when it was said, ISO 8601 (default: now)")
    _metadata_option(add)
    add.set_defaults(handler=_add)

    search = _command(subparsers, "search", "the memories that best answer a query, with scores")
    search.add_argument("query", help="the question")
    search.add_argument("--top-k", type=int, default=10, help="how many memories (default: 10)")
    _filter_options(search)
    search.add_argument("--since", default=None, help="only memories said at or after this ISO 8601 time")
    search.add_argument("--until", default=None, help="only memories said before this ISO 8601 time")
    search.set_defaults(handler=_search)

    get = _command(subparsers, "get", "show memories by id")
    get.add_argument("ids", nargs="+", metavar="ID", help="memory ids (list_memory and search show them)")
    get.set_defaults(handler=_get)

    update = _command(subparsers, "update", "change a memory's text (embedded again) or metadata")
    update.add_argument("id", metavar="ID", help="the memory")
    update.add_argument("--text", default=None, help="its new text")
    _metadata_option(update, unset=True)
    update.set_defaults(handler=_update)

    delete = _command(subparsers, "delete", "delete memories by id, or all of a user's with --all")
    delete.add_argument("ids", nargs="*", metavar="ID", help="memory ids")
    delete.add_argument("--all", action="store_true", help="every memory of --user")
    delete.set_defaults(handler=_delete)


# -- handlers ----------------------------------------------------------------------------------


def _add(args: argparse.Namespace) -> int:
    messages = [{"role": args.role, "content": text} for text in args.text]
    if args.time:
        for message in messages:
            message["time"] = args.time
    with _scope(args) as scope:
        added = scope.add(messages, args.user, metadata=_pairs(args.meta, "--meta"), infer=args.infer)
        _show(added, args.json)
        if not added and not args.json:
            print("already remembered: nothing new stored")
    return 0


def _search(args: argparse.Namespace) -> int:
    time_range = (_time(args.since, "--since"), _time(args.until, "--until")) if args.since or args.until else None
    with _scope(args) as scope:
        found = scope.search(
            args.query, args.user, top_k=args.top_k, filters=_filters(args), types=args.types, time_range=time_range
        )
        _show(found, args.json, scores=True)
        if not found and not args.json:
            print("no memories found")
    return 0


def _get(args: argparse.Namespace) -> int:
    missing = 0
    with _scope(args) as scope:
        for memory_id in args.ids:
            record = scope.get(memory_id)
            if record is None:
                missing += 1
                print(f"no memory has the id {memory_id!r}", file=sys.stderr)
            else:
                _show([record], args.json, details=True)
    return 1 if missing else 0


def _update(args: argparse.Namespace) -> int:
    metadata = _pairs(args.meta, "--meta")
    for key in args.unset:
        metadata[key] = None
    if args.text is None and not metadata:
        raise MemoryScopeError("`memoryscope update` needs --text, --meta KEY=VALUE or --unset KEY")
    with _scope(args) as scope:
        record = scope.update(args.id, args.text, metadata=metadata or None)
        _show([record], args.json, details=True)
    return 0


def _delete(args: argparse.Namespace) -> int:
    if args.all == bool(args.ids):
        raise MemoryScopeError("`memoryscope delete` takes memory ids, or --all --user NAME (not both)")
    with _scope(args) as scope:
        if args.all:
            count = scope.delete_all(args.user)
            _said(f"deleted all {count} memories of {args.user or scope.default_service.params.human_name}", args.json)
            return 0
        missing = [memory_id for memory_id in args.ids if not scope.delete(memory_id)]
    for memory_id in missing:
        print(f"no memory has the id {memory_id!r}", file=sys.stderr)
    _said(f"deleted {len(args.ids) - len(missing)} of {len(args.ids)} memories", args.json)
    return 1 if missing else 0


# -- pieces ------------------------------------------------------------------------------------


def _command(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    command: argparse.ArgumentParser = subparsers.add_parser(name, help=help_text)
    command.add_argument("--config", default="default", help="config name or YAML path (default: default)")
    command.add_argument("--store", default=None, help="SQLite file to use instead of the config's")
    command.add_argument("--user", default=None, help="whose memories (default: the service's human_name)")
    command.add_argument("--json", action="store_true", help="one JSON object per memory, nothing else on stdout")
    return command


def _metadata_option(command: argparse.ArgumentParser, unset: bool = False) -> None:
    command.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE", help="metadata (repeatable)")
    if unset:
        command.add_argument("--unset", action="append", default=[], metavar="KEY", help="remove a metadata key")


def _filter_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--filter", action="append", default=[], metavar="KEY=VALUE", help="only memories whose metadata KEY is VALUE"
    )
    command.add_argument(
        "--filters", default=None, metavar="JSON", help='metadata filters as JSON: {"rating": {"gte": 3}, "tag": {"in": [...]}}'
    )
    command.add_argument(
        "--type", action="append", default=None, dest="types", help="only this memory type (repeatable): observation, ..."
    )


@contextmanager
def _scope(args: argparse.Namespace) -> Iterator[MemoryScope]:
    from memoryscope.app import MemoryScope

    overrides = {"memory_store.path": args.store} if args.store else None
    with MemoryScope(args.config, overrides=overrides) as scope:
        yield scope


def _pairs(pairs: Iterable[str], flag: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise MemoryScopeError(f"{flag} {pair!r}: write KEY=VALUE")
        values[key.strip()] = _value(text)
    return values


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _filters(args: argparse.Namespace) -> dict[str, Any] | None:
    filters = _pairs(args.filter, "--filter")
    if args.filters:
        try:
            given = json.loads(args.filters)
        except ValueError as error:
            raise MemoryScopeError(f"--filters is not JSON ({error}): {args.filters!r}") from None
        if not isinstance(given, dict):
            raise MemoryScopeError(f'--filters must be a JSON object, e.g. {{"rating": {{"gte": 3}}}}, got {args.filters!r}')
        filters.update(given)
    return filters or None


def _time(text: str | None, flag: str) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise MemoryScopeError(f"{flag} {text!r} is not an ISO 8601 time (2024-10-01 or 2024-10-01T08:00:00+08:00)") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # the local zone, as a person typing a time means it
    return moment


def _show(records: list[MemoryRecord], as_json: bool, *, scores: bool = False, details: bool = False) -> None:
    for record in records:
        if as_json:
            print(terminal_safe(json.dumps(record.to_dict(), ensure_ascii=False)))
            continue
        line = record.text
        if scores and record.score is not None:
            line = f"{record.score:.3f}  {line}"
        print(terminal_safe(f"{line}   (id {record.id})"))
        if details:
            extra = {"type": record.memory_type, "status": record.status, "role": record.role, **record.metadata}
            shown = ", ".join(f"{key}={value}" for key, value in extra.items() if value is not None)
            print(terminal_safe(f"    {shown}"))


def _said(text: str, as_json: bool) -> None:
    print(text, file=sys.stderr if as_json else sys.stdout)
