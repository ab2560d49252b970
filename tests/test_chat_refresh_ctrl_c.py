"""One Ctrl-C stops `/list_memory refresh_time=N` in `memoryscope chat` cleanly, once: one word
that the refresh stopped, the prompt back, nothing else (no second handler's "(interrupted)").
On a real pseudo-terminal, as `tests/test_cli_chat_pty.py` drives it, and (the race made
certain) on the terminal's Ctrl-C watcher itself."""

from __future__ import annotations

import signal
import socket
import threading
import time

import pytest
from test_cli_chat_pty import CTRL_C, PROMPT, chat_on_pty, env  # noqa: F401  # `env` is a fixture used below
from test_terminal import FakeReadline, Screen

from memoryscope.terminal import Terminal
from memoryscope.testing.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.slow  # the chat on a terminal; `-m "not slow"` leaves it out


@pytest.fixture
def server() -> FakeOpenAIServer:
    with FakeOpenAIServer(default_reply="Hello.") as fake:
        yield fake  # type: ignore[misc]  # a generator fixture


@pytest.mark.parametrize("attempt", range(2))
def test_one_ctrl_c_stops_the_refresh_once(env: dict[str, str], attempt: int) -> None:  # noqa: F811  # the fixture
    with chat_on_pty("default", env) as chat:
        chat.expect(PROMPT)
        chat.send("/add_memory I keep bees\r")
        chat.expect(PROMPT)
        chat.send("/list_memory refresh_time=0.3\r")
        chat.expect(r"list_memory \(every 0\.3s; Ctrl-C stops\)")
        time.sleep(0.2 + 0.5 * attempt)  # during a sleep or a run, whichever it hits
        chat.send(CTRL_C)
        chat.expect(r"\(stopped refreshing /list_memory\)")
        chat.expect(PROMPT)
        time.sleep(0.6)  # a Ctrl-C sent again would have come by now (after 0.1 s)
        chat.send("/exit\r")
        assert chat.wait() == 0
        after = chat.output[chat.output.rindex("(stopped refreshing") :]
        assert chat.output.count("(stopped refreshing /list_memory)") == 1
        assert "(interrupted" not in after, after
        assert "Traceback" not in chat.output


def watched_prompt(seen_before: bool) -> list[int]:
    """A Ctrl-C that the watcher hears of only once the next prompt is up (the GIL went to the
    main thread first): the Ctrl-Cs sent again. `seen_before`: the main thread got it (it stopped a
    command) before the prompt came back."""
    started, finish = threading.Event(), threading.Event()

    def read(prompt: str) -> str:
        started.set()
        finish.wait(5)
        return "/exit"

    terminal = Terminal(Screen(), FakeReadline(), read)
    sent: list[int] = []
    source, sink = socket.socketpair()
    watcher = threading.Thread(target=terminal.watch, args=(source, lambda: sent.append(1)))
    watcher.start()
    if seen_before:
        terminal.interrupt_seen()
    reader = threading.Thread(target=terminal.read_line, args=("ann> ",))
    reader.start()
    assert started.wait(5)
    sink.send(bytes([signal.SIGINT]))
    time.sleep(0.5)  # the watcher sends a missed one again after 0.1 s
    finish.set()
    reader.join(5)
    sink.close()
    watcher.join(5)
    source.close()
    return sent


def test_a_ctrl_c_that_stopped_a_command_is_not_sent_again_to_the_next_prompt() -> None:
    assert watched_prompt(seen_before=True) == []


def test_a_ctrl_c_missed_at_the_prompt_is_still_sent_again() -> None:
    assert watched_prompt(seen_before=False) == [1, 1, 1]
