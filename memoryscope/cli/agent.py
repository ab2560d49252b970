"""`memoryscope agent`: talk to a MemGPT-style agent that manages its own memory, with MemGPT's commands.

    memoryscope agent --config agent --user ann

Lines without a slash are messages to the agent; it shows its inner monologue and each function
call as it makes them, then what it sent. Commands (MemGPT's): `/memory` (the core memory
blocks, counts of archival and recall memory, the window's use), `/dump [n]` (the main context
as sent, its last n messages), `/pop [n]` (drop the last n messages, default 3), `/retry`,
`/rethink TEXT` (replace the last inner monologue), `/rewrite TEXT` (replace the last message
sent), `/heartbeat`, `/memorywarning`, `/save [NAME]` and `/load [NAME]` (checkpoints of the
agent's state; `/save` alone lists them), `/help`, `/exit`. It works with a pipe too
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
    agent.set_defaults(handler=_agent)


def _agent(args: argparse.Namespace) -> int:
    return run_agent(args.config, args.user)


def run_agent(config: str, user: str | None = None, *, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Open the config's agent chat for `user` and run the loop on `stdin`/`stdout`."""
    from memoryscope.app import MemoryScope
    from memoryscope.chat.agent_memory_chat import AgentMemoryChat

    with MemoryScope(config) as scope:
        chat = next((c for c in scope.chats.values() if isinstance(c, AgentMemoryChat)), None)
        if chat is None:
            where = scope.config.source
            raise MemoryScopeError(
                f"{where} has no agent_memory_chat under memory_chat:; use --config agent (or a config with one)"
            )
        agent = chat.agent_for(user or chat.user_name)
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
        self.commands: dict[str, tuple[str, str, Callable[[str], bool]]] = {
            "memory": ("/memory", "the core memory blocks, archival and recall counts, the window's use", self._memory),
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
            "save": ("/save [NAME]", "save a checkpoint of the agent's state (no name: list them)", self._save),
            "load": ("/load [NAME]", "go back to a checkpoint", self._load),
            "help": ("/help", "list the commands", self._help),
            "exit": ("/exit", "leave (Ctrl-D too)", lambda _: False),
        }

    def run(self) -> int:
        self.say(f"agent of {self.agent.user}: type a message, /help for the commands")
        while True:
            try:
                line = self.read_line(f"{self.agent.user}> " if self.interactive else "")
            except (EOFError, KeyboardInterrupt):
                return 0
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
