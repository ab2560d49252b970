"""A process killed during a consolidation does not block its user's next run for `lease_ttl_s`.

The lease's holder id names this host, the process and its start time; a holder whose process is
gone (or whose id now belongs to a newer process) is taken over at once. A real subprocess runs a
real consolidation against the fake LLM server, is held inside it, and is killed with SIGKILL; the
next on-demand run (which waits for nobody: `lease_wait_s: 0`) then runs at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memoryscope.app import MemoryScope
from memoryscope.context import Message
from memoryscope.leases import LeaseBusy, holder_gone, holder_id, lease_name, process_start
from memoryscope.memory import MemoryType
from memoryscope.server.errors import error_body
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer

pytestmark = [
    pytest.mark.skipif(not hasattr(signal, "SIGKILL") or not Path("/proc/self/stat").exists(), reason="Linux"),
    pytest.mark.slow,  # processes started and killed; `-m "not slow"` leaves it out
]

TALK = {"I live in Hangzhou": ("ann lives in Hangzhou", "Hangzhou"), "I play the guitar": ("ann plays the guitar", "guitar")}
EVENING = datetime(2024, 10, 26, 13, 0, tzinfo=timezone.utc)

# A second process: the same config and store, consolidating ann (the fake server holds it inside).
_CONSOLIDATING = textwrap.dedent(
    """
    import sys
    from memoryscope.app import MemoryScope
    with MemoryScope("default", overrides={"memory_store.path": sys.argv[1]}) as scope:
        print("consolidating", flush=True)
        scope.default_service.run_operation("consolidate_memory", "ann")
        print("finished", flush=True)
    """
)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MemoryScope, ConsolidationScript, Path]]:
    script = ConsolidationScript(user="ann")
    for text, fact in TALK.items():
        script.say(text, 3, [fact])
    with FakeOpenAIServer() as server:
        script.install(server)
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", server.base_url)
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-lease-test")
        path = tmp_path / "shared.db"
        overrides: dict[str, Any] = {
            "memory_store.path": str(path),
            "memory_service.memoryscope_service.lease_wait_s": 0,  # waits for nobody: a held lease fails at once
        }
        with MemoryScope("default", overrides=overrides) as scope:
            messages = tuple(Message("user", text, EVENING + timedelta(minutes=i)) for i, text in enumerate(TALK))
            scope.default_service.run_operation("read_message", "ann", messages=messages)
            yield scope, script, path


def start_consolidating(path: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_WAIT_POLICY": "PASSIVE"}
    return subprocess.Popen(
        [sys.executable, "-c", _CONSOLIDATING, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def observations(scope: MemoryScope) -> int:
    assert scope.store is not None
    return scope.store.count(MemoryFilter("ann", memory_types=(MemoryType.OBSERVATION,)))


def test_a_run_killed_holding_the_lease_does_not_block_the_next_one(
    world: tuple[MemoryScope, ConsolidationScript, Path],
) -> None:
    scope, script, path = world
    reached = script.hold("contra_repeat")
    process = start_consolidating(path)
    try:
        assert reached.wait(timeout=60), "the second process never reached the model"
        busy = rf"another process is running a backend operation \(user 'ann'\): process {process.pid} on host \S+ holds"
        with pytest.raises(LeaseBusy, match=busy + r" it until \d\d:\d\d:\d\d UTC, renewed while it runs"):
            scope.default_service.run_operation("consolidate_memory", "ann")  # alive: its lease stands
        process.send_signal(signal.SIGKILL)
    finally:
        if process.poll() is None:
            process.kill()
        _, said = process.communicate(timeout=30)  # reaps it and closes its pipes
        script.release()
    assert process.returncode == -signal.SIGKILL, said
    assert scope.store is not None
    started = time.monotonic()
    result = scope.default_service.run_operation("consolidate_memory", "ann")  # at once: not 300 s later
    assert time.monotonic() - started < 30
    assert "stored 2 observations" in result.context.result
    assert observations(scope) == 2


def test_a_holder_is_gone_only_when_its_process_on_this_host_is(tmp_path: Path) -> None:
    me = holder_id()
    host, pid, start, _ = me.split(":")
    assert pid == str(os.getpid()) and start == process_start(os.getpid())
    assert not holder_gone(me)
    assert holder_gone(f"{host}:{pid}:{int(start) + 1}:abcd1234")  # our id, but another process's start: reused
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    assert holder_gone(f"{host}:{child.pid}:{start}:abcd1234")  # no such process any more
    parent = os.getppid()
    assert not holder_gone(f"{host}:{parent}:{process_start(parent)}:abcd1234")  # alive
    assert not holder_gone(f"another-host:{child.pid}:{start}:abcd1234")  # cannot be judged from here
    assert not holder_gone(f"{host.split('@')[0]}:{child.pid}:abcd1234")  # an older id's shape: waited out


def test_the_store_takes_over_only_a_lease_whose_holder_is_gone(world: tuple[MemoryScope, ConsolidationScript, Path]) -> None:
    scope, _, _ = world
    store = scope.store
    assert store is not None
    name = lease_name("bob")
    assert store.acquire_lease(name, "process-a", ttl_s=300)
    assert not store.acquire_lease(name, "process-b", ttl_s=300, stale=lambda holder: False)
    assert store.acquire_lease(name, "process-b", ttl_s=300, stale=lambda holder: holder == "process-a")
    assert not store.acquire_lease(name, "process-a", ttl_s=300)  # b holds it now


def test_a_busy_answer_over_http_is_a_conflict() -> None:
    assert error_body(409, "busy", "another process is running")["error"]["type"] == "conflict"
