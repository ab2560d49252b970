"""The service's background scheduler, on a real app built from a dict config with test workers.

The backend operations here use small workers defined below (registered under `sched_test_*`
names): they report to a `Probe` each test makes, can block on an Event or fail, and consume
what a real consolidation would (pending messages become reflected, observations are written in
one atomic upsert). Tests wait on Events and `wait_idle`, never on sleeps.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from memoryscope.app import MemoryScope
from memoryscope.context import MemoryContext, Message
from memoryscope.env import Env
from memoryscope.errors import MemoryScopeError
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.models.base import EmbeddingModel, ModelParams
from memoryscope.scheduler import ABANDONED, Scope
from memoryscope.stores.base import MemoryFilter, MemoryStore
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.worker import Worker, WorkerParams, register_worker

T0 = datetime(2024, 10, 26, 9, 0, tzinfo=timezone.utc)
WAIT = 10.0  # seconds an Event may take before the test fails (never reached when all is well)


@dataclass
class Probe:
    """What the test workers report, and the switches tests flip."""

    release: threading.Event = field(default_factory=threading.Event)
    fail_users: set[str] = field(default_factory=set)
    runs: list[tuple[str, str]] = field(default_factory=list)  # (user, step) per run start
    writes: list[str] = field(default_factory=list)  # users whose atomic write landed
    active: dict[str, int] = field(default_factory=dict)
    most_active: dict[str, int] = field(default_factory=dict)  # per user: most runs at one time
    changed: threading.Condition = field(default_factory=threading.Condition)

    def enter(self, user: str, step: str) -> None:
        with self.changed:
            self.runs.append((user, step))
            self.active[user] = self.active.get(user, 0) + 1
            self.most_active[user] = max(self.most_active.get(user, 0), self.active[user])
            self.changed.notify_all()

    def leave(self, user: str) -> None:
        with self.changed:
            self.active[user] -= 1
            self.changed.notify_all()

    def wait_runs(self, count: int) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: len(self.runs) >= count, WAIT)


PROBES: dict[str, Probe] = {}


class HashEmbedding(EmbeddingModel):
    """Word-hash vectors: distinct texts get distinct vectors, in microseconds (retrieval is not tested here)."""

    backend = "test_hash"

    class Params(ModelParams):
        model_name: str = "hash-64"

    def __init__(self, params: Params | None = None) -> None:
        super().__init__((params or self.Params()).model_name)

    @property
    def dimension(self) -> int:
        return 64

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_passages(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.split() or [""]:
                out[row, hashlib.md5(word.encode()).digest()[0] % 64] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


class _ProbeParams(WorkerParams):
    probe: str
    block: bool = False


class _ProbeWorker(Worker):
    params: _ProbeParams

    class Params(_ProbeParams):
        pass

    def bind(self, env: Env) -> None:
        self.probe = PROBES[self.params.probe]
        self.store: MemoryStore = env.require_store(f"worker.{self.name}")


@register_worker("sched_test_wait")
class WaitWorker(_ProbeWorker):
    """Reports its start, then (with `block`) waits for `probe.release`; may fail for some users."""

    writes: ClassVar[tuple[str, ...]] = ("details",)

    def run(self, ctx: MemoryContext) -> None:
        self.probe.enter(ctx.user_name, self.name)
        try:
            if self.params.block and not self.probe.release.wait(WAIT):
                raise RuntimeError("the test never released the worker")
            if ctx.user_name in self.probe.fail_users:
                raise RuntimeError(f"boom for {ctx.user_name}")
            ctx.details["seen"] = True
        finally:
            self.probe.leave(ctx.user_name)


@register_worker("sched_test_write")
class WriteWorker(_ProbeWorker):
    """The atomic write at the end of a consolidation: pending messages → observations, messages marked."""

    reads: ClassVar[tuple[str, ...]] = ("details",)
    writes: ClassVar[tuple[str, ...]] = ("result",)

    def run(self, ctx: MemoryContext) -> None:
        where = {"user_name": ctx.user_name, "target_name": ctx.target_name, "workspace": ctx.workspace}
        messages = self.store.scan(MemoryFilter(**where, memory_types=(MemoryType.CONVERSATION,), reflected=False), limit=1000)
        observations = [
            MemoryNode(**where, content=f"observed: {node.content}", memory_type=MemoryType.OBSERVATION) for node in messages
        ]
        self.store.upsert([node.replace(reflected=True) for node in messages] + observations)
        with self.probe.changed:
            self.probe.writes.append(ctx.user_name)
        ctx.result = f"consolidated {len(messages)} messages"


@register_worker("sched_test_reflect")
class ReflectWorker(_ProbeWorker):
    """Marks the user's observations reflected (what reflection consumes)."""

    writes: ClassVar[tuple[str, ...]] = ("result",)

    def run(self, ctx: MemoryContext) -> None:
        self.probe.enter(ctx.user_name, self.name)
        scope = MemoryFilter(user_name=ctx.user_name, memory_types=(MemoryType.OBSERVATION,), reflected=False)
        observations = self.store.scan(scope, limit=1000)
        self.store.upsert([node.replace(reflected=True) for node in observations])
        ctx.result = f"reflected on {len(observations)} observations"
        self.probe.leave(ctx.user_name)


