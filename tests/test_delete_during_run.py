"""A user's delete sticks: a consolidation running while the user deletes never writes back what
was deleted after it loaded it, nor what it drew from it, and says what it dropped."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from test_consolidation import build_runner

from memoryscope.context import MemoryContext, Message
from memoryscope.memory import MemoryType
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores.base import MemoryFilter
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.workflow import RunResult, WorkflowRunner

EVENING = datetime(2024, 10, 26, 21, 26, 20, tzinfo=ZoneInfo("Asia/Shanghai"))
TALK = {
    "I live in Hangzhou": ("ann lives in Hangzhou", "Hangzhou"),
    "I play the guitar every evening": ("ann plays the guitar every evening", "guitar"),
    "I have a cat called Mochi": ("ann has a cat called Mochi", "cat"),
}


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[SqliteMemoryStore, WorkflowRunner, ConsolidationScript]]:
    script = ConsolidationScript(user="ann")
    for text, fact in TALK.items():
        script.say(text, 3, [fact])
    with FakeOpenAIServer() as server, SqliteMemoryStore(path=tmp_path / "m.db", embedding_model=LocalEmbedding()) as store:
        script.install(server)
        runner = build_runner(store, server.base_url)
        messages = tuple(Message("user", text, EVENING + timedelta(minutes=i)) for i, text in enumerate(TALK))
        build_worker("read_message", {}, make_env(store=store, timezone="Asia/Shanghai")).run(
            MemoryContext(user_name="ann", messages=messages)
        )
        yield store, runner, script
        runner.close()


def run_while(store: SqliteMemoryStore, runner: WorkflowRunner, script: ConsolidationScript, delete: object) -> RunResult:
    """Consolidate; while its last LLM step waits, call `delete()`; then let the run finish."""
    reached = script.hold("contra_repeat")
    results: list[RunResult] = []
    thread = threading.Thread(target=lambda: results.append(runner.run(MemoryContext(user_name="ann"))))
    thread.start()
    assert reached.wait(timeout=60), "the run never reached contra_repeat"
    delete()  # type: ignore[operator]  # a callable
    script.release()
    thread.join(timeout=60)
    return results[0]


def test_delete_all_during_a_run_is_not_undone(setup: tuple[SqliteMemoryStore, WorkflowRunner, ConsolidationScript]) -> None:
    store, runner, script = setup
    result = run_while(store, runner, script, lambda: store.delete_by_filter(MemoryFilter("ann")))
    assert store.count(MemoryFilter("ann")) == 0
    assert "deleted meanwhile" in result.context.result
    assert result.context.store_outcome.dropped == 6  # 3 messages and the 3 facts drawn from them


def test_deleting_one_message_drops_only_what_came_from_it(
    setup: tuple[SqliteMemoryStore, WorkflowRunner, ConsolidationScript],
) -> None:
    store, runner, script = setup
    [cat] = [node for node in store.scan(MemoryFilter("ann")) if "Mochi" in node.content]
    run_while(store, runner, script, lambda: store.delete([cat.memory_id]))
    observations = sorted(node.content for node in store.scan(MemoryFilter("ann", memory_types=(MemoryType.OBSERVATION,))))
    assert observations == ["ann lives in Hangzhou", "ann plays the guitar every evening"]
    assert store.get([cat.memory_id]) == []
    messages = store.scan(MemoryFilter("ann", memory_types=(MemoryType.CONVERSATION,)))
    assert len(messages) == 2 and all(node.reflected for node in messages)
