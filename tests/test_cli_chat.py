"""`memoryscope chat`, driven through its slash commands with piped input; Ctrl-C in the chat and in a
streamed reply. (On a real terminal: test_cli_chat_pty.py.)"""

from __future__ import annotations

import asyncio
import io
import itertools
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from memoryscope.chat.repl import ChatRepl, run_chat
from memoryscope.chat.streaming import astream_reply, interrupt, stream_reply
from memoryscope.cli import main
from memoryscope.context import MemoryContext
from memoryscope.models.base import ChatMessage, GenerationModel
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.worker import Worker, register_worker

pytestmark = pytest.mark.slow  # the command-line chat run whole; `-m "not slow"` leaves it out

LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL")


@register_worker("cli_test_consolidate")
class CountingWorker(Worker):
    """Stands in for consolidation: says how many messages wait."""

    reads: ClassVar[tuple[str, ...]] = ()
    writes: ClassVar[tuple[str, ...]] = ("result",)

    def run(self, ctx: MemoryContext) -> None:
        ctx.result = f"consolidated the messages of {ctx.user_name}"


@pytest.fixture(autouse=True)
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "m.db"
    monkeypatch.setenv("MEMORYSCOPE_STORE_PATH", str(path))
    yield path


def chat(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], script: str, *args: str) -> str:
    """Run `memoryscope chat ARGS` with `script` as its standard input; returns what it printed."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(script))
    assert main(["chat", "--user", "ann", *args]) == 0
    return capsys.readouterr().out


def test_add_list_retrieve_and_conversation_commands(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = chat(
        monkeypatch,
        capsys,
        "/add_memory I play the cello in a community orchestra\n"
        "/list_memory\n"
        "/retrieve_memory which instrument do I play?\n"
        "/lst_memory\n"
        "hello there\n"
        "/history\n"
        "/pop\n"
        "/history\n"
        "/exit\n"
        "this line is never read\n",
    )
    assert "note: no LLM configured" in out or "note: model.generation_model left out" in out
    assert "MemoryScope chat with ann's memories" in out
    assert "added 1 memory" in out
    assert re.search(r"----- added memory \(1\) -----\n\[.*\] I play the cello in a community orchestra \(id: \w+\)", out)
    assert re.search(r"\n\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \w+\] I play the cello", out)  # the retrieved memory
    assert "unknown command /lst_memory. Did you mean /list_memory?" in out
    assert "assistant: No LLM is configured" in out  # the chat line got the memories instead of a reply
    assert "ann: hello there" in out  # /history
    assert "removed 1 turn, forgot 1 stored message(s)" in out
    assert "(no turns yet)" in out  # /history after /pop
    assert "this line is never read" not in out


def test_help_lists_conversation_commands_and_operations(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = chat(monkeypatch, capsys, "/help\n")
    for usage in ("/help", "/history [n]", "/pop [n]", "/retry", "/exit", "/add_memory TEXT", "/delete_memory ID [ID ...]"):
        assert usage in out
    assert re.search(r"/retrieve_memory QUERY\s+the memories that best answer a query", out)
    assert re.search(r"/delete_all \[-y\]\s+delete all of the user's memories", out)


def test_delete_memory_by_id_and_delete_all_with_confirmation(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = chat(monkeypatch, capsys, "/add_memory I like green tea\n/add_memory I live in Porto\n/list_memory\n")
    ids = dict((text, memory_id) for text, memory_id in re.findall(r"\] (.+) \(id: (\w+)\)", out))
    out = chat(monkeypatch, capsys, f"/delete_memory {ids['I like green tea']} nosuchid\n/list_memory\n")
    assert "deleted 1 memory; no memory of yours has the id nosuchid" in out
    assert "green tea" not in out.split("deleted 1 memory")[1]
    assert "I live in Porto" in out
    out = chat(monkeypatch, capsys, "/delete_all\nno\n/list_memory\n/delete_all\nyes\n/list_memory\n")
    assert "delete ALL memories of ann? [y/N] no\ncancelled" in out
    assert "deleted all 1 memory" in out
    assert out.rstrip().endswith("No memories.")
    out = chat(monkeypatch, capsys, "/add_memory one more\n/delete_all -y\n")
    assert "deleted all 1 memory" in out


def test_bad_arguments_print_one_line_and_the_chat_goes_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = chat(monkeypatch, capsys, "/delete_memory\n/add_memory\n/pop many\n/retry\n/add_memory still here\n")
    assert "usage: /delete_memory ID [ID ...]" in out
    assert "usage: /add_memory TEXT" in out
    assert "error: expected a number, got 'many'" in out
    assert "nothing to retry" in out
    assert "added 1 memory" in out


def test_any_configured_operation_is_a_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "with_consolidation.yaml"
    config.write_text(
        "extends: default\n"
        "memory_service:\n"
        "  memoryscope_service:\n"
        "    memory_operations:\n"
        "      consolidate_memory:\n"
        "        workflow: cli_test_consolidate\n"
        "        description: turn new messages into observations\n",
        encoding="utf-8",
    )
    out = chat(monkeypatch, capsys, "/help\n/consolidate_memory\n/consolidate_memroy\n", "--config", str(config))
    assert re.search(r"/consolidate_memory\s+turn new messages into observations", out)
    assert "consolidated the messages of ann" in out
    assert "Did you mean /consolidate_memory?" in out


def test_streamed_replies_and_retry_with_an_llm(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAIServer() as server:
        server.add_rule("what is my cat called", "Your cat is called Mochi.")
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", server.base_url)
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-test-1234")
        out = chat(monkeypatch, capsys, "/add_memory My cat is called Mochi\nwhat is my cat called?\n/retry\n/history\n")
        chats = [request for request in server.requests if request.path.endswith("/chat/completions")]
    assert out.count("assistant: Your cat is called Mochi.\n") == 3  # reply, retried reply, /history
    assert all(request.body.get("stream") for request in chats) and len(chats) == 2
    assert "My cat is called Mochi" in chats[-1].body["messages"][0]["content"]


def test_piped_into_the_command_in_a_subprocess(store_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in LLM_ENV}
    env["MEMORYSCOPE_STORE_PATH"] = str(store_path)
    done = subprocess.run(
        [sys.executable, "-m", "memoryscope.cli", "chat", "--config", "default", "--user", "bob"],
        input="/add_memory Bob collects stamps from Iceland\n/list_memory\n",  # ends without /exit: EOF leaves
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "added 1 memory" in done.stdout
    assert "Bob collects stamps from Iceland (id: " in done.stdout
    assert "Traceback" not in done.stderr


def test_piped_input_never_touches_the_terminal_history(store_path: Path, tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in LLM_ENV}
    env.update(MEMORYSCOPE_STORE_PATH=str(store_path), MEMORYSCOPE_CHAT_HISTORY=str(tmp_path / "chat_history"))
    done = subprocess.run(
        [sys.executable, "-m", "memoryscope.cli", "chat", "--user", "bob"],
        input="/help\n/exit\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "/list_memory" in done.stdout and "\x1b" not in done.stdout  # no readline escape codes
    assert not (tmp_path / "chat_history").exists()


# -- Ctrl-C --------------------------------------------------------------------------------


class FakeStream(GenerationModel):
    """Streams `pieces`, then raises `then` (if any) as if it came while waiting for the next one."""

    def __init__(self, pieces: tuple[str, ...], then: BaseException | None = None) -> None:
        super().__init__("fake", "nowhere")
        self.pieces, self.then = pieces, then

    def chat(self, messages: Sequence[ChatMessage], **options: Any) -> str:
        return "".join(self.pieces)

    async def achat(self, messages: Sequence[ChatMessage], **options: Any) -> str:
        return "".join(self.pieces)

    def stream_chat(self, messages: Sequence[ChatMessage], **options: Any) -> Iterator[str]:
        yield from self.pieces
        if self.then is not None:
            raise self.then

    async def astream_chat(self, messages: Sequence[ChatMessage], **options: Any) -> AsyncIterator[str]:
        for piece in self.pieces:
            yield piece
        if self.then is not None:
            raise self.then


class Outcome:
    def __init__(self) -> None:
        self.answered: list[str] = []
        self.failed = 0

    def callbacks(self) -> dict[str, Any]:
        return {"answered": self.answered.append, "failed": self.fail}

    def fail(self) -> None:
        self.failed += 1


def stream(model: GenerationModel, outcome: Outcome) -> Generator[Any, None, None]:
    return stream_reply(model, [ChatMessage("user", "hi")], {}, {"timings": {}}, **outcome.callbacks())


def test_ctrl_c_while_a_stream_waits_for_the_model_leaves_the_query_unanswered() -> None:
    outcome = Outcome()
    replies = stream(FakeStream(("Your", " cat"), then=KeyboardInterrupt()), outcome)
    assert [piece.delta for piece in itertools.islice(replies, 2)] == ["Your", " cat"]
    with pytest.raises(KeyboardInterrupt):
        next(replies)
    assert (outcome.failed, outcome.answered) == (1, [])


def test_ctrl_c_while_a_piece_is_printed_ends_the_stream_the_same_way() -> None:
    outcome = Outcome()
    replies = stream(FakeStream(("Your", " cat", " is")), outcome)
    next(replies)
    interrupt(replies)
    assert (outcome.failed, outcome.answered) == (1, [])
    interrupt(replies)  # an ended stream: nothing more
    interrupt(iter([]))  # a whole reply: nothing to end
    assert outcome.failed == 1


def test_a_stream_its_reader_closes_is_answered_as_far_as_it_was_read() -> None:
    outcome = Outcome()
    replies = stream(FakeStream(("Your", " cat", " is")), outcome)
    next(replies)
    replies.close()
    assert (outcome.failed, outcome.answered) == (0, ["Your"])


def test_a_cancelled_async_stream_leaves_the_query_unanswered() -> None:
    outcome = Outcome()

    async def read_all() -> list[str]:
        model = FakeStream(("Your",), then=asyncio.CancelledError())
        replies = astream_reply(model, [], {}, {"timings": {}}, **outcome.callbacks())
        return [piece.delta async for piece in replies]

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(read_all())
    assert (outcome.failed, outcome.answered) == (1, [])


class InterruptedOnce(io.StringIO):
    """Output where Ctrl-C comes while `at` is printed, the first time."""

    def __init__(self, at: str) -> None:
        super().__init__()
        self.at = at

    def write(self, text: str) -> int:
        if self.at and text == self.at:
            self.at = ""
            raise KeyboardInterrupt
        return super().write(text)


def test_ctrl_c_during_a_streamed_reply_keeps_the_message_and_retry_asks_it_again(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAIServer() as server:
        server.add_rule("cat", "Your cat is called Mochi.")
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", server.base_url)
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-test-1234")
        out = InterruptedOnce(at=" cat")
        script = "what is my cat called?\n/history\n/list_memory\n/retry\n/history\n"
        assert run_chat("default", "ann", stdin=io.StringIO(script), stdout=out) == 0
        queries = [r.body["messages"][-1]["content"] for r in server.requests if r.body.get("stream")]
    text = out.getvalue()
    assert "assistant: Your\n(interrupted)\n" in text
    assert text.index("(no turns yet)") < text.index("Mochi")  # /history: the interrupted turn is no turn
    assert re.search(r"memory \(1\) -----\n\[.*\] what is my cat called\? \(id: \w+\)", text)  # stored all the same
    assert text.count("assistant: Your cat is called Mochi.\n") == 2  # the retried reply, then /history
    assert queries == ["what is my cat called?", "what is my cat called?"]


def repl_reading(chat: Any, *typed: str | type[BaseException], **options: Any) -> tuple[ChatRepl, io.StringIO, list[str]]:
    """A REPL whose `read_line` gives `typed` (an exception class is raised), then the end of input."""
    out, prompts = io.StringIO(), []
    answers = iter(typed)

    def read_line(prompt: str) -> str:
        prompts.append(prompt)
        item = next(answers, EOFError)
        if isinstance(item, type):
            raise item
        return item

    return ChatRepl(chat, out=out, read_line=read_line, interactive=True, **options), out, prompts


@pytest.fixture
def offline_chat() -> Iterator[Any]:
    from memoryscope.app import MemoryScope

    with MemoryScope("default") as scope:
        yield scope.default_memory_chat.for_user("ann")


def test_ctrl_c_twice_at_the_prompt_leaves_once_a_line_between_does_not(offline_chat: Any) -> None:
    repl, out, prompts = repl_reading(offline_chat, KeyboardInterrupt, "/stream", KeyboardInterrupt, KeyboardInterrupt, "/help")
    assert repl.run() == 0
    assert out.getvalue().count("(interrupted: Ctrl-C again, /exit or Ctrl-D leaves)") == 2
    assert "stream: off" in out.getvalue() and "/help" not in out.getvalue()
    assert len(prompts) == 4


def test_the_delete_all_question_is_read_by_read_answer(offline_chat: Any) -> None:
    questions: list[str] = []

    def read_answer(question: str) -> str:
        questions.append(question)
        return "no"

    repl, out, prompts = repl_reading(offline_chat, "/delete_all", read_answer=read_answer)
    assert repl.run() == 0
    assert questions == ["delete ALL memories of ann? [y/N] "] and "cancelled" in out.getvalue()
    assert prompts == ["ann> ", "ann> "]


def test_piped_chat_whose_every_line_failed_exits_as_that_failure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A script sees a chat that did nothing; one line that worked is enough for 0."""
    too_long = "/add_memory " + "x" * 100_001 + "\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(too_long * 2))
    assert main(["chat", "--user", "ann"]) == 2  # too large: a misuse, as in the door's table
    assert capsys.readouterr().out.count("error: ") == 2
    monkeypatch.setattr(sys, "stdin", io.StringIO(too_long + "/list_memory\n"))
    assert main(["chat", "--user", "ann"]) == 0
