"""Memory history and undo, end to end: every change of a consolidation run is recorded with the
run, `memoryscope undo RUN` takes the run back (refusing what a later change built on), and a
pinned memory survives a contradiction."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memoryscope.app import MemoryScope
from memoryscope.cli import main
from memoryscope.context import Message
from memoryscope.memory import MemoryStatus, MemoryType
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer

EVENING = datetime(2024, 10, 26, 13, 0, tzinfo=timezone.utc)
OBSERVATIONS = MemoryFilter("ann", memory_types=(MemoryType.OBSERVATION,))


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MemoryScope, Path, ConsolidationScript]]:
    script = ConsolidationScript(user="ann")
    script.say("I love coffee", 3, [("ann likes coffee", "coffee")])
    script.say("I live in Hangzhou", 3, [("ann lives in Hangzhou", "Hangzhou")])
    script.say("I don't drink coffee any more", 3, [("ann does not drink coffee any more", "coffee")])
    script.verdict("ann does not drink coffee any more", "contradict", "ann likes coffee")
    config = tmp_path / "config.yaml"
    config.write_text(f"extends: default\nmemory_store: {{path: {tmp_path / 'm.db'}}}\n", encoding="utf-8")
    with FakeOpenAIServer() as server:
        script.install(server)
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", server.base_url)
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-history-test")
        with MemoryScope(str(config)) as scope:
            yield scope, config, script


def tell(scope: MemoryScope, *texts: str, start: datetime = EVENING) -> None:
    messages = tuple(Message("user", text, start + timedelta(minutes=i)) for i, text in enumerate(texts))
    scope.default_service.run_operation("read_message", "ann", messages=messages)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    return status, capsys.readouterr().out


def test_a_run_is_recorded_and_undone(
    setup: tuple[MemoryScope, Path, ConsolidationScript], capsys: pytest.CaptureFixture[str]
) -> None:
    scope, config, _ = setup
    assert scope.store is not None
    tell(scope, "I love coffee", "I live in Hangzhou")
    run = scope.default_service.run_operation("consolidate_memory", "ann")
    changes = scope.store.history(run_id=run.run_id)
    assert sorted((c.action, (c.after or {}).get("content")) for c in changes) == [
        ("created", "ann likes coffee"),
        ("created", "ann lives in Hangzhou"),
        ("updated", "I live in Hangzhou"),
        ("updated", "I love coffee"),
    ]
    assert all(c.operation == "consolidate_memory" for c in changes)

    status, out = cli(capsys, "history", "--user", "ann", "--config", str(config))
    assert status == 0 and f"by consolidate_memory run {run.run_id}: ann likes coffee" in out
    status, out = cli(capsys, "history", "--run", run.run_id, "--json", "--config", str(config))
    assert status == 0 and len([json.loads(line) for line in out.splitlines()]) == 4

    status, out = cli(capsys, "undo", run.run_id, "--config", str(config))
    assert status == 0 and "2 restored, 2 deleted" in out
    assert scope.store.count(OBSERVATIONS) == 0
    messages = scope.store.scan(MemoryFilter("ann", memory_types=(MemoryType.CONVERSATION,)))
    assert len(messages) == 2 and not any(node.reflected for node in messages)  # pending again
    status, out = cli(capsys, "undo", run.run_id, "--config", str(config))  # again, as after an undo cut short
    assert status == 0 and "refused" not in out and scope.store.count(OBSERVATIONS) == 0
    again = scope.default_service.run_operation("consolidate_memory", "ann")  # and consolidate as before
    assert "stored 2 observations" in again.context.result


def test_undo_refuses_what_a_later_change_built_on(
    setup: tuple[MemoryScope, Path, ConsolidationScript], capsys: pytest.CaptureFixture[str]
) -> None:
    scope, config, _ = setup
    assert scope.store is not None
    tell(scope, "I love coffee", "I live in Hangzhou")
    run = scope.default_service.run_operation("consolidate_memory", "ann")
    [home] = [node for node in scope.store.scan(OBSERVATIONS) if "Hangzhou" in node.content]
    scope.default_service.run_operation("delete_memory", "ann", memory_ids=(home.memory_id,))
    status, out = cli(capsys, "undo", run.run_id, "--config", str(config))
    assert status == 1
    assert f"refused {home.memory_id}: changed later (deleted by delete_memory" in out
    assert [node.content for node in scope.store.scan(OBSERVATIONS)] == []  # the rest was undone
    assert scope.store.get([home.memory_id]) == []  # and the deletion stands


def test_a_pinned_memory_is_not_expired_by_a_contradiction(
    setup: tuple[MemoryScope, Path, ConsolidationScript], capsys: pytest.CaptureFixture[str]
) -> None:
    scope, config, _ = setup
    assert scope.store is not None
    tell(scope, "I love coffee")
    scope.default_service.run_operation("consolidate_memory", "ann")
    [coffee] = scope.store.scan(OBSERVATIONS)
    assert cli(capsys, "pin", coffee.memory_id, "--config", str(config)) == (0, f"pinned {coffee.memory_id}\n")
    tell(scope, "I don't drink coffee any more", start=EVENING + timedelta(hours=1))
    result = scope.default_service.run_operation("consolidate_memory", "ann")
    [still] = scope.store.get([coffee.memory_id])
    assert still.status is MemoryStatus.VALID and still.meta["pinned"] is True
    assert result.context.store_outcome.pinned_kept == 1
    assert cli(capsys, "unpin", coffee.memory_id, "--config", str(config))[0] == 0
    assert "pinned" not in scope.store.get([coffee.memory_id])[0].meta
