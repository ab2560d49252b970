"""`memoryscope chat`: an interactive chat with memory, with a slash command for every operation.

It works with a pipe (`printf '/list_memory\\n' | memoryscope chat`) and on a terminal, where
lines are edited and recalled with `readline` and log records never cut into the line being
typed (`memoryscope.terminal`). Ctrl-C ends a reply (the message is kept; `/retry` asks it
again); twice at the prompt, it leaves. Lines without a leading slash are chat messages; replies
stream as they come. Commands:

- conversation: `/help`, `/history [n]`, `/pop [n]` (undo the last n turns), `/retry`,
  `/stream` (replies whole or as they come), `/clear` (the screen), `/exit` (or Ctrl-D);
- every operation of the chat's service by name: `/list_memory`, `/add_memory TEXT`,
  `/delete_memory ID [ID ...]`, `/delete_all` (asks first unless `-y`), `/retrieve_memory QUERY`,
  `/consolidate_memory`, `/reflect_and_reconsolidate`, ... An operation's argument is its query.
  MemoryScope 0.1.x's `key=value` form works too (`/delete_memory memory_id=ID`,
  `/list_memory role_name=ann`), and `refresh_time=N` runs the operation again every N seconds
  until Ctrl-C (`/list_memory refresh_time=5` in a second terminal watches memories form).

An error prints one line and the chat goes on; an unknown command names the closest one.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, TextIO

from memoryscope.chat.api_memory_chat import ApiMemoryChat
from memoryscope.chat.streaming import interrupt
from memoryscope.compat.inputs import LEGACY_INPUTS
from memoryscope.context import Message
from memoryscope.door import failure_of
from memoryscope.errors import MemoryScopeError, closest
from memoryscope.terminal import Output, terminal_session

__all__ = ["run_chat", "run_session", "ChatRepl"]

logger = logging.getLogger("memoryscope.cli")

_YES = frozenset({"y", "yes"})
_CLEAR_SCREEN = "\033[2J\033[H"
# `key=value` arguments as MemoryScope 0.1.x's command line took them
_KEYWORD_NAMES = (*LEGACY_INPUTS, "role_name", "refresh_time")
_KEYWORD = re.compile(r"(?:^|\s)(" + "|".join(_KEYWORD_NAMES) + r")=")


@dataclass(frozen=True)
class _Command:
    usage: str
    description: str
    run: Callable[[str], bool]  # the argument text → keep going?


class ChatRepl:
    """The read-eval-print loop over one chat; `read_line(prompt)` raises EOFError at the end.

    `read_answer` reads the answer to a question (`/delete_all`'s); default `read_line`.
    """

    def __init__(
        self,
        chat: ApiMemoryChat,
        *,
        out: Output,
        read_line: Callable[[str], str],
        read_answer: Callable[[str], str] | None = None,
        interactive: bool = False,
        stream: bool = True,
        assume_yes: bool = False,
        sleep: Callable[[float], None] = time.sleep,
        interrupt_seen: Callable[[], None] | None = None,
    ) -> None:
        self.chat = chat
        # told of each Ctrl-C a command caught (the terminal's, so it never delivers one twice)
        self.interrupt_seen = interrupt_seen or (lambda: None)
        self.out = out
        self.read_line = read_line
        self.read_answer = read_answer or read_line
        self.interactive = interactive
        self.stream = stream
        self.assume_yes = assume_yes
        self.sleep = sleep
        self.lines_run = 0  # non-empty lines handled
        self.last_exit_code = 0  # the exit code of the last line that failed (not the error: its traceback holds streams open)
        self.failures = 0
        self.commands = self._conversation_commands()
        for name, operation in chat.service.operations.items():
            if name not in self.commands:
                usage = _USAGES.get(name, f"/{name} [QUERY]")
                self.commands[name] = _Command(usage, operation.description, self._operation(name))

    def run(self) -> int:
        """Read lines until `/exit`, the end of input or a second Ctrl-C in a row at the prompt;
        returns the exit status: 0, or for piped input whose every line failed, the exit code of
        the last failure (the door's table), so a script sees it."""
        status = self._read_lines()
        if status == 0 and not self.interactive and self.lines_run and self.failures == self.lines_run:
            return self.last_exit_code
        return status

    def _read_lines(self) -> int:
        interrupted = False  # the last prompt ended with Ctrl-C
        while True:
            try:
                line = self.read_line(f"{self.chat.user_name}> " if self.interactive else "")
            except EOFError:
                if self.interactive:
                    self.say("")
                return 0
            except KeyboardInterrupt:
                if interrupted:
                    self.say("")
                    return 0
                interrupted = True
                self.say("\n(interrupted: Ctrl-C again, /exit or Ctrl-D leaves)")
                continue
            interrupted = False
            try:
                if not self.handle(line.strip()):
                    return 0
            except KeyboardInterrupt:
                self.interrupt_seen()
                self.say("\n(interrupted)")
            except EOFError:  # the input ended inside a command (a confirmation)
                return 0

    def handle(self, line: str) -> bool:
        """Run one line; False when the chat should end."""
        if not line:
            return True
        self.lines_run += 1
        try:
            if not line.startswith("/"):
                self._reply(lambda stream: self.chat.chat_with_memory(line, stream=stream))
                return True
            name, _, argument = line[1:].partition(" ")
            command = self.commands.get(name)
            if command is None:
                close = closest(name, self.commands) or next((known for known in self.commands if known.startswith(name)), None)
                hint = f" Did you mean /{close}?" if close else ""
                self.say(f"unknown command /{name}.{hint} /help lists the commands.")
                return True
            return command.run(argument.strip())
        except MemoryScopeError as error:
            self._failed(error)
            self.say(f"error: {_one_line(error)}")
        except Exception as error:  # the chat must survive whatever one command does
            self._failed(error)
            logger.debug("command failed", exc_info=error)
            self.say(f"error: {type(error).__name__}: {_one_line(error)}")
        return True

    def _failed(self, error: BaseException) -> None:
        self.failures += 1
        self.last_exit_code = failure_of(error).exit_code

    def say(self, text: str = "", end: str = "\n") -> None:
        """Print `text`: memories, replies and errors may carry escape codes, shown here as
        `\\u001b` and never run; only this module's own screen clearing goes out as it is."""
        from memoryscope.text import terminal_safe  # a cached module lookup after the first line

        clear = _CLEAR_SCREEN if text.startswith(_CLEAR_SCREEN) else ""
        self.out.write(clear + terminal_safe(text[len(clear) :]) + end)
        self.out.flush()

    # -- conversation commands ---------------------------------------------------------------

    def _conversation_commands(self) -> dict[str, _Command]:
        return {
            "help": _Command("/help", "list the commands", self._help),
            "history": _Command("/history [n]", "show the last n turns (all by default)", self._history),
            "pop": _Command("/pop [n]", "undo the last n turns (default 1) and forget their messages", self._pop),
            "retry": _Command("/retry", "ask the last message again", self._retry),
            "stream": _Command("/stream", "switch between replies as they come and whole replies", self._toggle_stream),
            "clear": _Command("/clear", "clear the screen", self._clear),
            "exit": _Command("/exit", "leave (Ctrl-D too)", lambda _: False),
        }

    def _help(self, _: str) -> bool:
        self.say("Type a message to chat. Commands:")
        width = max(len(command.usage) for command in self.commands.values())
        for command in self.commands.values():
            self.say(f"  {command.usage.ljust(width)}  {command.description}".rstrip())
        return True

    def _history(self, argument: str) -> bool:
        count = _count(argument, default=len(self.chat.turns))
        turns = self.chat.turns[-count:] if count else []
        if not turns:
            self.say("(no turns yet)")
        for turn in turns:
            self.say(f"{self.chat.user_name}: {turn.query}")
            self.say(f"{self._assistant}: {turn.reply}")
        return True

    def _pop(self, argument: str) -> bool:
        removed = self.chat.pop_turns(_count(argument, default=1))
        forgotten = sum(len(turn.stored_ids) for turn in removed)
        turns = "turn" if len(removed) == 1 else "turns"
        self.say(f"removed {len(removed)} {turns}" + (f", forgot {forgotten} stored message(s)" if forgotten else ""))
        return True

    def _retry(self, _: str) -> bool:
        if not self._reply(lambda stream: self.chat.retry(stream=stream)):
            self.say("nothing to retry")
        return True

    def _toggle_stream(self, _: str) -> bool:
        self.stream = not self.stream
        self.say(f"stream: {'on' if self.stream else 'off'}")
        return True

    def _clear(self, _: str) -> bool:
        self.say(_CLEAR_SCREEN, end="")
        return True

    # -- operations --------------------------------------------------------------------------

    def _operation(self, name: str) -> Callable[[str], bool]:
        def run(argument: str) -> bool:
            if _KEYWORD.match(argument):
                return self._run_with_keywords(name, _keywords(argument))
            inputs = self._inputs(name, argument)
            if inputs is None:
                return True
            self.say(self.chat.run_service_operation(name, **inputs))
            return True

        return run

    def _run_with_keywords(self, name: str, keywords: dict[str, str]) -> bool:
        """`/name key=value ...` as 0.1.x ran it; with `refresh_time=N`, again every N seconds until Ctrl-C."""
        refresh = keywords.pop("refresh_time", None)
        if refresh is None:
            self.say(self.chat.run_service_operation(name, **keywords))
            return True
        seconds = _seconds(refresh)
        try:
            while True:
                text = self.chat.run_service_operation(name, **keywords)
                self.say(_CLEAR_SCREEN + f"{name} (every {seconds:g}s; Ctrl-C stops)\n{text}")
                self.sleep(seconds)
        except KeyboardInterrupt:
            self.interrupt_seen()
            self.say(f"\n(stopped refreshing /{name})")
        return True

    def _inputs(self, name: str, argument: str) -> dict[str, Any] | None:
        """The operation's inputs from the text after its name; None (after a message) to skip it."""
        now = datetime.now(self.chat.scope.config.settings.tzinfo)
        if name == "add_memory":
            if not argument:
                self._usage(name)
                return None
            return {"new_memories": (argument,), "query_time": now}
        if name == "delete_memory":
            if not argument:
                self._usage(name)
                return None
            return {"memory_ids": tuple(argument.replace(",", " ").split())}
        if name == "delete_all":
            if argument not in ("", "-y", "--yes"):
                self._usage(name)
                return None
            if not (argument or self.assume_yes or self._confirm(f"delete ALL memories of {self.chat.user_name}?")):
                self.say("cancelled")
                return None
            return {}
        if name == "retrieve_memory" and not argument:
            self._usage(name)
            return None
        if name == "read_message":
            if not argument:
                self._usage(name)
                return None
            return {"messages": (Message("user", argument, now, name=self.chat.user_name),)}
        return {"query": argument, "query_time": now} if argument else {"query_time": now}

    def _usage(self, name: str) -> None:
        self.say(f"usage: {self.commands[name].usage}")

    def _confirm(self, question: str) -> bool:
        if self.interactive:
            answer = self.read_answer(f"{question} [y/N] ")
        else:  # piped: show the question and the answer read, as a transcript
            answer = self.read_answer("")
            self.say(f"{question} [y/N] {answer.strip()}")
        return answer.strip().lower() in _YES

    # -- replies -----------------------------------------------------------------------------

    @property
    def _assistant(self) -> str:
        return self.chat.service.params.assistant_name

    def _reply(self, ask: Callable[[bool], Any]) -> bool:
        """Print the reply as it comes; False when there was nothing to ask."""
        answer = ask(self.stream)
        if answer is None:
            return False
        self.say(f"{self._assistant}: ", end="")
        if not self.stream:
            self.say(answer.message.content)
            return True
        try:
            for piece in answer:
                self.say(piece.meta_data["delta"], end="")
        except KeyboardInterrupt:
            interrupt(answer)
            raise
        self.say()
        return True


_USAGES = {
    "add_memory": "/add_memory TEXT",
    "delete_memory": "/delete_memory ID [ID ...]",
    "delete_all": "/delete_all [-y]",
    "retrieve_memory": "/retrieve_memory QUERY",
    "read_message": "/read_message TEXT",
    "list_memory": "/list_memory",
    "consolidate_memory": "/consolidate_memory",
    "reflect_and_reconsolidate": "/reflect_and_reconsolidate",
}


def run_chat(
    config: str,
    user: str | None = None,
    *,
    stream: bool = True,
    assume_yes: bool = False,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> int:
    """Open the config's memory chat and run the loop on `stdin`/`stdout` (default: the process's)."""
    from memoryscope.app import MemoryScope

    with MemoryScope(config) as scope:
        chat = scope.default_memory_chat
        if not isinstance(chat, ApiMemoryChat):
            raise MemoryScopeError(f"memory_chat: `memoryscope chat` needs an api_memory_chat, got {type(chat).__name__}")
        if user:
            chat = chat.for_user(user)
        return run_session(chat, stream=stream, assume_yes=assume_yes, stdin=stdin, stdout=stdout)


def run_session(
    chat: ApiMemoryChat,
    *,
    stream: bool = True,
    assume_yes: bool = False,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Run the chat loop over `chat` on `stdin`/`stdout` (default: the process's) until /exit or the end of input;
    on a terminal (the process's stdin) in a `memoryscope.terminal.terminal_session`."""
    stdin = stdin or sys.stdin
    out = stdout or sys.stdout
    interactive = stdin.isatty() and out.isatty()
    options: dict[str, Any] = {"interactive": interactive, "stream": stream, "assume_yes": assume_yes, "sleep": sleep}
    if interactive and stdin is sys.stdin:
        with terminal_session(out) as terminal:
            read_answer = partial(terminal.read_line, remember=False)
            repl = ChatRepl(
                chat, out=terminal.out, read_line=terminal.read_line, read_answer=read_answer,
                interrupt_seen=terminal.interrupt_seen, **options,
            )  # fmt: skip
            return _session(repl)

    def read_line(prompt: str) -> str:
        if stdin is sys.stdin:
            return input(prompt)
        out.write(prompt)
        out.flush()
        line = stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")

    return _session(ChatRepl(chat, out=out, read_line=read_line, **options))


def _session(repl: ChatRepl) -> int:
    """The greeting, the loop, and a word on background work still running at the end."""
    chat, out = repl.chat, repl.out
    scope = chat.scope
    for notice in scope.notices:
        if notice not in scope.warned:  # a warning was logged already: once is enough
            out.write(f"note: {notice}\n")
    out.write(f"MemoryScope chat with {chat.user_name}'s memories ({scope.config.source}).")
    out.write(" /help lists the commands, /exit leaves.\n")
    status = repl.run()
    running = chat.service.scheduler.status().running
    if running:
        names = ", ".join(sorted({item.operation for item in running}))
        out.write(f"finishing background memory work ({names}) ...\n")
        out.flush()
    return status


def _count(argument: str, default: int) -> int:
    if not argument:
        return default
    try:
        value = int(argument)
    except ValueError:
        raise MemoryScopeError(f"expected a number, got {argument!r}") from None
    if value < 0:
        raise MemoryScopeError(f"expected a number of turns (0 or more), got {value}")
    return value


def _keywords(argument: str) -> dict[str, str]:
    """`query=I like tea memory_id=x` → {"query": "I like tea", "memory_id": "x"} (a value runs to the next key)."""
    parts = _KEYWORD.split(argument)
    return {parts[index]: parts[index + 1].strip() for index in range(1, len(parts) - 1, 2)}


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise MemoryScopeError(f"refresh_time must be a number of seconds, got {text!r}") from None
    if value <= 0:
        raise MemoryScopeError(f"refresh_time must be more than 0 seconds, got {text!r}")
    return value


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())
