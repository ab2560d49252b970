"""Checking mode: a worker reads and writes only the context fields it declares."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from memoryscope import MemoryScope
from memoryscope.context import MemoryContext
from memoryscope.errors import ConfigError, WorkerError
from memoryscope.worker import Worker
from memoryscope.workflow import WorkflowRunner, check_plan, parse_workflow
from memoryscope.workflow.io_check import CHECK_WORKER_IO, checking_worker_io


class SummaryWorker(Worker):
    """Declares only `memories`, but also writes `result` (as info_filter once did)."""

    reads: ClassVar[tuple[str, ...]] = ("retrieved",)
    writes: ClassVar[tuple[str, ...]] = ("memories",)

    def run(self, ctx: MemoryContext) -> None:
        ctx.memories = ctx.retrieved
        ctx.result = f"{len(ctx.memories)} memories"  # reading back its own write is fine


class PeekWorker(Worker):
    """Reads `query` without declaring it."""

    writes: ClassVar[tuple[str, ...]] = ("result",)

    def run(self, ctx: MemoryContext) -> None:
        ctx.result = ctx.query.upper()


class HonestWorker(Worker):
    """Uses what it declares, what every worker may read, `stop`, and its own `details` entry."""

    reads: ClassVar[tuple[str, ...]] = ("query",)
    optional_reads: ClassVar[tuple[str, ...]] = ("time_range",)
    writes: ClassVar[tuple[str, ...]] = ("result", "details")

    def run(self, ctx: MemoryContext) -> None:
        whose = (ctx.user_name, ctx.target_name, ctx.workspace, ctx.operation, ctx.run_id, ctx.on_demand)
        ctx.result = f"{ctx.query} {ctx.time_range} {whose}"
        ctx.details[self.name] = {"length": len(ctx.result)}
        ctx.stop("done")


class CounterWorker(Worker):
    """Adds a `details` entry without declaring `details`."""

    writes: ClassVar[tuple[str, ...]] = ("result",)

    def run(self, ctx: MemoryContext) -> None:
        ctx.result = "counted"
        ctx.details[self.name] = {"count": 1}


class IdleWorker(Worker):
    def run(self, ctx: MemoryContext) -> None:
        pass


def runner(workflow: str, *workers: Worker, check_io: bool | None = True) -> WorkflowRunner:
    return WorkflowRunner("op", parse_workflow(workflow), {item.name: item for item in workers}, check_io=check_io)


def built(cls: type[Worker], name: str) -> Worker:
    return cls(name, cls.Params())


def test_checking_mode_is_off_unless_the_environment_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, on in (("", False), ("0", False), ("false", False), ("1", True), ("true", True), (" Yes ", True)):
        monkeypatch.setenv(CHECK_WORKER_IO, value)
        assert checking_worker_io() is on
        assert runner("idle", built(IdleWorker, "idle"), check_io=None).checks_io is on
    monkeypatch.delenv(CHECK_WORKER_IO)
    assert not checking_worker_io()


def test_an_undeclared_write_fails_naming_the_worker_the_field_and_the_fix() -> None:
    ctx = MemoryContext(user_name="ann")
    with pytest.raises(WorkerError) as caught:
        runner("summary", built(SummaryWorker, "summary")).run(ctx)
    assert (caught.value.workflow, caught.value.worker) == ("op", "summary")
    message = str(caught.value)
    assert "SummaryWorker writes 'result' (workflow/test_worker_io.py:" in message
    assert "add 'result' to SummaryWorker.writes" in message
    assert ctx.result == "0 memories"  # what it wrote still reached the context, as without the check


def test_without_checking_mode_an_undeclared_write_passes_silently() -> None:
    result = runner("summary", built(SummaryWorker, "summary"), check_io=False).run(MemoryContext(user_name="ann"))
    assert result.context.result == "0 memories"


def test_an_undeclared_read_fails_naming_the_field_and_both_declarations() -> None:
    with pytest.raises(WorkerError) as caught:
        runner("peek", built(PeekWorker, "peek")).run(MemoryContext(user_name="ann", query="tea?"))
    message = str(caught.value)
    assert "worker 'peek'" in message
    assert "PeekWorker reads 'query'" in message
    assert "add 'query' to PeekWorker.reads (or to PeekWorker.optional_reads" in message


def test_a_declared_worker_passes_and_its_effects_reach_the_context() -> None:
    ctx = MemoryContext(user_name="ann", query="tea?")
    result = runner("honest", built(HonestWorker, "honest")).run(ctx)
    assert result.stopped == "done"
    assert ctx.result.startswith("tea? None ('ann', '', '', 'op', ")
    assert ctx.details == {"honest": {"length": len(ctx.result)}}
    assert type(ctx) is MemoryContext  # the caller's own context, not the recording copy


def test_adding_a_details_entry_is_a_write_of_details() -> None:
    with pytest.raises(WorkerError, match=r"CounterWorker writes 'details' \(its entries\) without declaring it"):
        runner("count", built(CounterWorker, "count")).run(MemoryContext(user_name="ann"))


def test_an_undeclared_write_in_a_parallel_branch_fails() -> None:
    """Without the check the branch's `result` would be dropped at the merge, unnoticed."""
    workers = (built(IdleWorker, "idle"), built(SummaryWorker, "summary"), built(HonestWorker, "honest"))
    with pytest.raises(WorkerError) as caught:
        runner("[idle|summary],honest", *workers).run(MemoryContext(user_name="ann"))
    assert caught.value.worker == "summary"
    assert "add 'result' to SummaryWorker.writes" in str(caught.value)

    unchecked = runner("[idle|summary]", *workers, check_io=False).run(MemoryContext(user_name="ann"))
    assert unchecked.context.result == ""  # the write the check exists to catch: lost


