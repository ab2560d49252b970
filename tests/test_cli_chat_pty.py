"""`memoryscope chat` on a real pseudo-terminal: line editing, input history, log records that
never cut into the line being typed, and Ctrl-C during a streamed reply.

Each test runs `python -m memoryscope.cli chat` with a pty as its controlling terminal (so the
terminal driver turns `\\x03` into SIGINT, as a keyboard does) against the fake OpenAI server,
types into the pty and reads what the terminal would show.
"""

from __future__ import annotations

import codecs
import contextlib
import importlib.util
import os
import re
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryscope.testing.fake_openai import FakeOpenAIServer

if sys.platform == "win32" or not hasattr(os, "openpty"):
    pytest.skip("no pseudo-terminals (pty) on this platform", allow_module_level=True)
if importlib.util.find_spec("readline") is None:
    pytest.skip("this Python has no readline module: `memoryscope chat` reads plain lines", allow_module_level=True)

import fcntl  # POSIX only: after the skip
import termios

pytestmark = pytest.mark.slow  # the chat on a pseudo-terminal, in a subprocess; `-m "not slow"` leaves it out

LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL")
LEFT, UP, CTRL_C, CTRL_D = "\x1b[D", "\x1b[A", "\x03", "\x04"
PROMPT = "ann> "
# Make the pty the child's controlling terminal (it leads a new session), then become the command.
TAKE_TERMINAL = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


class PtyChat:
    """`memoryscope chat` on a pty: `send` types, `expect` waits for what the terminal shows."""

    def __init__(self, config: Path, env: dict[str, str]) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))  # wide: no line wraps
        command = [sys.executable, "-c", TAKE_TERMINAL, "-m", "memoryscope.cli", "chat", "--config", str(config), "--user", "ann"]
        self.process = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
        os.close(slave)
        self.master = master
        self.output = ""  # everything shown so far, escape codes included
        self.seen = 0  # where the next `expect` starts looking
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._ended = False

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def expect(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        """Wait until `pattern` (a regex) shows after the last match; returns its match."""
        regex = re.compile(pattern, re.DOTALL)
        deadline = time.monotonic() + timeout
        while True:
            found = regex.search(self.output, self.seen)
            if found:
                self.seen = found.end()
                return found
            if self._ended or not self._read(deadline - time.monotonic()):
                shown = self.output[self.seen :]
                raise AssertionError(f"{pattern!r} never showed; the terminal shows, from the last match:\n{shown!r}")

    def wait(self, timeout: float = 30.0) -> int:
        """Read to the end of the output; the exit status."""
        deadline = time.monotonic() + timeout
        while not self._ended and self._read(deadline - time.monotonic()):
            pass
        return self.process.wait(timeout=max(deadline - time.monotonic(), 1.0))

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        os.close(self.master)

    def _read(self, timeout: float) -> bool:
        """Read what is there within `timeout` seconds; False once time is up or the output ended."""
        if timeout <= 0:
            return False
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the child closed the terminal
            data = b""
        if not data:
            self._ended = True
            return False
        self.output += self._decoder.decode(data)
        return True


@pytest.fixture
def env(tmp_path: Path, server: FakeOpenAIServer) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if key not in LLM_ENV}
    environment.update(
        MEMORYSCOPE_STORE_PATH=str(tmp_path / "m.db"),
        MEMORYSCOPE_LLM_API_BASE=server.base_url,
        MEMORYSCOPE_LLM_API_KEY="sk-test-1234",
        MEMORYSCOPE_CHAT_HISTORY=str(tmp_path / "chat_history"),
        TERM="xterm",
        INPUTRC=os.devnull,  # the user's key bindings (vi mode, ...) stay out of the test
    )
    return environment


@contextlib.contextmanager
def chat_on_pty(config: Path | str, env: dict[str, str]) -> Iterator[PtyChat]:
    chat = PtyChat(Path(config), env)
    try:
        yield chat
    finally:
        chat.close()


def streamed_queries(server: FakeOpenAIServer) -> list[str]:
    """The last user message of each streamed chat request (the replies; not the memory steps)."""
    chats = [r for r in server.requests if r.path.endswith("/chat/completions") and r.body.get("stream")]
    return [chat.body["messages"][-1]["content"] for chat in chats]


