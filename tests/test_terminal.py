"""`memoryscope.terminal`: log records around the prompt, from any thread; the input history file.

No terminal here: the screen is a string that says it is a terminal, readline either a stand-in
with the functions the terminal uses or (for the history file) the real module.
"""

from __future__ import annotations

import io
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import memoryscope.terminal as terminal_module
import memoryscope.terminal_readline as readline_module
from memoryscope.terminal import PromptSafeHandler, Terminal, terminal_session
from memoryscope.terminal_readline import HISTORY_ENV, history_path

CLEAR_LINE = "\r\x1b[K"
needs_signals = pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="no POSIX signals to wake the main thread")


class Screen(io.StringIO):
    """A terminal's output as text; notes which thread wrote each piece."""

    def __init__(self) -> None:
        super().__init__()
        self.writers: list[tuple[str, str]] = []

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.writers.append((threading.current_thread().name, text))
        return super().write(text)


class FakeReadline:
    """What the terminal uses of the `readline` module, over a list."""

    def __init__(self, buffer: str = "") -> None:
        self.buffer = buffer  # the text typed so far
        self.items: list[str] = []
        self.length = -1
        self.redisplays = 0

    def get_line_buffer(self) -> str:
        return self.buffer

    def redisplay(self) -> None:
        self.redisplays += 1

    def get_current_history_length(self) -> int:
        return len(self.items)

    def get_history_item(self, index: int) -> str | None:
        return self.items[index - 1] if 1 <= index <= len(self.items) else None

    def add_history(self, line: str) -> None:
        self.items.append(line)

    def clear_history(self) -> None:
        self.items.clear()

    def get_history_length(self) -> int:
        return self.length

    def set_history_length(self, length: int) -> None:
        self.length = length

    def set_auto_history(self, enabled: bool) -> None:
        pass


@pytest.fixture(autouse=True)
def no_history_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HISTORY_ENV, "")


@pytest.fixture
def tty_handler() -> Iterator[tuple[logging.Handler, Screen]]:
    """A root handler writing to a terminal, as `logging.basicConfig` on a terminal makes."""
    screen = Screen()
    handler = logging.StreamHandler(screen)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler, screen
    finally:
        root.removeHandler(handler)


def log_from_a_thread(message: str) -> None:
    thread = threading.Thread(target=logging.getLogger("memoryscope.test").warning, args=(message,), name="background")
    thread.start()
    thread.join(10)


def test_a_record_while_the_prompt_waits_clears_the_line_and_draws_prompt_and_typed_text_again() -> None:
    """No way to wake the main thread (`wake` unset): the record's own thread prints it."""
    screen, editor = Screen(), FakeReadline(buffer="I play the ce")

    def read(prompt: str) -> str:
        screen.write(prompt + editor.buffer)  # what readline shows so far
        thread = threading.Thread(target=terminal.print_record, args=("WARNING retry 1/3", screen))
        thread.start()
        thread.join(10)
        return "I play the cello"

    terminal = Terminal(screen, editor, read)
    assert terminal.read_line("ann> ") == "I play the cello"
    assert screen.getvalue() == "ann> I play the ce" + CLEAR_LINE + "WARNING retry 1/3\n" + "ann> I play the ce"
    assert editor.redisplays == 1


@needs_signals
def test_a_record_from_a_thread_is_printed_by_the_main_thread_woken_by_a_signal(
    tty_handler: tuple[logging.Handler, Screen],
) -> None:
    """In a session the record waits, and SIGUSR2 has the main thread print it: readline is not thread-safe."""
    _, screen = tty_handler
    editor = FakeReadline(buffer="dra")

    def read(prompt: str) -> str:
        screen.write(prompt + editor.buffer)
        thread = threading.Thread(target=logging.getLogger("memoryscope.test").warning, args=("from the scheduler",))
        thread.start()
        while thread.is_alive():  # Python code between waits: the signal's handler runs here, on this thread
            time.sleep(0.01)
        return "draft"

    with terminal_session(screen, editor=editor, read=read) as terminal:
        assert terminal.read_line("ann> ") == "draft"
    assert screen.getvalue() == "ann> dra" + CLEAR_LINE + "WARNING memoryscope.test: from the scheduler\n" + "ann> dra"
    assert {name for name, text in screen.writers if "scheduler" in text} == {threading.main_thread().name}


def test_a_record_while_a_reply_is_mid_line_starts_a_line_of_its_own(tty_handler: tuple[logging.Handler, Screen]) -> None:
    _, screen = tty_handler
    with terminal_session(screen, editor=FakeReadline()) as terminal:
        terminal.out.write("assistant: Your cat is")
        log_from_a_thread("slow answer")
        terminal.out.write(" called Mochi.\n")
        log_from_a_thread("after the reply")
    assert screen.getvalue().splitlines() == [
        "assistant: Your cat is",
        "WARNING memoryscope.test: slow answer",
        " called Mochi.",
        "WARNING memoryscope.test: after the reply",
    ]


def test_records_held_while_the_line_is_read_come_out_after_it_when_nothing_wakes_the_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(terminal_module, "_HOLD_S", 0.1)
    screen = Screen()

    def read(prompt: str) -> str:
        screen.write(prompt)
        thread = threading.Thread(target=terminal.print_record, args=("WARNING late", screen), name="background")
        thread.start()
        thread.join(10)  # gives up waiting after _HOLD_S
        screen.write("hello\n")  # Enter
        return "hello"

    terminal = Terminal(screen, FakeReadline(), read)
    terminal.wake = lambda: None  # a signal nobody handles
    assert terminal.read_line("ann> ") == "hello"
    assert screen.getvalue() == "ann> hello\nWARNING late\n"