def make_config(tmp_path: Path, probe: str, operations: dict[str, Any], **service: Any) -> dict[str, Any]:
    return {
        "global": {"timezone": "UTC"},
        "model": {"embedding_model": {"class": f"{__name__}.HashEmbedding"}},
        "memory_store": {"class": "sqlite_memory_store", "path": str(tmp_path / "m.db"), "embedding_model": "embedding_model"},
        "worker": {
            "wait": {"class": "sched_test_wait", "probe": probe, "block": service.pop("block", False)},
            "write": {"class": "sched_test_write", "probe": probe},
            "reflect": {"class": "sched_test_reflect", "probe": probe},
        },
        "memory_service": {
            "memoryscope_service": {
                **service,
                "memory_operations": {"read_message": {"workflow": "read_message"}, **operations},
            }
        },
    }


CONSOLIDATE = {"consolidate_memory": {"workflow": "wait,write", "trigger_messages": 5, "description": "test consolidation"}}


@pytest.fixture
def probe() -> Iterator[tuple[str, Probe]]:
    name = uuid.uuid4().hex
    PROBES[name] = Probe()
    yield name, PROBES[name]
    PROBES[name].release.set()  # never leave a worker blocked
    del PROBES[name]


def say(scope: MemoryScope, user: str, count: int, start: int = 0, *, one_call: bool = True, target: str = "") -> None:
    """`count` new messages of `user` (to `target`): in one `read_message` call (one notification), or one call each."""
    messages = [Message("user", f"{user} says {i}", T0 + timedelta(minutes=i), name=user) for i in range(start, start + count)]
    batches = [messages] if one_call else [[message] for message in messages]
    for batch in batches:
        scope.default_service.run_operation("read_message", user, messages=tuple(batch), target_name=target)


def pending(scope: MemoryScope, user: str, target: str | None = None) -> int:
    assert scope.store is not None
    conversations = (MemoryType.CONVERSATION,)
    return scope.store.count(MemoryFilter(user_name=user, target_name=target, memory_types=conversations, reflected=False))


def test_fires_once_at_the_message_threshold_for_that_user_only(tmp_path: Path, probe: tuple[str, Probe]) -> None:
    name, recorder = probe
    with MemoryScope(config=make_config(tmp_path, name, CONSOLIDATE)) as scope:
        scheduler = scope.default_service.scheduler
        say(scope, "ann", 4)
        say(scope, "bob", 3)
        assert scheduler.wait_idle(WAIT)
        assert recorder.runs == []
        say(scope, "ann", 1, start=4)
        assert scheduler.wait_idle(WAIT)
        assert recorder.runs == [("ann", "wait")]
        assert recorder.writes == ["ann"]
        assert pending(scope, "ann") == 0
        assert pending(scope, "bob") == 3
        record = scheduler.status().last_runs[("ann", "consolidate_memory")]
        assert record.ok
        assert record.trigger == "5 pending messages (trigger_messages: 5)"
        assert record.result == "consolidated 5 messages"
        say(scope, "ann", 5, start=5)  # five more: the next batch
        assert scheduler.wait_idle(WAIT)
        assert recorder.runs == [("ann", "wait"), ("ann", "wait")]


def test_each_target_of_a_user_has_its_own_triggers_and_runs(tmp_path: Path, probe: tuple[str, Probe]) -> None:
    name, recorder = probe
    with MemoryScope(config=make_config(tmp_path, name, CONSOLIDATE)) as scope:
        scheduler = scope.default_service.scheduler
        say(scope, "ann", 4)  # to the default target: one short of the trigger
        say(scope, "ann", 5, target="bob")
        assert scheduler.wait_idle(WAIT)
        assert recorder.writes == ["ann"]  # one run, for ann and bob only
        assert (pending(scope, "ann", target=""), pending(scope, "ann", target="bob")) == (4, 0)
        status = scheduler.status()
        record = status.last_runs[("ann [target bob]", "consolidate_memory")]
        assert (record.user_name, record.target_name, record.result) == ("ann", "bob", "consolidated 5 messages")
        assert ("ann", "consolidate_memory") not in status.last_runs
        assert scheduler.users() == ["ann"]
        assert sorted(scheduler.scopes()) == [Scope("ann"), Scope("ann", "bob")]
        assert Scope("ann", "bob", "work").label == "ann [target bob, workspace work]"
        say(scope, "ann", 1, start=4)  # the default target reaches its own threshold
        assert scheduler.wait_idle(WAIT)
        assert pending(scope, "ann", target="") == 0
        assert scheduler.status().last_runs[("ann", "consolidate_memory")].result == "consolidated 5 messages"


