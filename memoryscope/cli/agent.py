"""`memoryscope agent`: talk to a MemGPT-style agent that manages its own memory, with MemGPT's commands.

    memoryscope agent --config agent --user ann
    memoryscope agent --agent helper       # a named agent of the user (MemGPT's), made on first use
    memoryscope agent --list               # the user's named agents

Lines without a slash are messages to the agent; it shows its inner monologue and each function
call as it makes them, then what it sent. Commands (MemGPT's): `/memory` (the core memory
blocks, counts of archival and recall memory, the window's use), `/dump [n]` (the main context
as sent, its last n messages), `/pop [n]` (drop the last n messages, default 3), `/retry`,
`/rethink TEXT` (replace the last inner monologue), `/rewrite TEXT` (replace the last message
sent), `/heartbeat`, `/memorywarning`, `/summarize` (fold the oldest messages into the summary
now), `/attach [NAME]` and `/detach NAME` (a data source `memoryscope load` made, searched by
`archival_memory_search`; `/attach` alone lists them), `/save [NAME]` and `/load [NAME]`
(checkpoints of the agent's state; `/save` alone lists them), `//` (multi-line input: the lines up
to the next `//` are one message), `/help`, `/exit`. It works with a pipe too
(`printf 'hi\\n/memory\\n' | memoryscope agent`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from memoryscope.errors import MemoryScopeError, closest

if TYPE_CHECKING:  # imported when the command runs: `memoryscope --help` stays quick
    from memoryscope.agent.engine import Agent, TurnResult

__all__ = ["add_agent_commands", "run_agent", "AgentRepl"]

_DEFAULT_CHECKPOINT = "default"


def add_agent_commands(commands: Any) -> None:
    agent = commands.add_parser("agent", help="talk to a MemGPT-style agent that manages its own memory (/help)")
    agent.add_argument("--config", default="agent", help="config name or path with an agent_memory_chat (default: agent)")
    agent.add_argument("--user", default=None, help="whose agent (default: the service's human_name)")
    agent.add_argument("--agent", default=None, metavar="NAME", help="a named agent of the user (made on first use)")
    agent.add_argument("--list", action="store_true", help="list the user's named agents")
    agent.add_argument("--delete", default=None, metavar="NAME", help="delete a named agent and all it remembers")
    agent.set_defaults(handler=_agent)


def _agent(args: argparse.Namespace) -> int:
    if args.list or args.delete:
        return manage_agents(args.config, args.user, delete=args.delete)
    return run_agent(args.config, args.user, agent_name=args.agent)


def manage_agents(config: str, user: str | None, *, delete: str | None = None, stdout: TextIO | None = None) -> int:
    """`--list` (the user's named agents) or `--delete NAME`."""
    from memoryscope.app import MemoryScope
    from memoryscope.chat.agent_memory_chat import agent_chat

    out = stdout or sys.stdout
    with MemoryScope(config) as scope:
        chat = agent_chat(scope)
        caller = scope.door.caller(user or chat.user_name)
        if delete:
            gone = scope.door.delete_agent(caller, scope.door.get_agent(caller, name=delete).id)
            out.write(f"deleted agent {gone.name!r} ({gone.id})\n")
            return 0
        for record in scope.door.list_agents(caller):
            out.write(f"{record.name}\t{record.id}\t{record.created_at:%Y-%m-%d %H:%M}\n")
        return 0


def run_agent(
    config: str,
    user: str | None = None,
    *,
    agent_name: str | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> int:
    """Open the config's agent chat for `user` (and the named agent `agent_name`, made when new)
    and run the loop on `stdin`/`stdout`."""
    from memoryscope.app import MemoryScope
    from memoryscope.chat.agent_memory_chat import agent_chat
    from memoryscope.errors import NotFoundError

    with MemoryScope(config) as scope:
        chat = agent_chat(scope)
        user = user or chat.user_name
        if agent_name is None:
            agent = chat.agent_for(user)
        else:
            caller = scope.door.caller(user)
            try:
                record = scope.door.get_agent(caller, name=agent_name)
            except NotFoundError:
                first = chat.first_values()
                record = scope.door.create_agent(
                    caller, agent_name, persona=first.get("persona", ""), human=first.get("human", "")
                )
            agent = chat.named_agent(user, record)
        stdin, out = stdin or sys.stdin, stdout or sys.stdout

        def read_line(prompt: str) -> str:
            out.write(prompt)
            out.flush()
            line = stdin.readline()
            if not line:
                raise EOFError
            return line.rstrip("\n")

        interactive = stdin.isatty() and out.isatty()
        return AgentRepl(agent, out=out, read_line=read_line, interactive=interactive).run()


class AgentRepl:
    """The loop over one user's agent; `read_line(prompt)` raises EOFError at the end of input."""

    def __init__(self, agent: Agent, *, out: TextIO, read_line: Callable[[str], str], interactive: bool = False) -> None:
        self.agent = agent
        self.out = out
        self.read_line = read_line
        self.interactive = interactive
        self.gathered: list[str] | None = None  # the lines of a multi-line message (`//`), while one is open
        self.commands: dict[str, tuple[str, str, Callable[[str], bool]]] = {
            "memory": ("/memory", "the core memory blocks, archival and recall counts, the window's use", self._memory),
            "set": ("/set NAME TEXT", "make TEXT the whole core memory block NAME (within its limit)", self._set_block),
            "dump": ("/dump [n]", "the main context as sent (its last n messages)", self._dump),
            "pop": ("/pop [n]", "drop the last n messages of the main context (default 3)", self._pop),
            "retry": ("/retry", "run the last user message again", lambda _: self._turn(self.agent.retry())),
            "rethink": ("/rethink TEXT", "replace the agent's last inner monologue", self._rethink),
            "rewrite": ("/rewrite TEXT", "replace the last message the agent sent", self._rewrite),
            "heartbeat": ("/heartbeat", "let the agent take another step", lambda _: self._turn(self.agent.heartbeat())),
            "memorywarning": (
                "/memorywarning",
                "warn the agent its memory is nearly full",
                lambda _: self._turn(self.agent.memory_warning()),
            ),
            "summarize": ("/summarize", "fold the oldest messages of the main context into the summary now", self._summarize),
            "attach": (
                "/attach [NAME]",
                "let the agent search a data source (`memoryscope load`); no name: list them",
                self._attach,
            ),
            "detach": ("/detach NAME", "stop the agent searching a data source", self._detach),
            "save": ("/save [NAME]", "save a checkpoint of the agent's state (no name: list them)", self._save),
            "load": ("/load [NAME]", "go back to a checkpoint", self._load),
            "/": ("//", "multi-line input: the lines up to the next // are one message", self._multiline),
            "help": ("/help", "list the commands", self._help),
            "exit": ("/exit", "leave (Ctrl-D too)", lambda _: False),
        }

    def run(self) -> int:
        self.say(f"agent of {self.agent.user}: type a message, /help for the commands")
        while True:
            prompt = ("... " if self.gathered is not None else f"{self.agent.user}> ") if self.interactive else ""
            try:
                line = self.read_line(prompt)
            except (EOFError, KeyboardInterrupt):
                return 0
            if self.gathered is not None and line.strip() != "//":
                self.gathered.append(line)  # inside `//`: every line is text, a slash too
                continue
            if not self.handle(line.strip()):
                return 0

    def handle(self, line: str) -> bool:
        """Run one line; False when the loop should end."""
        if not line:
            return True
        try:
            if not line.startswith("/"):
                return self._turn(self.agent.send(line))
            name, _, argument = line[1:].partition(" ")
            if name not in self.commands:
                close = closest(name, self.commands)
                self.say(f"unknown command /{name}." + (f" Did you mean /{close}?" if close else "") + " /help lists them.")
                return True
            return self.commands[name][2](argument.strip())
        except MemoryScopeError as error:
            self.say(f"error: {error}")
        except ValueError as error:  # a block over its limit, a bad checkpoint name
            self.say(f"error: {error}")
        return True

    def say(self, text: str = "") -> None:
        from memoryscope.text import terminal_safe  # what the model wrote may hold escape codes: shown, never run

        self.out.write(terminal_safe(text) + "\n")
        self.out.flush()

    # -- showing a turn -----------------------------------------------------------------------

    def _turn(self, result: TurnResult) -> bool:
        for step in result.steps:
            if step.thought:
                self.say(f"  (thinks) {step.thought}")
            for call in step.calls:
                if call.name == "send_message" and call.ok:
                    continue
                mark = "" if call.ok else "  [failed]"
                self.say(f"  -> {call.name}({_short(call.arguments)}){mark}")
                if not call.ok:
                    self.say(f"     {_short(call.result, 200)}")
        for notice in result.notices:
            self.say(f"  note: {notice}")
        for message in result.messages:
            self.say(f"{self.agent.settings.assistant_name}: {message}")
        if not result.messages:
            self.say("(the agent sent no message)")
        return True

    # -- commands -----------------------------------------------------------------------------

    def _memory(self, _: str) -> bool:
        view = self.agent.overview()
        for name, block in view["blocks"].items():
            self.say(f"[{name}] {len(block['value'])}/{block['limit']} characters")
            for line in block["value"].splitlines() or [""]:
                self.say(f"  {line}")
        estimate = " (estimated)" if view["tokens_estimated"] else ""
        self.say(f"recall memory: {view['recall_messages']} messages; archival memory: {view['archival_memories']}")
        self.say(f"main context: {view['queue_messages']} messages, {view['tokens']}/{view['context_window']} tokens{estimate}")
        if view["summary"]:
            self.say(f"summary: {view['summary']}")
        return True

    def _dump(self, argument: str) -> bool:
        messages = self.agent.main_context()
        count = _count(argument, default=len(messages))
        for message in messages[-count:]:
            self.say(json.dumps(message, ensure_ascii=False))
        return True

    def _pop(self, argument: str) -> bool:
        removed = self.agent.pop(_count(argument, default=3))
        self.say(f"removed {removed} message{'s' if removed != 1 else ''} from the main context")
        return True

    def _rethink(self, text: str) -> bool:
        if not text:
            self.say("usage: /rethink TEXT")
            return True
        self.agent.rethink(text)
        self.say("the last inner monologue now reads: " + text)
        return True

    def _rewrite(self, text: str) -> bool:
        if not text:
            self.say("usage: /rewrite TEXT")
            return True
        self.agent.rewrite(text)
        self.say("the last message sent now reads: " + text)
        return True

    def _save(self, name: str) -> bool:
        if not name:
            saved = self.agent.checkpoints()
            self.say("checkpoints: " + (", ".join(f"{n} ({when:%Y-%m-%d %H:%M})" for n, when in saved) or "none"))
            name = _DEFAULT_CHECKPOINT
        self.agent.save_checkpoint(name)
        self.say(f"saved checkpoint {name!r}")
        return True

    def _load(self, name: str) -> bool:
        self.agent.load_checkpoint(name or _DEFAULT_CHECKPOINT)
        self.say(f"loaded checkpoint {name or _DEFAULT_CHECKPOINT!r}")
        return True

    def _set_block(self, given: str) -> bool:
        name, _, text = given.strip().partition(" ")
        if not name:
            self.say("usage: /set NAME TEXT (the blocks: /memory)")
            return True
        try:
            block = self.agent.core.set(name, text.strip())
        except MemoryScopeError as error:  # the agent's BlockError: unknown block, over its limit
            self.say(f"/set failed: {error}")
            return True
        self.say(f"[{block.name}] {len(block.value)}/{block.limit} characters")
        return True

    def _summarize(self, _: str) -> bool:
        folded = self.agent.summarize()
        self.say(f"/summarize succeeded: {folded} message{'s' if folded != 1 else ''} folded into the summary")
        return True

    def _attach(self, name: str) -> bool:
        if not name:
            available, attached = self.agent.available_sources(), self.agent.attached_sources()
            if not available:
                self.say('no data sources yet: load one with "memoryscope load --name NAME FILE..." first')
                return True
            self.say("data sources: " + ", ".join(f"{n} (attached)" if n in attached else n for n in available))
            self.say("usage: /attach NAME")
            return True
        self.say(f"attached data source {self.agent.attach_source(name)!r}: archival_memory_search finds its passages")
        return True

    def _detach(self, name: str) -> bool:
        if not name:
            self.say("usage: /detach NAME")
            return True
        self.agent.detach_source(name)
        self.say(f"detached data source {name!r}")
        return True

    def _multiline(self, _: str) -> bool:
        if self.gathered is None:
            self.gathered = []
            self.say("multi-line input: end the message with a line //")
            return True
        text, self.gathered = "\n".join(self.gathered).strip("\n"), None
        return self.handle_message(text) if text.strip() else True

    def handle_message(self, text: str) -> bool:
        """Send `text` (a message of several lines) to the agent, errors shown as `handle` shows them."""
        try:
            return self._turn(self.agent.send(text))
        except (MemoryScopeError, ValueError) as error:
            self.say(f"error: {error}")
        return True

    def _help(self, _: str) -> bool:
        width = max(len(usage) for usage, _, _ in self.commands.values())
        self.say("Type a message to talk to the agent. Commands:")
        for usage, description, _run in self.commands.values():
            self.say(f"  {usage.ljust(width)}  {description}")
        return True


def _count(argument: str, default: int) -> int:
    if not argument:
        return default
    if not argument.isdigit() or int(argument) < 1:
        raise MemoryScopeError(f"expected a number from 1, got {argument!r}")
    return int(argument)


def _short(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
