"""The `memoryscope` command: check-config, demo, run, chat, doctor; add, search, get, update, delete;
export, import, migrate, reembed; history, undo, pin, unpin; status; workers; serve.

MemoryScope 0.1.x's form, `memoryscope --config_path=PATH` or `memoryscope --language=en
--generation_backend=... ...` (flags named after `Arguments` fields), starts the chat as it did.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import types
from collections.abc import Callable, Sequence
from functools import partial

from memoryscope import __version__
from memoryscope.cli.agent import add_agent_commands
from memoryscope.cli.history import add_history_commands
from memoryscope.cli.load import add_load_commands
from memoryscope.cli.mcp import add_mcp_commands
from memoryscope.cli.memory import add_memory_commands
from memoryscope.cli.serve import add_serve_commands
from memoryscope.cli.status import add_status_commands
from memoryscope.cli.transfer import add_transfer_commands
from memoryscope.cli.workers import add_workers_commands
from memoryscope.compat.flags import is_flag_form, parse_flags
from memoryscope.door.failures import EXIT_NOT_FOUND, EXIT_OK, failure_of
from memoryscope.errors import MemoryScopeError

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if is_flag_form(argv):
        handler: Callable[[], int] = partial(_flag_form_chat, argv)
    else:
        args = _parser().parse_args(argv)
        handler = partial(args.handler, args)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(handler())
    except MemoryScopeError as error:
        print(f"error: {error}", file=sys.stderr)
        return failure_of(error).exit_code  # the door's one table: 1 not found, 2 misuse, 3 a failure
    except BrokenPipeError:  # the reader went away (`... | head`): end quietly, as a pipe's writer should
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memoryscope",
        description="Long-term memory for LLM chatbots and agents.",
        epilog="MemoryScope 0.1.x's form starts the chat too: memoryscope --config_path=PATH, or memoryscope "
        "--language=en --generation_backend=openai_generation ... (flags named after Arguments fields).",
    )
    parser.add_argument("--version", action="version", version=f"memoryscope {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser("check-config", help="validate a config; print every problem")
    check.add_argument("config", nargs="+", help="shipped config name (default, siliconflow, ...) or YAML path")
    check.set_defaults(handler=_check_config)

    demo = commands.add_parser("demo", help="offline tour: remember a bundled conversation and answer from it")
    demo.add_argument("--config", default="default", help="config name or path (default: default)")
    demo.add_argument("--store", default=None, help="SQLite file to keep (default: a temporary one)")
    demo.set_defaults(handler=_demo)

    run = commands.add_parser("run", help="run one operation of the memory service")
    run.add_argument("operation", help="e.g. retrieve_memory, list_memory, add_memory, delete_memory, delete_all")
    run.add_argument("--config", default="default")
    run.add_argument("--store", default=None, help="SQLite file to use instead of the config's")
    run.add_argument("--user", default=None, help="whose memories (default: the service's human_name)")
    run.add_argument("--query", default="", help="query for retrieve_memory")
    run.add_argument("--text", action="append", default=[], help="memory text for add_memory (repeatable)")
    run.add_argument("--id", action="append", default=[], dest="ids", help="memory id for delete_memory (repeatable)")
    run.add_argument("--json", action="store_true", help="print the memories as JSON lines, and nothing else on stdout")
    run.add_argument("--retry-failed", action="store_true", help="consolidate_memory: retry messages parked after failures too")
    run.set_defaults(handler=_run)

    chat = commands.add_parser("chat", help="chat with memory; slash commands for every operation (/help)")
    chat.add_argument("--config", default="default", help="config name or path (default: default)")
    chat.add_argument("--user", default=None, help="whose memories (default: the service's human_name)")
    chat.add_argument("--no-stream", action="store_true", help="print each reply whole instead of as it comes")
    chat.add_argument("-y", "--yes", action="store_true", help="do not ask before /delete_all")
    chat.set_defaults(handler=_chat)

    doctor = commands.add_parser("doctor", help="check a store in full: the file, every memory, vector and keyword entry")
    doctor.add_argument("--config", default="default", help="config name or path (default: default)")
    doctor.set_defaults(handler=_doctor)
    add_memory_commands(commands)
    add_transfer_commands(commands)
    add_history_commands(commands)
    add_status_commands(commands)
    add_workers_commands(commands)
    add_serve_commands(commands)
    add_mcp_commands(commands)
    add_agent_commands(commands)
    add_load_commands(commands)
    return parser


def _check_config(args: argparse.Namespace) -> int:
    from memoryscope.config import load_config
    from memoryscope.config.keys import key_warnings
    from memoryscope.config.packages import missing_packages

    failed = 0
    for source in args.config:
        try:
            config = load_config(source)
        except MemoryScopeError as error:
            failed += 1
            print(f"FAIL {source}\n{error}", file=sys.stderr)
            continue
        missing = missing_packages(config)
        if missing:  # the config is sound, but it cannot run here
            failed += 1
            print(f"FAIL {source}: a package it needs is missing\n" + "\n".join(f"  {line}" for line in missing), file=sys.stderr)
            continue
        operations = sum(len(service.operations) for service in config.services.values())
        print(f"ok   {source}: {len(config.models)} models, {len(config.workers)} workers, {operations} operations")
        for warning in (*config.warnings, *key_warnings(config)):
            print(f"     warning: {warning}")
        for notice in config.notices:
            print(f"     note: {notice}")
    return 1 if failed else 0


def _demo(args: argparse.Namespace) -> int:
    from memoryscope.demo import run_demo

    return run_demo(config=args.config, store_path=args.store)


def _chat(args: argparse.Namespace) -> int:
    from memoryscope.chat.repl import run_chat

    return run_chat(args.config, args.user, stream=not args.no_stream, assume_yes=args.yes)


def _doctor(args: argparse.Namespace) -> int:
    from memoryscope.doctor import run_doctor

    return run_doctor(args.config)


def _flag_form_chat(argv: list[str]) -> int:
    from memoryscope.app import MemoryScope
    from memoryscope.chat.repl import run_session

    with MemoryScope(**parse_flags(argv)) as scope:
        chat = scope.default_memory_chat
        return run_session(chat, stream=chat.stream)


def _run(args: argparse.Namespace) -> int:
    from memoryscope.cli.scope import command_scope, run_verb
    from memoryscope.text import terminal_safe  # stored text may hold escape codes: shown, never run

    inputs = _run_inputs(args)
    with command_scope(args, run_verb(args.operation)) as scope:
        door = scope.door
        result = door.run(door.caller(args.user), args.operation, **inputs)
        settings = scope.config.settings
        context = result.context
        if args.json:  # JSON lines only on stdout; what the run said goes to stderr
            for memory in context.memories:
                print(terminal_safe(json.dumps(memory.to_dict(), ensure_ascii=False)))
            said = [text for text in (context.result, result.stopped and f"stopped: {result.stopped}") if text]
            for text in said:
                print(terminal_safe(text), file=sys.stderr)
        elif context.result:  # the operation's own rendering (list_memory's sections) replaces the lines
            print(terminal_safe(context.result))
        else:
            for memory in context.memories:
                print(terminal_safe(memory.format(settings.language, settings.tzinfo)))
        if context.query and not context.memories and not context.result and not result.stopped:
            # an empty answer is an answer: said, not left as silence (on stderr beside JSON lines)
            print(
                terminal_safe(_NO_MATCH.get(settings.language, _NO_MATCH["en"]).format(user=context.user_name)),
                file=sys.stderr if args.json else sys.stdout,
            )
        if result.stopped and not args.json:
            print(terminal_safe(f"stopped: {result.stopped}"))
    # a run that stops early (nothing new) is no failure; ids that name no memory of the user's are
    return EXIT_NOT_FOUND if context.unknown_memory_ids else EXIT_OK


_NO_MATCH = {"en": "No memory of {user!r} matched the query.", "zh": "{user} 的记忆中没有与查询相符的。"}

# what an operation needs from the command line, and the flag that gives it
_RUN_NEEDS = {
    "add_memory": ("text", "--text TEXT"),
    "delete_memory": ("ids", "--id ID"),
    "retrieve_memory": ("query", "--query TEXT"),
}


def _run_inputs(args: argparse.Namespace) -> dict[str, object]:
    need = _RUN_NEEDS.get(args.operation)
    if need is not None and not getattr(args, need[0]):
        raise MemoryScopeError(f"`memoryscope run {args.operation}` needs {need[1]}")
    # what was not given is left out by the door
    return {"query": args.query, "new_memories": args.text, "memory_ids": args.ids, "retry_failed": args.retry_failed}


class _CallableModule(types.ModuleType):
    """This module, callable: MemoryScope 0.1.x's launch scripts run `from memoryscope import cli; cli()`."""

    def __call__(self, argv: Sequence[str] | None = None) -> int:
        status = main(argv)
        if status:
            raise SystemExit(status)
        return status


sys.modules[__name__].__class__ = _CallableModule