def test_every_undeclared_field_of_a_step_is_listed_at_once() -> None:
    class Sloppy(Worker):
        def run(self, ctx: MemoryContext) -> None:
            ctx.result = ctx.query + ctx.workspace
            ctx.memories = ctx.retrieved

    with pytest.raises(WorkerError) as caught:
        runner("sloppy", built(Sloppy, "sloppy")).run(MemoryContext(user_name="ann"))
    message = str(caught.value)
    for fragment in ("reads 'query'", "reads 'retrieved'", "writes 'result'", "writes 'memories'"):
        assert fragment in message
    assert "'workspace'" not in message  # always readable


def test_a_workers_own_failure_wins_over_what_it_touched() -> None:
    class Broken(Worker):
        def run(self, ctx: MemoryContext) -> None:
            ctx.result = "half"
            raise ValueError("bad vector")

    with pytest.raises(WorkerError) as caught:
        runner("broken", built(Broken, "broken")).run(MemoryContext(user_name="ann"))
    assert isinstance(caught.value.cause, ValueError)


class TypoOptionalWorker(Worker):
    """`optional_reads` names a field the context does not have."""

    optional_reads: ClassVar[tuple[str, ...]] = ("time_rang",)
    writes: ClassVar[tuple[str, ...]] = ("result",)

    def run(self, ctx: MemoryContext) -> None:
        ctx.result = "ran"


def test_optional_reads_must_be_context_fields() -> None:
    [(where, message)] = check_plan(parse_workflow("typo"), {"typo": TypoOptionalWorker}, (), "op.workflow")
    assert where == "op.workflow"
    assert message == (
        "worker 'typo' (TypoOptionalWorker) optional_reads 'time_rang', which is not a MemoryContext field. "
        "Did you mean 'time_range'?"
    )


def test_an_unknown_optional_read_is_a_config_error_at_the_workflows_yaml_path() -> None:
    config: dict[str, Any] = {
        "global": {"timezone": "UTC"},
        "worker": {"typo": {"class": f"{__name__}.TypoOptionalWorker"}},
        "memory_service": {"memoryscope_service": {"memory_operations": {"peek": {"workflow": "typo"}}}},
    }
    with pytest.raises(ConfigError) as caught:
        MemoryScope(config=config)
    assert (
        "memory_service.memoryscope_service.memory_operations.peek.workflow",
        "worker 'typo' (TypoOptionalWorker) optional_reads 'time_rang', which is not a MemoryContext field. "
        "Did you mean 'time_range'?",
    ) in caught.value.problems


def test_the_fields_the_runner_sets_may_be_declared_as_reads() -> None:
    class OnDemand(Worker):
        reads: ClassVar[tuple[str, ...]] = ("on_demand", "run_id")

        def run(self, ctx: MemoryContext) -> None:
            pass

    assert check_plan(parse_workflow("on_demand"), {"on_demand": OnDemand}, (), "op.workflow") == []
