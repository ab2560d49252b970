"""`memoryscope chat`, driven through its slash commands with piped input."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from memoryscope.cli import main
from memoryscope.context import MemoryContext
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.worker import Worker, register_worker

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
