"""One backend operation per user across processes sharing a store: the store's lease.

Two `MemoryScope`s on one SQLite file stand in for two processes (they share no lock, only the
file). While the first consolidates a user, the second's run for that user waits for it, or
fails saying so; it never runs beside it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memoryscope.app import MemoryScope
from memoryscope.context import Message
from memoryscope.leases import LeaseBusy
from memoryscope.memory import MemoryType
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer

TALK = {"I live in Hangzhou": ("ann lives in Hangzhou", "Hangzhou"), "I play the guitar": ("ann plays the guitar", "guitar")}
EVENING = datetime(2024, 10, 26, 13, 0, tzinfo=timezone.utc)


@pytest.fixture
def scopes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MemoryScope, MemoryScope, ConsolidationScript]]:
    script = ConsolidationScript(user="ann")
    for text, fact in TALK.items():
        script.say(text, 3, [fact])
    with FakeOpenAIServer() as server:
        script.install(server)
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", server.base_url)
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-lease-test")
        overrides: dict[str, Any] = {"memory_store.path": str(tmp_path / "shared.db")}
        quick = {**overrides, "memory_service.memoryscope_service.lease_wait_s": 0}
        with MemoryScope("default", overrides=overrides) as first, MemoryScope("default", overrides=quick) as second:
            messages = tuple(Message("user", text, EVENING + timedelta(minutes=i)) for i, text in enumerate(TALK))
            first.default_service.run_operation("read_message", "ann", messages=messages)
            yield first, second, script


def test_a_second_process_does_not_consolidate_a_user_beside_the_first(
    scopes: tuple[MemoryScope, MemoryScope, ConsolidationScript],
) -> None:
    first, second, script = scopes
    reached = script.hold("contra_repeat")
    done: list[Any] = []
    thread = threading.Thread(target=lambda: done.append(first.default_service.run_operation("consolidate_memory", "ann")))
    thread.start()
    try:
        assert reached.wait(timeout=60)
        with pytest.raises(LeaseBusy, match=r"another process is running a backend operation .*'ann'"):
            second.default_service.run_operation("consolidate_memory", "ann")
        assert second.default_service.run_operation("consolidate_memory", "bob").context.result  # another user is free
    finally:
        script.release()
        thread.join(timeout=60)
    assert "stored 2 observations" in done[0].context.result
    rerun = second.default_service.run_operation("consolidate_memory", "ann")  # the lease is free again
    assert "stored" not in rerun.context.result
    assert first.store is not None
    assert first.store.count(MemoryFilter("ann", memory_types=(MemoryType.OBSERVATION,))) == 2


def test_an_on_demand_run_waits_for_the_other_process_then_finds_nothing_left(
    scopes: tuple[MemoryScope, MemoryScope, ConsolidationScript], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _, script = scopes
    with MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "shared.db")}) as waiting:
        reached = script.hold("contra_repeat")
        finished: dict[str, float] = {}

        def run(name: str, scope: MemoryScope) -> None:
            scope.default_service.run_operation("consolidate_memory", "ann")
            finished[name] = time.monotonic()

        holder = threading.Thread(target=run, args=("first", first))
        holder.start()
        assert reached.wait(timeout=60)
        waiter = threading.Thread(target=run, args=("second", waiting))
        waiter.start()
        time.sleep(0.5)
        assert "second" not in finished  # waiting for the lease, not running beside the first
        script.release()
        holder.join(timeout=60)
        waiter.join(timeout=60)
        assert finished["first"] <= finished["second"]
        assert first.store is not None
        assert first.store.count(MemoryFilter("ann", memory_types=(MemoryType.OBSERVATION,))) == 2
