"""The terminal side of the interactive CLI: line editing, input history, and log records that
never cut into the line being typed.

`terminal_session(out)` is what `memoryscope chat` runs in when its input and output are a
terminal (piped input never comes here: nothing imports `readline` or touches the history file):

- lines are read with the standard `readline` module where the platform has it (plain `input()`
  where it has not): arrow keys edit the line, Up and Down walk the input history, kept between
  sessions (`memoryscope.terminal_readline`). Answers to questions (`[y/N]`) stay out of it, and
  so does a line equal to the one before;
- log records for the terminal (from the root logger's handlers that write to a terminal, and
  from logging's last resort, used when there are none) go through a `PromptSafeHandler`, from
  any thread: while a prompt waits, the line is cleared, the record printed, and the prompt and
  the text typed so far drawn again; while output is in the middle of a line (a reply
  streaming), the record starts a line of its own;
- Ctrl-C at the prompt always takes effect at once (`_interrupts_delivered`);
- on the way out the history is saved, and the log handlers, SIGUSR2 and the signal wakeup fd
  (borrowed, see `Terminal` and `_interrupts_delivered`) and whatever `readline` held before
  are put back.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TextIO

from memoryscope.terminal_readline import history_path, load_readline, native_redraw, readline_history

__all__ = ["terminal_session", "Terminal", "PromptSafeHandler", "Output", "load_readline"]

_CLEAR_LINE = "\r\x1b[K"  # to the start of the line, then erase it
_HOLD_S = 1.0  # how long a thread waits for the main thread to print its record
_RESEND_S = 0.1  # a Ctrl-C that has not ended the line by then was missed
_WAKE_SIGNAL: int | None = getattr(signal, "SIGUSR2", None)  # POSIX; the chat borrows it while on a terminal


class Terminal:
    """Reads lines and writes output on one terminal, and prints log records around both.

    `editor` is the `readline` module (or a stand-in with its functions), None for plain `input()`.
    One lock orders the output of every thread; the state it guards says where the cursor is.
    readline is not thread-safe and waits for keys without holding the GIL, so only the main
    thread touches it: a record from another thread while a prompt waits is held, and `wake`
    (set by `terminal_session`: a signal, which interrupts readline's wait) has the main thread
    print it. Without `wake`, the record's own thread prints it.
    """

    def __init__(self, out: TextIO, editor: Any = None, read: Callable[[str], str] = input) -> None:
        self.out = _Output(self, out)
        self.wake: Callable[[], None] | None = None
        self._stream = out
        self._editor = editor
        self._read = read
        self._native = native_redraw(editor)
        self._lock = threading.RLock()
        self._released = threading.Condition(self._lock)
        self._prompt: str | None = None  # the prompt of the line being read
        self._line_start = True  # the output cursor is at the start of a line
        self._held: deque[tuple[str, TextIO]] = deque()  # records waiting for the main thread
        self._held_count = 0  # records ever held ...
        self._released_count = 0  # ... and printed
        self._lines = 0  # lines read (or ended by Ctrl-C, Ctrl-D) so far
        self._sent_interrupts = 0  # SIGINTs sent again by `watch`, not yet heard back
        self._interrupts_heard = 0  # the SIGINTs `watch` heard of ...
        self._interrupts_seen = 0  # ... and the KeyboardInterrupts the main thread got (`interrupt_seen`)

    def read_line(self, prompt: str, *, remember: bool = True) -> str:
        """One line typed at `prompt`; kept in the history unless `remember` is False.
        Raises EOFError on Ctrl-D, KeyboardInterrupt on Ctrl-C."""
        with self._lock:
            self._prompt = prompt
        ended = False
        try:
            line = self._read(prompt)
            ended = True
        except KeyboardInterrupt:
            self.interrupt_seen()
            raise
        except SystemError as error:
            # Ctrl-C while `wake`'s signal was pending too: CPython runs that signal's handler with
            # input()'s KeyboardInterrupt already set, and reports a SystemError caused by it
            if isinstance(error.__cause__, KeyboardInterrupt):
                self.interrupt_seen()
                raise KeyboardInterrupt from None
            raise
        finally:
            with self._lock:
                self._prompt = None
                self._lines += 1
                self._line_start = ended  # after Enter; after Ctrl-C or Ctrl-D the cursor stays on the line
                self._release(around_prompt=False)
                self._released.notify_all()
        if remember:
            self._remember(line)
        return line

    def watch(self, source: Any, interrupt_main: Callable[[], None]) -> None:
        """The watcher thread of `_interrupts_delivered`: reads the number of each signal that
        comes; when a Ctrl-C has not ended the line being read after `_RESEND_S`, it was missed
        (see there), and `interrupt_main` sends it again (up to 3 times)."""
        while data := source.recv(64):  # one byte a signal; nothing once the session ends
            with self._lock:
                interrupts = data.count(signal.SIGINT)
                own = min(interrupts, self._sent_interrupts)  # the ones sent again come back here too
                self._sent_interrupts -= own
                self._interrupts_heard += interrupts  # those sent again too: each is seen once more
                if interrupts == own or self._prompt is None:  # not at a prompt, Python sees it by itself
                    continue
                line = self._lines
                for _ in range(3):
                    self._released.wait(_RESEND_S)
                    # seen already: e.g. it stopped a command, and this thread heard of it only once
                    # the prompt was back (sending it again would interrupt that prompt too)
                    if self._lines != line or not self._at_prompt() or self._interrupts_seen >= self._interrupts_heard:
                        break
                    self._sent_interrupts += 1
                    interrupt_main()

    def interrupt_seen(self) -> None:
        """The main thread got a KeyboardInterrupt (at the prompt, or in a command it stopped):
        `watch` then sends no Ctrl-C again for it. No lock: it may run while the lock is held."""
        self._interrupts_seen += 1

    def woken(self, *_: object) -> None:
        """The handler of `wake`'s signal (main thread, readline waiting for a key): print the held records.

        It takes no lock: when Ctrl-C comes with this signal pending, CPython runs this handler
        with input()'s KeyboardInterrupt already set, and a call made then fails (SystemError)
        after doing its work; a lock taken by `with` would stay taken. At the prompt no other
        thread prints, and the records come off a deque."""
        if self._at_prompt():
            with contextlib.suppress(Exception):  # raising here would end the input() under way
                self._release(around_prompt=True)

    def print_record(self, text: str, stream: TextIO) -> None:
        """Print one formatted log record on `stream` (a terminal) on lines of its own; from any thread."""
        with self._lock:
            here = self.wake is None or threading.current_thread() is threading.main_thread()
            if self._prompt is None or here:
                self._print([(text, stream)], around_prompt=self._at_prompt())
                return
            self._held_count += 1
            mine = self._held_count
            self._held.append((text, stream))
            deadline = time.monotonic() + _HOLD_S
            while self._released_count < mine and (left := deadline - time.monotonic()) > 0:
                if self.wake is not None and self._at_prompt():
                    self.wake()  # again each time: a signal that came just before readline began to wait did not wake it
                self._released.wait(min(left, 0.01))
            # still held after `_HOLD_S`: printed when the line ends

    def _at_prompt(self) -> bool:
        """A line is being read; with GNU readline, readline itself says so, which also rules out
        the moments just before it starts and just after it ends, when `wake`'s handler may run too.
        (readline's pre-input hook would say when the prompt is drawn, but a Ctrl-C that comes while
        a Python hook runs is lost.)"""
        return self._prompt is not None and (self._native is None or self._native.reading())

    def _release(self, *, around_prompt: bool) -> None:
        """Print the held records (threads waiting for theirs look again within 0.01 s)."""
        held = []
        with contextlib.suppress(IndexError):
            while True:
                held.append(self._held.popleft())
        if held:
            try:
                self._print(held, around_prompt=around_prompt)
            finally:
                self._released_count += len(held)

    def _print(self, records: list[tuple[str, TextIO]], *, around_prompt: bool) -> None:
        if not around_prompt or self._prompt is None:
            self._stream.flush()
            for text, stream in records:
                stream.write(("" if self._line_start else "\n") + text + "\n")
                stream.flush()
                self._line_start = True
            return
        editor, prompt = self._editor, self._prompt
        if editor is None:  # typed text stays in the terminal's own line buffer; it cannot be drawn again
            self._stream.write("\n")
        elif self._native is not None:  # readline clears what it drew: wrapped lines too
            self._native.clear()
        else:
            self._stream.write(_CLEAR_LINE)
        self._stream.flush()
        for text, stream in records:
            stream.write(text + "\n")
            stream.flush()
        if editor is None:
            self._stream.write(prompt)
            self._stream.flush()
        elif self._native is not None:  # prompt, text, and the cursor where it was
            self._native.redraw()
        else:  # right when the cursor is at the end of the line, as it is while typing
            self._stream.write(prompt + editor.get_line_buffer())
            self._stream.flush()
            editor.redisplay()

    def _remember(self, line: str) -> None:
        editor = self._editor
        if editor is None or not line.strip():
            return
        count = editor.get_current_history_length()
        if count and editor.get_history_item(count) == line:
            return
        editor.add_history(line)

    def _wrote(self, text: str) -> None:
        if text:
            self._line_start = text.endswith("\n")


class Output(Protocol):
    """Where the chat writes: a text stream, or a `Terminal`'s `out`."""

    def write(self, text: str, /) -> object: ...

    def flush(self) -> object: ...


class _Output:
    """A `Terminal`'s output stream: writes under the terminal's lock, noting whether the cursor
    ends at the start of a line."""

    def __init__(self, terminal: Terminal, stream: TextIO) -> None:
        self._terminal = terminal
        self._stream = stream

    def write(self, text: str) -> int:
        with self._terminal._lock:
            written = self._stream.write(text)
            self._terminal._wrote(text)
            return written

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()


class PromptSafeHandler(logging.Handler):
    """Writes records to a terminal stream through `Terminal.print_record` (thread-safe)."""

    def __init__(self, terminal: Terminal, stream: TextIO, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self.terminal = terminal
        self.stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.terminal.print_record(self.format(record), self.stream)
        except RecursionError:  # as logging.StreamHandler does
            raise
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def terminal_session(
    out: TextIO, *, editor: Any = None, history: Path | None = None, read: Callable[[str], str] = input
) -> Iterator[Terminal]:
    """A `Terminal` on `out` (stdin being the terminal too) for the length of the `with` block.

    `editor` defaults to `load_readline()`, `history` to `history_path()`; `read` reads a line.
    """
    editor = load_readline() if editor is None else editor
    terminal = Terminal(out, editor, read)
    path = history_path() if history is None else history
    with (
        _records_through(terminal),
        _woken_by_signal(terminal),
        _interrupts_delivered(terminal),
        readline_history(editor, path),
    ):
        yield terminal


@contextlib.contextmanager
def _woken_by_signal(terminal: Terminal) -> Iterator[None]:
    """Give the terminal its `wake`: SIGUSR2 to the main thread, whose handler prints held records.
    Not where there is no such signal, off the main thread, or when SIGUSR2 is someone else's."""
    signum, main = _WAKE_SIGNAL, threading.main_thread()
    usable = signum is not None and hasattr(signal, "pthread_kill") and threading.current_thread() is main
    if signum is None or main.ident is None or not usable or signal.getsignal(signum) not in (signal.SIG_DFL, None):
        yield
        return
    previous = signal.signal(signum, terminal.woken)
    with terminal._lock:
        terminal.wake = partial(signal.pthread_kill, main.ident, signum)
    try:
        yield
    finally:
        with terminal._lock:  # no thread sends the signal once its handler is gone (that would end the process)
            terminal.wake = None
        signal.signal(signum, previous)


@contextlib.contextmanager
def _interrupts_delivered(terminal: Terminal) -> Iterator[None]:
    """Ctrl-C at the prompt takes effect at once. Python's readline notices a signal only when it
    interrupts readline's wait for a key: one that comes while readline draws the prompt or echoes
    a key, or that another thread receives, would wait for the end of the line. So a watcher
    thread hears of each SIGINT through the signal module's wakeup fd, and sends one that did not
    end the line to the main thread again (`Terminal.watch`). Not when SIGINT or the wakeup fd
    is someone else's (an event loop's), nor without `wake` (off the main thread, no POSIX signals)."""
    main = threading.main_thread().ident
    if terminal.wake is None or main is None or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    source, sink = socket.socketpair()
    sink.setblocking(False)
    previous = signal.set_wakeup_fd(sink.fileno(), warn_on_full_buffer=False)
    if previous != -1:
        signal.set_wakeup_fd(previous)
        source.close()
        sink.close()
        yield
        return
    interrupt_main = partial(signal.pthread_kill, main, signal.SIGINT)
    watcher = threading.Thread(target=terminal.watch, args=(source, interrupt_main), name="memoryscope-ctrl-c", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(-1)
        sink.close()  # the watcher reads the end of the stream, and stops
        watcher.join(4 * _RESEND_S + 1)
        source.close()


@contextlib.contextmanager
def _records_through(terminal: Terminal) -> Iterator[None]:
    """Route the log records meant for the terminal through `PromptSafeHandler`s, then put the handlers back."""
    root = logging.getLogger()
    swapped: list[tuple[logging.Handler, PromptSafeHandler]] = []
    for index, handler in enumerate(list(root.handlers)):
        if _writes_to_terminal(handler):
            safe = _safe_copy(terminal, handler)
            root.handlers[index] = safe  # in place: the handlers keep their order
            swapped.append((handler, safe))
    last_resort = logging.lastResort
    if last_resort is not None and _isatty(getattr(last_resort, "stream", None)):
        logging.lastResort = _safe_copy(terminal, last_resort)
    try:
        yield
    finally:
        for handler, safe in swapped:
            if safe in root.handlers:
                root.handlers[root.handlers.index(safe)] = handler
        logging.lastResort = last_resort


def _safe_copy(terminal: Terminal, handler: logging.Handler) -> PromptSafeHandler:
    stream = getattr(handler, "stream")  # noqa: B009 - a StreamHandler's, or the last resort's (a property)
    safe = PromptSafeHandler(terminal, stream, handler.level)
    safe.setFormatter(handler.formatter)
    for record_filter in handler.filters:
        safe.addFilter(record_filter)
    return safe


def _writes_to_terminal(handler: logging.Handler) -> bool:
    is_stream = isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)
    return is_stream and _isatty(getattr(handler, "stream", None))


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):  # no such method, or a closed stream
        return False
