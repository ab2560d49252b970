"""Messages whose model answer stays unreadable: kept pending, retried with backoff, parked.

An answer still unreadable after the one repair request must not turn its messages into "not
informative" ones: they stay pending with a failure count and the last error, wait out a
backoff, and after `max_consolidation_failures` are parked as failed, seen by `memoryscope
status` and retried on demand (`--retry-failed`). Real workers, real SQLite, the real
`openai_like` client against the fake server answering from `ConsolidationScript`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from test_consolidation import EVENING_TALK, Memory, build_runner, english_script

from memoryscope._scheduler_state import Scope, Track, Triggers, fired_trigger, pending_counts
from memoryscope.app import MemoryScope
from memoryscope.cli import main
from memoryscope.context import MemoryContext
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.workflow import WorkflowRunner

TRIGGER = Triggers(messages=5)


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


def pending(memory: Memory) -> list[MemoryNode]:
    return memory.nodes(MemoryType.CONVERSATION, reflected=False)


def test_an_unreadable_score_leaves_the_messages_pending_with_the_error(server: FakeOpenAIServer, memory_for: Any) -> None:
    script = english_script(server)
    script.garbage("info_filter", 2)  # the answer and the answer to the repair request
    memory = memory_for()
    memory.tell(*EVENING_TALK)
    before = pending_counts(memory.store, TRIGGER, Scope("ann"))
    result = memory.consolidate()

    assert memory.nodes(MemoryType.OBSERVATION) == []
    waiting = pending(memory)
    assert len(waiting) == 6  # not "not informative": still pending
    now = datetime.now(timezone.utc)
    for node in waiting:
        assert node.meta["consolidation_failures"] == 1
        assert "unreadable" in node.meta["consolidation_error"] and len(node.meta["consolidation_error"]) < 300
        assert 30 < (datetime.fromisoformat(node.meta["consolidation_retry_after"]) - now).total_seconds() <= 60
        assert not node.meta.get("consolidation_failed")
    assert sorted(result.context.details["info_filter"]["failed_message_ids"]) == sorted(node.memory_id for node in waiting)

    calls = memory.chats()
    again = memory.consolidate()  # soon after: they back off, the model is not asked about them
    assert memory.chats() == calls
    assert again.stopped == "no new messages"
    assert len(pending(memory)) == 6

    # the trigger neither counts them while they back off nor spins on them
    counts = pending_counts(memory.store, TRIGGER, Scope("ann"))
    assert counts["messages"] == 0
    assert fired_trigger(TRIGGER, counts, Track(news=False, settled=before)) is None


def test_retried_after_the_backoff_then_parked_and_the_trigger_stops(server: FakeOpenAIServer, memory_for: Any) -> None:
    script = english_script(server)
    script.garbage("info_filter", 100)
    memory = memory_for(retry_backoff_s=0, max_consolidation_failures=2)
    memory.tell(*EVENING_TALK)
    first_counts = pending_counts(memory.store, TRIGGER, Scope("ann"))
    memory.consolidate()
    assert {node.meta["consolidation_failures"] for node in pending(memory)} == {1}

    # the backoff passed: the trigger fires again although the count is what it was before the failed run
    counts = pending_counts(memory.store, TRIGGER, Scope("ann"))
    assert counts["messages"] == 6
    assert fired_trigger(TRIGGER, counts, Track(news=False, settled=first_counts)) is not None

    calls = memory.chats()
    memory.consolidate()
    assert memory.chats() == calls + 2  # retried: one ask and its repair request
    parked = pending(memory)
    assert len(parked) == 6
    assert all(node.meta["consolidation_failed"] and node.meta["consolidation_failures"] == 2 for node in parked)

    calls = memory.chats()
    assert memory.consolidate().stopped == "no new messages"
    assert memory.chats() == calls
    counts = pending_counts(memory.store, TRIGGER, Scope("ann"))
    assert counts["messages"] == 0
    assert fired_trigger(TRIGGER, counts, Track(news=False, settled=counts)) is None


def test_retry_failed_takes_parked_messages_again_and_a_good_answer_makes_observations(
    server: FakeOpenAIServer, memory_for: Any
) -> None:
    script = english_script(server)
    script.garbage("info_filter", 2)
    memory = memory_for(max_consolidation_failures=1)
    memory.tell(*EVENING_TALK)
    memory.consolidate()
    assert all(node.meta["consolidation_failed"] for node in pending(memory))
    assert memory.consolidate().stopped == "no new messages"

    result = memory.runner.run(MemoryContext(user_name="ann", retry_failed=True))
    assert result.context.result == "stored 5 observations, consolidated 6 messages"
    assert pending(memory) == []
    for node in memory.nodes(MemoryType.CONVERSATION):
        assert not any(key.startswith("consolidation_") for key in node.meta)


def test_the_status_command_shows_parked_messages_and_run_retries_them(
    server: FakeOpenAIServer,
    embedding: LocalEmbedding,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = english_script(server)
    script.garbage("info_filter", 2)
    config = tmp_path / "strict.yaml"
    config.write_text(
        "extends: default\n"
        "worker:\n"
        "  info_filter:\n"
        "    class: info_filter\n"
        "    generation_model: generation_model\n"
        "    preserved_scores: [2, 3]\n"
        "    max_consolidation_failures: 1\n",
        encoding="utf-8",
    )
    store_path = tmp_path / "cli.db"
    monkeypatch.setenv("MEMORYSCOPE_STORE_PATH", str(store_path))
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", server.base_url)
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-test-1234")
    store = SqliteMemoryStore(path=store_path, embedding_model=embedding)
    try:
        Memory(store, None, "ann", server).tell(*EVENING_TALK)  # type: ignore[arg-type]  # telling needs no runner
    finally:
        store.close()

    with MemoryScope(str(config)) as scope:
        service = scope.default_service
        assert service.run_operation("consolidate_memory", "ann").stopped.startswith("left 6 message(s) pending")
        messages = service.scheduler.status().messages["ann"]
        assert messages.parked == 6 and messages.ready == 0 and "unreadable" in messages.last_error
    assert main(["run", "consolidate_memory", "--config", str(config), "--user", "ann"]) == 0
    assert "no new messages" in capsys.readouterr().out
    assert main(["status", "--config", str(config), "--user", "ann"]) == 0
    out = capsys.readouterr().out
    assert "parked as failed: 6" in out
    assert "unreadable" in out
    assert "pending messages: 0" in out

    assert main(["run", "consolidate_memory", "--config", str(config), "--user", "ann", "--retry-failed"]) == 0
    assert "stored 5 observations, consolidated 6 messages" in capsys.readouterr().out
    assert main(["status", "--config", str(config), "--user", "ann"]) == 0
    out = capsys.readouterr().out
    assert "parked as failed: 0" in out