def test_a_run_that_consumes_nothing_is_not_repeated_without_news(tmp_path: Path, probe: tuple[str, Probe]) -> None:
    name, recorder = probe
    operations = {"consolidate_memory": {"workflow": "wait", "trigger_messages": 2}}  # never marks the messages
    with MemoryScope(config=make_config(tmp_path, name, operations, scheduler_check_interval_s=0.05)) as scope:
        scheduler = scope.default_service.scheduler
        say(scope, "ann", 2)
        assert scheduler.wait_idle(WAIT)
        for _ in range(3):  # checks without news, by hand and by the timer's sweeps
            scheduler.check("ann")
            assert scheduler.wait_idle(WAIT)
        assert recorder.runs == [("ann", "wait")]
        say(scope, "ann", 1, start=2)  # news: checked again
        assert scheduler.wait_idle(WAIT)
        assert recorder.runs == [("ann", "wait"), ("ann", "wait")]


def test_one_operation_per_user_and_users_run_side_by_side(tmp_path: Path, probe: tuple[str, Probe]) -> None:
    name, recorder = probe
    with MemoryScope(config=make_config(tmp_path, name, CONSOLIDATE, block=True)) as scope:
        service = scope.default_service
        say(scope, "ann", 5)
        say(scope, "bob", 5)
        assert recorder.wait_runs(2)  # both started: neither waits for the other
        running = service.scheduler.status().running
        assert {(item.user_name, item.operation) for item in running} == {
            ("ann", "consolidate_memory"),
            ("bob", "consolidate_memory"),
        }
        say(scope, "ann", 10, start=5, one_call=False)  # more triggers for ann while her run goes on
        on_demand = threading.Thread(target=service.run_operation, args=("consolidate_memory", "ann"))
        on_demand.start()  # waits for ann's running operation
        recorder.release.set()
        on_demand.join(WAIT)
        assert service.scheduler.wait_idle(WAIT)
        assert recorder.most_active == {"ann": 1, "bob": 1}
        assert pending(scope, "ann") == 0
        # ann: the scheduled run (its write took all 15 messages), then the on-demand one; the
        # coalesced checks found nothing left to do
        assert [run for run in recorder.runs if run[0] == "ann"] == [("ann", "wait"), ("ann", "wait")]
        assert [run for run in recorder.runs if run[0] == "bob"] == [("bob", "wait")]


def test_triggers_for_a_busy_user_coalesce_into_one_check(tmp_path: Path, probe: tuple[str, Probe]) -> None:
    name, recorder = probe
    with MemoryScope(config=make_config(tmp_path, name, CONSOLIDATE, block=True)) as scope:
        scheduler = scope.default_service.scheduler
        say(scope, "ann", 5)
        assert recorder.wait_runs(1)
        say(scope, "ann", 5, start=5, one_call=False)  # five notifications while ann's run blocks
        assert scheduler.status().waiting == ()  # ann is not queued a second time
        recorder.release.set()
        assert scheduler.wait_idle(WAIT)
        # the write read the pending messages when it ran, so it took all ten; the one re-check
        # after it found nothing due
        assert recorder.runs == [("ann", "wait")]
        assert pending(scope, "ann") == 0


def test_close_abandons_a_blocked_operation_and_its_write_never_lands(tmp_path: Path, probe: tuple[str, Probe]) -> None:
    name, recorder = probe
    scope = MemoryScope(config=make_config(tmp_path, name, CONSOLIDATE, block=True, shutdown_timeout_s=60))
    scheduler = scope.default_service.scheduler
    say(scope, "ann", 5)
    assert recorder.wait_runs(1)
    closed = threading.Event()

    def close() -> None:
        scope.close(timeout=0.2)
        closed.set()

    closer = threading.Thread(target=close)
    closer.start()
    assert closed.wait(WAIT)  # returned after its short timeout, though the worker still blocks
    assert scheduler.status().closed
    recorder.release.set()  # the worker returns; the runner stops before the write step
    assert scheduler.wait_idle(WAIT)
    closer.join(WAIT)
    record = scheduler.status().last_runs[("ann", "consolidate_memory")]
    assert record.abandoned
    assert ABANDONED in record.result
    assert recorder.writes == []
    with SqliteMemoryStore(path=tmp_path / "m.db", embedding_model=scope.models["embedding_model"]) as store:
        conversation = MemoryFilter(user_name="ann", memory_types=(MemoryType.CONVERSATION,), reflected=False)
        assert store.count(conversation) == 5  # all still pending for the next start
        assert store.count(MemoryFilter(user_name="ann", memory_types=(MemoryType.OBSERVATION,))) == 0
    with pytest.raises(MemoryScopeError, match="closed"):
        scope.default_service.run_operation("consolidate_memory", "ann")


