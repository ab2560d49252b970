"""The runner: order, real concurrency, deterministic merges, stop, errors, isolation."""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from memoryscope.context import MemoryContext
from memoryscope.errors import StoreError, UnknownNameError, WorkerError
from memoryscope.worker import Worker
from memoryscope.workflow import RunResult, WorkflowRunner, parse_workflow

Action = Callable[[str, MemoryContext], None]


class ActionWorker(Worker):
    """A test step: runs `action(name, ctx)`; subclasses made by `worker` declare the fields."""

    def __init__(self, name: str, action: Action) -> None:
        super().__init__(name, Worker.Params())
        self.action = action

    def run(self, ctx: MemoryContext) -> None:
        self.action(self.name, ctx)


def worker(name: str, action: Action, writes: tuple[str, ...] = (), reads: tuple[str, ...] = ()) -> ActionWorker:
    declared = type(f"{name.title()}Worker", (ActionWorker,), {"reads": reads, "writes": writes})
    return declared(name, action)


def noop(name: str, ctx: MemoryContext) -> None:
    pass


def runner(workflow: str, workers: list[ActionWorker], **options: object) -> WorkflowRunner:
    by_name = {item.name: item for item in workers}
    return WorkflowRunner("retrieve_memory", parse_workflow(workflow), by_name, **options)  # type: ignore[arg-type]


def context(**fields: object) -> MemoryContext:
    return MemoryContext(user_name="ann", **fields)  # type: ignore[arg-type]


