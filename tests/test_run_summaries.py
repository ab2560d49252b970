"""A run's summary tells what waits: messages backing off after a failed run (until when, and
the last error) and parked ones are named, never hidden behind "no new messages" or a bare
"consolidated 1 message". Real workers, real SQLite, the real `openai_like` client against the
fake server answering from `ConsolidationScript`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from test_consolidation import EVENING_TALK, Memory, build_runner, english_script

from memoryscope.demo import load_demo_conversation, run_demo
from memoryscope.memory import MemoryType
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.workflow import WorkflowRunner

UNTIL = r"until (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) CST after a failed run"  # the runner's zone: Asia/Shanghai


@pytest.fixture
def memory_for(server: FakeOpenAIServer, embedding: LocalEmbedding, tmp_path: Path) -> Iterator[Any]:
    opened: list[tuple[SqliteMemoryStore, WorkflowRunner]] = []

    def make(**info_filter: Any) -> Memory:
        store = SqliteMemoryStore(path=tmp_path / "memories.db", embedding_model=embedding)
        runner = build_runner(store, server.base_url, **info_filter)
        opened.append((store, runner))
        return Memory(store, runner, "ann", server)

    yield make
    for store, runner in opened:
        runner.close()
        store.close()


def retry_after(memory: Memory) -> datetime:
    waiting = memory.nodes(MemoryType.CONVERSATION, reflected=False)
    return min(datetime.fromisoformat(node.meta["consolidation_retry_after"]) for node in waiting)


def shown(moment: datetime) -> str:
    return f"{moment.astimezone(ZoneInfo('Asia/Shanghai')):%Y-%m-%d %H:%M:%S}"


def test_no_new_messages_says_what_waits_and_until_when(server: FakeOpenAIServer, memory_for: Any) -> None:
    script = english_script(server)
    script.garbage("info_filter", 2)  # the answer and the answer to the repair request
    memory = memory_for()
    memory.tell(*EVENING_TALK)
    first = memory.consolidate()
    assert first.context.result.startswith("left 6 message(s) pending: the model's answer about them was unreadable; ")
    again = memory.consolidate()
    assert again.stopped == "no new messages"  # the machine's reason stays
    said = again.context.result
    found = re.fullmatch(r"no new messages; 6 message\(s\) wait: 6 backing off " + UNTIL + r" \(last error: (.+)\)", said)
    assert found, said
    assert found.group(1) == shown(retry_after(memory))
    assert "the message scores from qwen stayed unreadable" in found.group(2)


def test_a_partial_run_says_how_many_messages_back_off(server: FakeOpenAIServer, memory_for: Any) -> None:
    script = english_script(server)
    script.garbage("info_filter", 2)  # the first chunk's answer stays unreadable: its one message waits
    memory = memory_for(prompt_token_budget=201)  # one message per call
    memory.tell(*EVENING_TALK)
    result = memory.consolidate()
    assert len(result.context.details["info_filter"]["failed_message_ids"]) == 1
    said = result.context.result
    found = re.search(r"consolidated 5 messages; 1 message\(s\) wait: 1 backing off " + UNTIL, said)
    assert found, said
    assert found.group(1) == shown(retry_after(memory))


def test_parked_messages_are_named_with_the_command_that_retries_them(server: FakeOpenAIServer, memory_for: Any) -> None:
    script = english_script(server)
    script.garbage("info_filter", 2)
    memory = memory_for(max_consolidation_failures=1)
    memory.tell(*EVENING_TALK)
    memory.consolidate()
    said = memory.consolidate().context.result
    assert said.startswith("no new messages; 6 message(s) wait: 6 parked after repeated failures"), said
    assert "--retry-failed" in said


def test_nothing_waiting_says_only_no_new_messages(server: FakeOpenAIServer, memory_for: Any) -> None:
    english_script(server)
    memory = memory_for()
    memory.tell(*EVENING_TALK)
    first = memory.consolidate()
    assert "wait" not in first.context.result
    assert memory.consolidate().context.result == "no new messages"


def test_the_demo_says_what_waits_when_the_model_answers_nonsense(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The demo's messages all back off (the model's scores are unreadable): the on-demand run
    says so, with until when, instead of a bare "no new messages"."""
    with FakeOpenAIServer(default_reply="Sorry, I cannot help with that.") as fake:
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", fake.base_url)
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-demo")
        said: list[str] = []
        assert run_demo(store_path=str(tmp_path / "demo.db"), echo=said.append) == 0
    (line,) = [line for line in said if line.strip().startswith("consolidate_memory:")]
    waiting = sum(len(session["messages"]) for session in load_demo_conversation()["sessions"])
    assert f"no new messages; {waiting} message(s) wait: {waiting} backing off until " in line, line
    assert "last error: worker info_filter: the message scores" in line