def test_close_waits_for_a_running_operation_to_finish(tmp_path: Path, probe: tuple[str, Probe]) -> None:
    name, recorder = probe
    scope = MemoryScope(config=make_config(tmp_path, name, CONSOLIDATE, block=True))
    say(scope, "ann", 5)
    assert recorder.wait_runs(1)
    closer = threading.Thread(target=scope.close, kwargs={"timeout": WAIT})
    closer.start()
    recorder.release.set()
    closer.join(WAIT)
    assert not closer.is_alive()
    assert recorder.writes == ["ann"]
    assert scope.default_service.scheduler.status().last_runs[("ann", "consolidate_memory")].ok


def test_errors_are_logged_recorded_and_do_not_stop_the_scheduler(
    tmp_path: Path, probe: tuple[str, Probe], caplog: pytest.LogCaptureFixture
) -> None:
    name, recorder = probe
    recorder.fail_users.add("ann")
    with MemoryScope(config=make_config(tmp_path, name, CONSOLIDATE)) as scope:
        scheduler = scope.default_service.scheduler
        with caplog.at_level(logging.ERROR, logger="memoryscope.scheduler"):
            say(scope, "ann", 5)
            assert scheduler.wait_idle(WAIT)
        status = scheduler.status()
        assert "RuntimeError: boom for ann" in status.last_error("ann", "consolidate_memory")
        assert status.errors == 1
        assert any("consolidate_memory for user 'ann'" in r.getMessage() and "boom" in r.getMessage() for r in caplog.records)
        assert pending(scope, "ann") == 5  # nothing half-written: the write step never ran
        say(scope, "bob", 5)  # the scheduler still serves
        assert scheduler.wait_idle(WAIT)
        assert recorder.writes == ["bob"]
        recorder.fail_users.clear()
        say(scope, "ann", 1, start=5)  # news for ann: retried, and now it works
        assert scheduler.wait_idle(WAIT)
        assert recorder.writes == ["bob", "ann"]
        assert scheduler.status().last_runs[("ann", "consolidate_memory")].ok
        assert scheduler.status().last_error("ann", "consolidate_memory")  # the old error is still on record


def test_interval_trigger_runs_again_and_again(tmp_path: Path, probe: tuple[str, Probe]) -> None:
    name, recorder = probe
    operations = {"tick": {"class": "backend_operation", "workflow": "wait", "interval_time": 0.05}}
    with MemoryScope(config=make_config(tmp_path, name, operations)) as scope:
        say(scope, "ann", 1)  # the scheduler learns of ann
        assert recorder.wait_runs(3)
        assert {user for user, _ in recorder.runs} == {"ann"}
        assert scope.default_service.scheduler.status().last_runs[("ann", "tick")].trigger == "interval_time: 0.05s"


def test_consolidation_output_fires_the_observation_trigger(tmp_path: Path, probe: tuple[str, Probe]) -> None:
    name, recorder = probe
    operations = {**CONSOLIDATE, "reflect_and_reconsolidate": {"workflow": "reflect", "trigger_observations": 6}}
    with MemoryScope(config=make_config(tmp_path, name, operations)) as scope:
        scheduler = scope.default_service.scheduler
        say(scope, "ann", 5)
        assert scheduler.wait_idle(WAIT)
        assert recorder.runs == [("ann", "wait")]  # 5 observations: not yet 6
        say(scope, "ann", 5, start=5)
        assert scheduler.wait_idle(WAIT)
        assert recorder.runs == [("ann", "wait"), ("ann", "wait"), ("ann", "reflect")]
        record = scheduler.status().last_runs[("ann", "reflect_and_reconsolidate")]
        assert record.trigger == "10 unreflected observations (trigger_observations: 6)"
        assert record.result == "reflected on 10 observations"


def test_disabled_scheduler_runs_only_on_demand_and_still_records(tmp_path: Path, probe: tuple[str, Probe]) -> None:
    name, recorder = probe
    with MemoryScope(config=make_config(tmp_path, name, CONSOLIDATE, enable_scheduler=False)) as scope:
        service = scope.default_service
        say(scope, "ann", 6)
        assert service.scheduler.wait_idle(WAIT)
        assert recorder.runs == []
        assert not service.scheduler.status().started
        result = service.run_operation("consolidate_memory", "ann")
        assert result.context.result == "consolidated 6 messages"
        record = service.scheduler.status().last_runs[("ann", "consolidate_memory")]
        assert record.trigger == "on demand"
        assert record.ok