class Log:
    """Which steps ran, from any thread, and on which thread."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    def __call__(self, name: str, ctx: MemoryContext) -> None:
        with self._lock:
            self.names.append(name)
            self.threads.add(threading.get_ident())


def test_sequential_steps_run_in_order_on_the_callers_thread() -> None:
    log = Log()
    result = runner("a,b,c,d", [worker(name, log) for name in "abcd"]).run(context())
    assert log.names == ["a", "b", "c", "d"]
    assert log.threads == {threading.get_ident()}
    assert isinstance(result, RunResult)
    assert [name for name, _ in result.timings] == ["a", "b", "c", "d"]
    assert all(seconds >= 0.0 for _, seconds in result.timings)
    assert result.total_seconds >= 0.0
    assert result.stopped == ""
    assert result.skipped == ()


def test_the_result_is_frozen_and_holds_the_context_run_on() -> None:
    ctx = context()
    result = runner("a", [worker("a", noop)]).run(ctx)
    assert result.context is ctx
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.stopped = "no"  # type: ignore[misc]  # checking that the frozen dataclass refuses


@pytest.mark.timeout(10)
def test_parallel_branches_really_run_at_the_same_time() -> None:
    """Both branches wait for each other; run one after the other they would time out."""
    barrier = threading.Barrier(2, timeout=5)
    log = Log()

    def meet(name: str, ctx: MemoryContext) -> None:
        barrier.wait()
        log(name, ctx)

    workers = [worker("a", log), worker("b", meet), worker("c", meet), worker("d", log), worker("e", log)]
    result = runner("a,[b|c,d],e", workers).run(context())
    assert log.names[0] == "a" and log.names[-1] == "e"
    assert sorted(log.names[1:4]) == ["b", "c", "d"]
    assert len(log.threads) == 2
    assert [name for name, _ in result.timings] == ["a", "b", "c", "d", "e"]  # plan order


def test_after_a_first_run_short_branches_stay_on_the_callers_thread_and_slow_ones_overlap() -> None:
    """A branch that last took under `inline_below_s` is not worth a thread hand-over; a slower one is.

    The thresholds are far from what the branches take (a second against microseconds; a
    millisecond against a 5 ms sleep), so a busy machine cannot change which side they fall on.
    """
    log = Log()

    def slow(name: str, ctx: MemoryContext) -> None:
        time.sleep(0.005)
        log(name, ctx)

    flow = runner("[a|b],c", [worker("a", log), worker("b", log), worker("c", log)], inline_below_s=1.0)
    try:
        flow.run(context())  # no timings yet: a pool thread takes b
        assert len(log.threads) == 2
        log.threads.clear()
        result = flow.run(context())
        assert log.threads == {threading.get_ident()}
        assert [name for name, _ in result.timings] == ["a", "b", "c"]
    finally:
        flow.close()
    log = Log()
    flow = runner("[a|b]", [worker("a", slow), worker("b", slow)], inline_below_s=0.001)
    try:
        flow.run(context())
        log.threads.clear()
        flow.run(context())
        assert len(log.threads) == 2  # two slow branches still overlap
    finally:
        flow.close()


def test_a_single_branch_runs_on_the_callers_thread() -> None:
    log = Log()
    runner("[a,b]", [worker("a", log), worker("b", log)]).run(context())
    assert log.names == ["a", "b"]
    assert log.threads == {threading.get_ident()}


def jittered(action: Action) -> Action:
    """Sleep a random moment first, so branches finish in varying order."""

    def run(name: str, ctx: MemoryContext) -> None:
        time.sleep(random.uniform(0, 0.004))
        action(name, ctx)

    return run


def test_branches_merge_declared_fields_in_declared_order() -> None:
    def rank(name: str, ctx: MemoryContext) -> None:
        ctx.result = "ranked"
        ctx.details["winner"] = name
        ctx.details[name] = True

    def summarize(name: str, ctx: MemoryContext) -> None:
        ctx.workspace = "undeclared"  # not in `writes`: must not reach the main context
        ctx.details["winner"] = name
        ctx.details[name] = True

    def check_merge(name: str, ctx: MemoryContext) -> None:
        ctx.memory_ids = (ctx.result, ctx.query)

    workers = [
        worker("rank", jittered(rank), writes=("result", "details")),
        worker("summarize", jittered(summarize), writes=("query", "details")),
        worker("after", check_merge, writes=("memory_ids",), reads=("result", "query")),
    ]
    # the checking mode would fail `summarize` (test_worker_io); here: what the merge does without it
    flow = runner("[rank|summarize],after", workers, check_io=False)
    for _ in range(30):
        ctx = context(query="tea?", details={"kept": 1})
        flow.run(ctx)
        assert ctx.memory_ids == ("ranked", "tea?")
        assert ctx.details == {"kept": 1, "winner": "summarize", "rank": True, "summarize": True}
        assert ctx.workspace == ""


def test_a_branch_leaving_a_details_entry_alone_does_not_undo_another_branch() -> None:
    def count(name: str, ctx: MemoryContext) -> None:
        ctx.details["count"] = 5

    ctx = context(details={"count": 0})
    runner("[count|idle]", [worker("count", count, writes=("details",)), worker("idle", noop)]).run(ctx)
    assert ctx.details == {"count": 5}


def stopper(reason: str) -> Action:
    def stop(name: str, ctx: MemoryContext) -> None:
        ctx.stop(reason)

    return stop


def test_stop_ends_the_workflow_after_the_current_step() -> None:
    log = Log()
    workers = [worker("a", log), worker("b", stopper("nothing to remember")), worker("c", log)]
    result = runner("a,b,c", workers).run(context())
    assert log.names == ["a"]
    assert result.stopped == "nothing to remember"
    assert [name for name, _ in result.timings] == ["a", "b"]


def test_stop_in_a_branch_ends_that_branch_and_the_workflow_after_the_parallel() -> None:
    log = Log()
    workers = [worker("b", stopper("empty")), worker("x", log), worker("c", log), worker("d", log), worker("e", log)]
    result = runner("[b,x|c,d],e", workers).run(context())
    assert sorted(log.names) == ["c", "d"]  # the other branch is not interrupted
    assert result.stopped == "empty"
    assert result.context.stop_reason == "empty"


def test_the_first_branch_to_stop_in_declared_order_gives_the_reason() -> None:
    workers = [worker("b", jittered(stopper("first"))), worker("c", jittered(stopper("second")))]
    flow = runner("[b|c]", workers)
    for _ in range(10):
        assert flow.run(context()).stopped == "first"


def test_a_context_already_stopped_runs_nothing() -> None:
    log = Log()
    ctx = context()
    ctx.stop("caller said so")
    assert runner("a", [worker("a", log)]).run(ctx).stopped == "caller said so"
    assert log.names == []


def failing(error: Exception, delay: float = 0.0) -> Action:
    def fail(name: str, ctx: MemoryContext) -> None:
        time.sleep(delay)
        raise error

    return fail


def test_a_failure_names_the_workflow_and_the_worker() -> None:
    cause = ValueError("bad vector")
    flow = runner("a,b", [worker("a", noop), worker("b", failing(cause))])
    with pytest.raises(WorkerError) as caught:
        flow.run(context())
    assert caught.value.workflow == "retrieve_memory"
    assert caught.value.worker == "b"
    assert caught.value.cause is cause
    assert caught.value.__cause__ is cause
    assert str(caught.value) == "workflow 'retrieve_memory', worker 'b': ValueError: bad vector"


def test_memoryscope_errors_are_wrapped_too_but_worker_errors_pass_through() -> None:
    with pytest.raises(WorkerError) as caught:
        runner("a", [worker("a", failing(StoreError("disk full")))]).run(context())
    assert isinstance(caught.value.cause, StoreError)

    inner = WorkerError("inner_flow", "inner_step", RuntimeError("boom"))
    with pytest.raises(WorkerError) as caught:
        runner("a", [worker("a", failing(inner))]).run(context())
    assert caught.value is inner


def test_of_several_failing_branches_the_first_declared_is_reported() -> None:
    """Branch 1 fails last in time, yet it is the one reported."""
    workers = [worker("slow", failing(KeyError("slow"), delay=0.05)), worker("fast", failing(KeyError("fast")))]
    flow = runner("[slow|fast]", workers)
    with pytest.raises(WorkerError) as caught:
        flow.run(context())
    assert caught.value.worker == "slow"


def test_a_failed_parallel_merges_nothing() -> None:
    def rank(name: str, ctx: MemoryContext) -> None:
        ctx.result = "ranked"

    ctx = context()
    flow = runner("[rank|boom]", [worker("rank", rank, writes=("result",)), worker("boom", failing(OSError("x")))])
    with pytest.raises(WorkerError):
        flow.run(ctx)
    assert ctx.result == ""


@pytest.mark.timeout(20)
def test_concurrent_runs_of_one_runner_share_no_state() -> None:
    start = threading.Barrier(8, timeout=10)

    def echo(name: str, ctx: MemoryContext) -> None:
        time.sleep(random.uniform(0, 0.002))
        ctx.result = f"{ctx.query}:{name}"

    def gather(name: str, ctx: MemoryContext) -> None:
        ctx.memory_ids = (ctx.result, ctx.target_name, ctx.query)

    def tag(name: str, ctx: MemoryContext) -> None:
        ctx.target_name = f"{ctx.query}:{name}"

    workers = [
        worker("echo", echo, writes=("result",), reads=("query",)),
        worker("tag", jittered(tag), writes=("target_name",), reads=("query",)),
        worker("gather", gather, writes=("memory_ids",), reads=("result", "query")),
    ]
    flow = runner("echo,[echo|tag],gather", workers)
    seen: dict[int, tuple[str, ...]] = {}
    errors: list[BaseException] = []

    def call(number: int) -> None:
        try:
            start.wait()
            for round_ in range(20):
                query = f"q{number}-{round_}"
                result = flow.run(context(query=query))
                if result.context.memory_ids != (f"{query}:echo", f"{query}:tag", query):
                    raise AssertionError(result.context.memory_ids)
                seen[number] = result.context.memory_ids
        except BaseException as error:  # collected so the main thread can fail the test
            errors.append(error)

    threads = [threading.Thread(target=call, args=(number,)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(seen) == 8
    flow.close()


@pytest.mark.timeout(20)
def test_nested_parallels_from_many_callers_cannot_starve_a_one_thread_pool() -> None:
    log = Log()
    with ThreadPoolExecutor(max_workers=1) as pool:
        workers = [worker(name, jittered(log)) for name in "abcd"]
        flow = runner("[[a|b]|[c|d]]", workers, executor=pool)
        threads = [threading.Thread(target=flow.run, args=(context(),)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=15)
        assert not any(thread.is_alive() for thread in threads)
        flow.close()  # a shared pool belongs to its owner: still usable afterwards
        assert pool.submit(lambda: 1).result() == 1
    assert sorted(log.names) == sorted("abcd" * 4)


def test_skipped_workers_do_not_run_and_need_no_instance() -> None:
    log = Log()
    workers = [worker("a", log), worker("c", log)]
    result = runner("a,[summarize|c]", workers, skip={"summarize"}).run(context())
    assert log.names == ["a", "c"]
    assert result.skipped == ("summarize",)
    assert dict(result.timings)["summarize"] == 0.0
    assert [name for name, _ in result.timings] == ["a", "summarize", "c"]


def test_skip_may_be_a_predicate() -> None:
    log = Log()
    workers = [worker("a", log), worker("llm_summary", log)]
    flow = runner("a,llm_summary", workers, skip=lambda name: name.startswith("llm_"))
    assert flow.run(context()).skipped == ("llm_summary",)
    assert flow.skipped_workers == frozenset({"llm_summary"})
    assert log.names == ["a"]


def test_a_step_without_a_built_worker_is_refused_at_build() -> None:
    with pytest.raises(UnknownNameError) as caught:
        WorkflowRunner("op", parse_workflow("semantic_rnak"), {"semantic_rank": worker("semantic_rank", noop)})
    assert "Did you mean 'semantic_rank'?" in str(caught.value)