def test_arrow_keys_edit_the_line_and_recall_earlier_lines(tmp_path: Path, env: dict[str, str], server: FakeOpenAIServer) -> None:
    """Left moves the cursor, Up recalls the line before, in this session and the next (the history file)."""
    with chat_on_pty("default", env) as chat:
        chat.expect(PROMPT)
        chat.send("abc" + LEFT + "X\r")  # the cursor goes back over the c: X lands before it
        chat.expect(r"assistant: This is a fake reply\.")
        chat.expect(PROMPT)
        chat.send(UP)
        chat.expect("abXc")  # the line before, recalled
        chat.send("\r")
        chat.expect(r"assistant: This is a fake reply\.")
        chat.expect(PROMPT)
        chat.send("/exit\r")
        assert chat.wait() == 0
    assert streamed_queries(server) == ["abXc", "abXc"]
    history = tmp_path / "chat_history"
    assert [line for line in history.read_text().splitlines() if not line.startswith("_HiStOrY")] == ["abXc", "/exit"]
    assert history.stat().st_mode & 0o077 == 0  # what was typed is private

    with chat_on_pty("default", env) as chat:  # the next session starts with that history
        chat.expect(PROMPT)
        chat.send(UP + UP)
        chat.expect("abXc")
        chat.send("\r")
        chat.expect(r"assistant: This is a fake reply\.")
        chat.expect(PROMPT)
        chat.send(CTRL_D)
        assert chat.wait() == 0
        assert "Traceback" not in chat.output
    assert streamed_queries(server)[-1] == "abXc"


def test_a_warning_from_a_background_thread_redraws_the_prompt_and_the_typed_text(
    tmp_path: Path, env: dict[str, str], server: FakeOpenAIServer
) -> None:
    """Consolidation runs in the background after each message here, with a model that answers
    503 (retry after 1 s): its retry warnings come while the prompt waits."""
    with FakeOpenAIServer() as failing:
        failing.fail_next(20, status=503, retry_after=1.0)
        config = tmp_path / "background_retries.yaml"
        config.write_text(
            "extends: default\n"
            "model:\n"
            "  background_model:\n"
            "    class: llama_index_generation_model\n"
            "    module_name: openai_like\n"
            "    model_name: fake-background\n"
            f"    api_base: {failing.base_url}\n"
            "    api_key_env: MEMORYSCOPE_LLM_API_KEY\n"
            "    max_retries: 3\n"
            "worker:\n"
            "  info_filter:\n"
            "    generation_model: background_model\n"
            "memory_service:\n"
            "  memoryscope_service:\n"
            "    memory_operations:\n"
            "      consolidate_memory:\n"
            "        trigger_messages: 1\n",
            encoding="utf-8",
        )
        with chat_on_pty(config, env) as chat:
            chat.expect(PROMPT)
            chat.send("I play the cello\r")
            chat.expect(r"assistant: This is a fake reply\.")
            chat.expect(r"retry 1/3 in [\d.]+s.*?" + PROMPT)  # the first warning, then the prompt again
            chat.send("draft")
            chat.expect("draft")
            # the next record (a retry, or the scheduler giving up): the line is cleared, the record
            # printed on it, then the prompt and "draft" drawn again
            record = r"(?:WARNING|ERROR) memoryscope\.[\w.]+: [^\r\n]*fake-background[^\r\n]*"
            warning = chat.expect(r"(.{0,12})" + record + r"\r\n[^\n]*?" + PROMPT + "draft")
            assert warning.group(1).endswith(("\n", "\r", "\x1b[K")), f"the warning shares a line: {warning.group(0)!r}"
            chat.send(" over\r")  # the line typed before the warning is still being edited
            chat.expect(r"assistant: This is a fake reply\.")
            chat.expect(PROMPT)
            chat.send("/exit\r")
            assert chat.wait() == 0
    assert streamed_queries(server) == ["I play the cello", "draft over"]


def test_ctrl_c_during_a_streamed_reply_keeps_the_message_for_retry(env: dict[str, str], server: FakeOpenAIServer) -> None:
    """Ctrl-C while the reply is awaited ends it; the message is stored, `/retry` asks it again;
    Ctrl-C twice at the prompt leaves."""
    asked, release = threading.Event(), threading.Event()

    def slow_first_stream(request: dict[str, Any]) -> str:
        if request.get("stream") and not asked.is_set():
            asked.set()
            release.wait(30)  # the reply hangs until the test lets it go
        return "Your cat is called Mochi."

    server.add_rule("cat", slow_first_stream)
    with chat_on_pty("default", env) as chat:
        try:
            chat.expect(PROMPT)
            chat.send("what is my cat called?\r")
            chat.expect("assistant: ")
            assert asked.wait(30), "the streamed reply was never asked for"
            chat.send(CTRL_C)
            chat.expect(r"\(interrupted\)")
        finally:
            release.set()
        chat.expect(PROMPT)
        chat.send("/list_memory\r")
        chat.expect(r"\] what is my cat called\? \(id: \w+\).*?" + PROMPT)  # the message was stored all the same
        chat.send("/retry\r")
        chat.expect(r"assistant: Your cat is called Mochi\.")
        chat.expect(PROMPT)
        chat.send(CTRL_C)  # at once: one that comes while readline draws the prompt counts too
        chat.expect(r"\(interrupted: Ctrl-C again")
        chat.expect(PROMPT)
        chat.send(CTRL_C)
        assert chat.wait() == 0
        assert "Traceback" not in chat.output
    assert streamed_queries(server) == ["what is my cat called?", "what is my cat called?"]
