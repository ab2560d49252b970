"""`memoryscope add | search | get | update | delete`: the simple memory API on the command line.

    memoryscope add "I moved to Hangzhou" --user lin                # kept; consolidation extracts facts
    memoryscope add "prefers tea" --user lin --no-infer --meta source=crm --meta rating=4
    memoryscope search "where does Lin live?" --user lin --top-k 5 --filter source=crm --json
    memoryscope search "tea" --user lin --filters '{"rating": {"gte": 3}}' --type obs_customized
    memoryscope search "tea" --user lin --threshold 0.5      # only memories scoring at least 0.5
    memoryscope get ID [--json]
    memoryscope update ID --text "prefers green tea" --meta rating=5
    memoryscope delete ID [ID ...]          # or: memoryscope delete --all --user lin --yes
    memoryscope delete --all-users --yes    # every memory of every user in the store
    memoryscope history ID                  # (memoryscope.cli.history)

`--meta KEY=VALUE` and `--filter KEY=VALUE` read VALUE as JSON when it is JSON (`4`, `true`,
`["a", "b"]`), else as text. `--json` prints one JSON object per memory and nothing else on
stdout. A face over `memoryscope.door`: `--user` names whose memories (by id, without it: any
user's); a time without a zone is in the config's. Exit codes, as every command's (the door's
table of failures): 0 done, 1 when something asked for by id does not exist (for that user), 2 on
misuse, 3 when the store or a model failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from memoryscope.cli.scope import command_scope
from memoryscope.door import MemoryNotFoundError, MemoryRecord, parse_time
from memoryscope.door.failures import EXIT_NOT_FOUND, EXIT_OK
from memoryscope.errors import InvalidInputError
from memoryscope.text import terminal_safe

if TYPE_CHECKING:
    pass

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
    search.add_argument(
        "--threshold", type=float, default=None, help="only memories scoring at least this (0 to 1; default: no cut)"
    )
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
    delete.add_argument("--all", action="store_true", help="every memory of --user (which must be given, with --yes)")
    delete.add_argument("--all-users", action="store_true", help="every memory of every user in the store (with --yes)")
    delete.add_argument("-y", "--yes", action="store_true", help="with --all or --all-users: yes, delete them all")
    delete.set_defaults(handler=_delete)


# -- handlers ----------------------------------------------------------------------------------


def _add(args: argparse.Namespace) -> int:
    messages = [{"role": args.role, "content": text} for text in args.text]
    if args.time:
        for message in messages:
            message["time"] = args.time  # without a zone: the config's (the door reads it)
    with command_scope(args) as scope:
        door = scope.door
        added = door.add(door.caller(args.user), messages, metadata=_pairs(args.meta, "--meta"), infer=args.infer)
        _show(added, args.json)
        if not added and not args.json:
            print("already remembered: nothing new stored")
    return EXIT_OK


def _search(args: argparse.Namespace) -> int:
    with command_scope(args, "search") as scope:
        door = scope.door
        zone = scope.config.settings.tzinfo
        since, until = parse_time("--since", args.since, zone), parse_time("--until", args.until, zone)
        found = door.search(
            door.caller(args.user), args.query, top_k=args.top_k, filters=_filters(args), types=args.types,
            time_range_given=(since, until) if since or until else None, threshold=args.threshold,
        )  # fmt: skip
        _show(found, args.json, scores=True)
        if not found and not args.json:
            print("no memories found")
    return EXIT_OK


def _get(args: argparse.Namespace) -> int:
    missing = 0
    with command_scope(args, "get") as scope:
        door = scope.door
        caller = door.caller(args.user, workspace=None)
        for memory_id in args.ids:
            record = door.get(caller, memory_id)
            if record is None:
                missing += 1
                print(f"error: {MemoryNotFoundError(memory_id)}", file=sys.stderr)
            else:
                _show([record], args.json, details=True)
    return EXIT_NOT_FOUND if missing else EXIT_OK


def _update(args: argparse.Namespace) -> int:
    metadata = _pairs(args.meta, "--meta")
    for key in args.unset:
        metadata[key] = None
    if args.text is None and not metadata:
        raise InvalidInputError("`memoryscope update` needs --text, --meta KEY=VALUE or --unset KEY")
    with command_scope(args) as scope:
        door = scope.door
        record = door.update(door.caller(args.user, workspace=None), args.id, args.text, metadata=metadata or None)
        _show([record], args.json, details=True)
    return EXIT_OK


def _delete(args: argparse.Namespace) -> int:
    if args.all_users:
        return _reset(args)
    if args.all == bool(args.ids):
        raise InvalidInputError("`memoryscope delete` takes memory ids, or --all --user NAME --yes (not both)")
    if args.all and args.user is None:
        raise InvalidInputError("`memoryscope delete --all` deletes every memory of one user: name them with --user NAME")
    if args.all and not args.yes:
        raise InvalidInputError(f"`memoryscope delete --all --user {args.user}` deletes all their memories: add --yes to do it")
    with command_scope(args) as scope:
        door = scope.door
        if args.all:
            outcome = door.delete_all(door.caller(args.user))
            _said(f"deleted all {outcome.deleted_count} memories of {args.user} (run {outcome.run_id})", args.json)
            return EXIT_OK
        outcome = door.delete(door.caller(args.user, workspace=None), args.ids)
    for memory_id in outcome.unknown_ids:
        print(f"error: {MemoryNotFoundError(memory_id)}", file=sys.stderr)
    _said(f"deleted {outcome.deleted_count} of {len(args.ids)} memories (run {outcome.run_id or 'none'})", args.json)
    return EXIT_NOT_FOUND if outcome.unknown_ids else EXIT_OK


def _reset(args: argparse.Namespace) -> int:
    if args.all or args.ids or args.user is not None:
        raise InvalidInputError("`memoryscope delete --all-users --yes` takes no ids, --all or --user")
    if not args.yes:
        raise InvalidInputError("`memoryscope delete --all-users` deletes every memory in the store: add --yes to do it")
    with command_scope(args) as scope:
        outcome = scope.door.reset(scope.door.caller(None))
    _said(outcome.result, args.json)
    return EXIT_OK


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


def _pairs(pairs: Iterable[str], flag: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidInputError(f"{flag} {pair!r}: write KEY=VALUE")
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
            raise InvalidInputError(f"--filters is not JSON ({error}): {args.filters!r}") from None
        if not isinstance(given, dict):
            raise InvalidInputError(f'--filters must be a JSON object, e.g. {{"rating": {{"gte": 3}}}}, got {args.filters!r}')
        filters.update(given)
    return filters or None


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
