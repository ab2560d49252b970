"""Run a checked workflow plan on one `MemoryContext`.

Steps run in order on the caller's thread. A `Parallel` runs one branch on the caller's thread
and the others on a thread pool, each on its own fork of the context, then copies back
into the context, branch by branch in declared order, the fields that branch's workers declare
in `writes` (and the `details` entries it changed, and its stop reason). Plans without a
`Parallel` never touch a thread, so the engine adds only microseconds to a run.

Which branch runs where follows how long each took the last time. A branch that took under a
millisecond (`INLINE_BELOW_S`, e.g. `extract_time`) runs on the caller's thread too, after the
others are handed out: handing it to a pool thread and waiting to be woken when it ends costs a
tenth of a millisecond or more on a busy machine, and CPU-bound Python does not overlap anyway
(one interpreter lock). Of the others, the caller keeps the one that took longest (the first
branch the first time) and finds the rest done. Parallel still overlaps what waits: LLM calls,
I/O, and any branch on its first run.

Besides those timings the runner keeps no per-run state: one runner serves many concurrent
runs, each on its own context.

With `check_io` (default: `MEMORYSCOPE_CHECK_WORKER_IO=1` in the environment when the runner is
built; the test suite sets it) every step runs on a recording copy of the context and fails when
it read or wrote a field its worker does not declare (`memoryscope.workflow.io_check`). The
choice is made once, when the plan is compiled: without it a step is the worker's own `run`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from time import perf_counter
from typing import Any, TypeAlias
from uuid import uuid4

from memoryscope.context import MemoryContext
from memoryscope.errors import UnknownNameError, WorkerError
from memoryscope.worker import Worker
from memoryscope.workflow.check import MERGED_FIELDS
from memoryscope.workflow.io_check import checked_run, checking_worker_io
from memoryscope.workflow.plan import Sequence, Step

__all__ = ["RunResult", "WorkflowRunner"]

Timings = list[tuple[str, float]]

INLINE_BELOW_S = 0.001  # a parallel branch that last took less runs on the caller's thread


@dataclass(frozen=True)
class RunResult:
    """What one run did: the context it filled, and how long each worker took."""

    context: MemoryContext
    timings: tuple[tuple[str, float], ...]  # (worker name, seconds) in plan order; 0.0 when skipped
    stopped: str  # the reason a worker gave to `ctx.stop`, or ""
    total_seconds: float
    skipped: tuple[str, ...] = ()  # workers that were reached but not run (see `skip`)

    @property
    def run_id(self) -> str:
        """The run's id, kept with every change it made (`memoryscope history`, `memoryscope undo`)."""
        return self.context.run_id

    def readable(self, operation: str, language: str = "en", tz: Any = None) -> str:
        """What the run did, for a person: its result text, else its memories (time-stamped, one
        per line), else that it stopped, that nothing matched its query, or that it is done."""
        context = self.context
        if context.result:
            text = context.result
        elif context.memories:
            text = "\n".join(memory.format(language, tz) for memory in context.memories)
        elif self.stopped:
            text = f"{operation}: stopped: {self.stopped}"
        elif context.query and not self.skipped:  # asked, and nothing answered: said, not "done"
            text = _NO_MATCH.get(language, _NO_MATCH["en"]).format(operation=operation)
        else:
            text = f"{operation}: done"
        if self.skipped:
            text += f"\n({operation} skipped {', '.join(self.skipped)}: no LLM configured)"
        return text


_NO_MATCH = {"en": "{operation}: no memory matched the query", "zh": "{operation}：没有与查询相符的记忆"}


@dataclass(frozen=True)
class _StepOp:
    name: str
    run: Callable[[MemoryContext], None] | None  # None: skipped


@dataclass(frozen=True)
class _ParallelOp:
    branches: tuple[tuple[_Op, ...], ...]
    copied_fields: tuple[tuple[str, ...], ...]  # per branch: declared writes, copied back as is
    # per branch: seconds its last run took, None before the first. Written by concurrent runs
    # without a lock: a lost update only changes which thread runs a branch next time.
    last_seconds: list[float | None]