def test_a_ctrl_c_reported_as_a_system_error_is_a_ctrl_c() -> None:
    """Ctrl-C with the wake signal pending: CPython runs the wake handler with input()'s
    KeyboardInterrupt set, and reports a SystemError caused by it."""

    def read(prompt: str) -> str:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise SystemError("<built-in method acquire> returned a result with an exception set") from interrupt

    with pytest.raises(KeyboardInterrupt):
        Terminal(Screen(), FakeReadline(), read).read_line("ann> ")


@needs_signals
def test_only_handlers_writing_to_a_terminal_are_swapped_and_all_come_back(
    tmp_path: Path, tty_handler: tuple[logging.Handler, Screen], monkeypatch: pytest.MonkeyPatch
) -> None:
    handler, _ = tty_handler
    root = logging.getLogger()
    to_file = logging.FileHandler(tmp_path / "log.txt")
    root.addHandler(to_file)
    monkeypatch.setattr(sys, "stderr", Screen())  # logging's last resort writes to the terminal too
    last_resort, wake_handler = logging.lastResort, signal.getsignal(signal.SIGUSR2)
    try:
        with terminal_session(Screen(), editor=FakeReadline()):
            safe = [h for h in root.handlers if isinstance(h, PromptSafeHandler)]
            assert len(safe) == 1 and safe[0].formatter is handler.formatter and handler not in root.handlers
            assert to_file in root.handlers
            assert isinstance(logging.lastResort, PromptSafeHandler)
            assert signal.getsignal(signal.SIGUSR2) is not wake_handler  # borrowed to wake the main thread
        assert handler in root.handlers and not any(isinstance(h, PromptSafeHandler) for h in root.handlers)
        assert logging.lastResort is last_resort
        assert signal.getsignal(signal.SIGUSR2) is wake_handler
        assert signal.set_wakeup_fd(-1) == -1  # the watcher of Ctrl-C gave the wakeup fd back
    finally:
        root.removeHandler(to_file)
        to_file.close()


def test_history_path_default_override_and_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(HISTORY_ENV)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert history_path() == tmp_path / ".memoryscope" / "chat_history"
    monkeypatch.setenv(HISTORY_ENV, "~/elsewhere/history")
    assert history_path() == tmp_path / "elsewhere" / "history"
    monkeypatch.setenv(HISTORY_ENV, "")
    assert history_path() is None


def lines(*typed: str) -> Callable[[str], str]:
    answers = iter(typed)
    return lambda prompt: next(answers)


def readline_lines(readline: object) -> list[str]:
    return [readline.get_history_item(i) for i in range(1, readline.get_current_history_length() + 1)]  # type: ignore[attr-defined]


def file_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line != "_HiStOrY_V2_"]  # libedit's header line


@pytest.fixture
def readline() -> Iterator[object]:
    module = pytest.importorskip("readline", reason="this Python has no readline module")
    saved = readline_lines(module)
    module.clear_history()
    module.add_history("a line of the Python REPL")
    yield module
    module.clear_history()
    for line in saved:
        module.add_history(line)


def test_history_keeps_the_sessions_lines_in_a_private_file_and_gives_readline_back_its_own(
    tmp_path: Path, readline: object
) -> None:
    path = tmp_path / "new" / "chat_history"
    with terminal_session(Screen(), editor=readline, history=path, read=lines("first", "first", "yes", "  ", "second")) as term:
        for _ in range(2):
            term.read_line("ann> ")
        term.read_line("delete? [y/N] ", remember=False)  # an answer, not a line to recall
        term.read_line("ann> ")
        term.read_line("ann> ")
        assert readline_lines(readline) == ["first", "second"]  # no repeat, no answer, no blank
    assert file_lines(path) == ["first", "second"]
    assert path.stat().st_mode & 0o777 == 0o600
    assert readline_lines(readline) == ["a line of the Python REPL"]

    with terminal_session(Screen(), editor=readline, history=path, read=lines("third")) as term:
        assert readline_lines(readline) == ["first", "second"]  # what Up recalls
        term.read_line("ann> ")
    assert file_lines(path) == ["first", "second", "third"]


def test_history_file_is_cut_to_its_length(tmp_path: Path, readline: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readline_module, "HISTORY_LENGTH", 3)
    path = tmp_path / "chat_history"
    path.write_text("a\nb\nc\n")
    with terminal_session(Screen(), editor=readline, history=path, read=lines("d")) as term:
        term.read_line("ann> ")
    assert file_lines(path) == ["b", "c", "d"]


def test_without_readline_lines_are_read_plainly_and_no_file_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terminal_module, "load_readline", lambda: None)
    path = tmp_path / "chat_history"
    screen = Screen()
    with terminal_session(screen, history=path, read=lines("hello")) as term:
        assert term.read_line("ann> ") == "hello"
        term.print_record("WARNING a record", screen)
    assert not path.exists()


def test_gnu_readline_offers_its_own_redraw(readline: object) -> None:
    if "libedit" in (getattr(readline, "__doc__", "") or ""):
        pytest.skip("libedit: the terminal draws the prompt again itself")
    native = readline_module.native_redraw(readline)
    assert native is not None and not native.reading()  # no line is being read
    assert readline_module.native_redraw(FakeReadline()) is None