_Op: TypeAlias = _StepOp | _ParallelOp


@dataclass
class _BranchOutcome:
    timings: Timings
    skipped: list[str]
    error: WorkerError | None = None


class WorkflowRunner:
    """Runs one workflow (`name` is the operation, named in errors) with built workers.

    `skip` names workers not to run, as a collection or a predicate (an LLM step when no
    generation model is configured); they are listed in `RunResult.skipped` and need no
    instance in `workers`. `executor` runs parallel branches; share one between runners, or
    let the runner make its own (only if the plan has a `Parallel`) and `close()` it. `check_io`
    turns the checking mode on or off (None: as `MEMORYSCOPE_CHECK_WORKER_IO` says).
    `inline_below_s`: a parallel branch whose last run took less runs on the caller's thread.
    """

    def __init__(
        self,
        name: str,
        plan: Sequence,
        workers: Mapping[str, Worker],
        *,
        skip: Collection[str] | Callable[[str], bool] = (),
        executor: Executor | None = None,
        where: str = "",
        check_io: bool | None = None,
        inline_below_s: float = INLINE_BELOW_S,
    ) -> None:
        self.name = name
        self.inline_below_s = inline_below_s
        self.plan = plan
        self.checks_io = checking_worker_io() if check_io is None else check_io
        is_skipped = skip if callable(skip) else frozenset(skip).__contains__
        self.skipped_workers = frozenset(step for step in plan.step_names() if is_skipped(step))
        for step in plan.step_names():
            if step not in workers and step not in self.skipped_workers:
                raise UnknownNameError(where, "worker", step, workers)
        self._ops = self._compile(plan, workers)
        self._owns_executor = executor is None and plan.has_parallel()
        if self._owns_executor:
            executor = ThreadPoolExecutor(thread_name_prefix=f"memoryscope-{name}")
        self._executor = executor

    def run(self, ctx: MemoryContext) -> RunResult:
        """Run the plan on `ctx` (changed in place); wraps a worker's failure in `WorkerError`."""
        started = perf_counter()
        timings: Timings = []
        skipped: list[str] = []
        ctx.operation = ctx.operation or self.name
        ctx.run_id = ctx.run_id or uuid4().hex[:16]
        self._run_ops(self._ops, ctx, timings, skipped)
        return RunResult(ctx, tuple(timings), ctx.stop_reason, perf_counter() - started, tuple(skipped))

    def close(self) -> None:
        """Shut down the thread pool the runner made for itself, if any."""
        if self._owns_executor and self._executor is not None:
            self._executor.shutdown(wait=True)

    def __repr__(self) -> str:
        return f"WorkflowRunner(name={self.name!r}, plan={str(self.plan)!r})"

    # -- building --

    def _compile(self, sequence: Sequence, workers: Mapping[str, Worker]) -> tuple[_Op, ...]:
        """Turn the plan into ops once, so a run does no lookups."""
        ops: list[_Op] = []
        for item in sequence.items:
            if isinstance(item, Step):
                ops.append(_StepOp(item.name, self._step_run(item.name, workers)))
                continue
            copied = tuple(self._copied_fields(branch, workers) for branch in item.branches)
            branches = tuple(self._compile(branch, workers) for branch in item.branches)
            ops.append(_ParallelOp(branches, copied, [None] * len(branches)))
        return tuple(ops)

    def _step_run(self, name: str, workers: Mapping[str, Worker]) -> Callable[[MemoryContext], None] | None:
        if name in self.skipped_workers:
            return None
        return checked_run(workers[name]) if self.checks_io else workers[name].run

    def _copied_fields(self, branch: Sequence, workers: Mapping[str, Worker]) -> tuple[str, ...]:
        fields: dict[str, None] = {}  # a dict keeps the declared order
        for step in branch.step_names():
            if step not in self.skipped_workers:
                fields.update(dict.fromkeys(workers[step].writes))
        return tuple(field for field in fields if field not in MERGED_FIELDS)

    # -- running --

    def _run_ops(self, ops: tuple[_Op, ...], ctx: MemoryContext, timings: Timings, skipped: list[str]) -> None:
        for op in ops:
            if ctx.stop_reason:
                return
            if isinstance(op, _StepOp):
                self._run_step(op, ctx, timings, skipped)
            else:
                self._run_parallel(op, ctx, timings, skipped)

    def _run_step(self, op: _StepOp, ctx: MemoryContext, timings: Timings, skipped: list[str]) -> None:
        if op.run is None:
            timings.append((op.name, 0.0))
            skipped.append(op.name)
            return
        started = perf_counter()
        try:
            op.run(ctx)
        except WorkerError:
            raise  # from a workflow run inside this worker: it already names its worker
        except Exception as error:  # whatever the worker's code raised is this step's failure
            raise WorkerError(self.name, op.name, error) from error
        timings.append((op.name, perf_counter() - started))

    def _run_parallel(self, op: _ParallelOp, ctx: MemoryContext, timings: Timings, skipped: list[str]) -> None:
        forks = [ctx.fork() for _ in op.branches]
        outcomes = self._run_branches(op, forks)
        failed = next((outcome.error for outcome in outcomes if outcome.error is not None), None)
        if failed is not None:
            raise failed
        details_before = dict(ctx.details)
        for fork, fields, outcome in zip(forks, op.copied_fields, outcomes, strict=True):
            timings.extend(outcome.timings)
            skipped.extend(outcome.skipped)
            for field in fields:
                setattr(ctx, field, getattr(fork, field))
            for key, value in fork.details.items():
                # Only entries this branch set: the others still hold the value every fork copied.
                if key not in details_before or details_before[key] is not value:
                    ctx.details[key] = value
            if fork.stop_reason and not ctx.stop_reason:
                ctx.stop_reason = fork.stop_reason

    def _run_branches(self, op: _ParallelOp, forks: list[MemoryContext]) -> list[_BranchOutcome]:
        """Run the branches (once one has failed, none not yet started); outcomes in declared order."""

        def run_branch(index: int) -> _BranchOutcome:
            outcome = _BranchOutcome([], [])
            started = perf_counter()
            try:
                self._run_ops(op.branches[index], forks[index], outcome.timings, outcome.skipped)
            except WorkerError as error:
                outcome.error = error
            op.last_seconds[index] = perf_counter() - started
            return outcome

        if len(forks) == 1 or self._executor is None:  # `[x]`: nothing runs beside it
            return [run_branch(index) for index in range(len(forks))]
        executor = self._executor
        last = op.last_seconds
        short = [index for index, seconds in enumerate(last) if seconds is not None and seconds < self.inline_below_s]
        others = [index for index in range(len(forks)) if index not in short]
        outcomes: dict[int, _BranchOutcome] = {}
        futures: dict[int, Future[_BranchOutcome]] = {}
        if others:
            here = max(others, key=lambda index: last[index] or 0.0)  # the longest last time
            futures = {index: executor.submit(run_branch, index) for index in others if index != here}
            outcomes[here] = run_branch(here)
        for index in short:
            failed = any(outcome.error for outcome in outcomes.values())
            outcomes[index] = _BranchOutcome([], []) if failed else run_branch(index)
        for index, future in futures.items():
            # A branch no pool thread has started yet runs here instead: a waiting thread then
            # only ever waits on running work, so nested parallels cannot starve a small pool.
            if future.cancel():
                if any(outcome.error for outcome in outcomes.values()):
                    outcomes[index] = _BranchOutcome([], [])  # a branch failed: start nothing new
                else:
                    outcomes[index] = run_branch(index)
            else:
                outcomes[index] = future.result()
        return [outcomes[index] for index in range(len(forks))]
