"""Checking mode: what each step reads and writes, against what its worker declares.

The workflow check (`memoryscope.workflow.check`) trusts each worker's `reads`, `optional_reads`
and `writes`; this mode holds the workers to them. With `MEMORYSCOPE_CHECK_WORKER_IO=1` in the
environment (the test suite sets it), a `WorkflowRunner` built afterwards runs each step on a
recording copy of the context, and a step that read or wrote a field its worker does not declare
fails with a `WorkerError` naming the worker, the field, the line, and the declaration to add::

    workflow 'consolidate_memory', worker 'info_filter': MemoryScopeError: InfoFilterWorker writes
    'result' (workers/info_filter.py:167) without declaring it: add 'result' to InfoFilterWorker.writes

Off (the default), the runner calls `worker.run` itself: the mode costs nothing then.

A step may, without declaring it:

- read the fields of `memoryscope.context.ALWAYS_READABLE`: `user_name`, `target_name` and
  `workspace` (whose memories the run is about), `operation`, `run_id` and `on_demand` (set by
  the runner), `stop_reason`;
- end the run with `ctx.stop(reason)`;
- read back a field it declares in `writes` once it has assigned it, and `details` whenever it
  declares writing it (adding its entry reads the dict first).

Every other read needs `reads` or `optional_reads`, every other write `writes`. Adding,
replacing or removing an entry of `details` is a write of `details`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from memoryscope.context import ALWAYS_READABLE, CONTEXT_FIELDS, MemoryContext
from memoryscope.errors import MemoryScopeError

__all__ = ["CHECK_WORKER_IO", "checked_run", "checking_worker_io"]

CHECK_WORKER_IO = "MEMORYSCOPE_CHECK_WORKER_IO"
_ON = frozenset(("1", "true", "yes", "on"))
# Always allowed to assign: `ctx.stop(reason)` does, and the runner merges it from every branch.
_ALWAYS_WRITABLE = frozenset(("stop_reason",))


def checking_worker_io() -> bool:
    """Whether `MEMORYSCOPE_CHECK_WORKER_IO` asks for the checking mode (1, true, yes, on)."""
    return os.environ.get(CHECK_WORKER_IO, "").strip().lower() in _ON


def checked_run(worker: Any, run: Callable[[MemoryContext], None] | None = None) -> Callable[[MemoryContext], None]:
    """`worker.run` (or `run`, on the worker's behalf), checking each call's reads and writes
    against the worker's declarations.

    A call that read or wrote an undeclared field raises `MemoryScopeError` once the worker is
    done (the runner wraps it in a `WorkerError`); what the worker wrote reaches the context
    either way, as it would have without the check. A worker's own exception wins.
    """
    owner = type(worker).__name__
    writes = frozenset(getattr(worker, "writes", ()))
    readable = frozenset((*getattr(worker, "reads", ()), *getattr(worker, "optional_reads", ())))
    readable |= ALWAYS_READABLE | (writes & {"details"})
    writable = writes | _ALWAYS_WRITABLE
    run = run or worker.run

    def run_checked(ctx: MemoryContext) -> None:
        recorder = _Recorder(readable, writable)
        before = {name: value for name, value in _state(ctx).items() if name != "_recorder"}  # a capability's fields too
        entries_before = dict(before["details"])
        copy = object.__new__(_RecordingContext)
        _state(copy).update(before, _recorder=recorder)
        try:
            run(copy)
        finally:
            # Only what the step assigned: another thread may have changed `ctx` meanwhile (the
            # scheduler stops an abandoned run), as it may without the check. `object.__setattr__`:
            # `ctx` may itself be a recording copy (a workflow run inside a step).
            after = _state(copy)
            for name, value in after.items():
                if name != "_recorder" and (name not in before or value is not before[name]):
                    object.__setattr__(ctx, name, value)
        if after["details"] is before["details"] and _changed(after["details"], entries_before):
            recorder.wrote("details", "its entries")
        if "details" in recorder.undeclared_writes:
            recorder.undeclared_reads.pop("details", None)  # adding an entry reads the dict first: one problem
        if recorder.undeclared_reads or recorder.undeclared_writes:
            raise MemoryScopeError(_message(owner, recorder))

    return run_checked


class _Recorder:
    """The undeclared fields one step read and wrote, each with where it first did."""

    __slots__ = ("readable", "undeclared_reads", "undeclared_writes", "writable", "written")

    def __init__(self, readable: frozenset[str], writable: frozenset[str]) -> None:
        self.readable = readable
        self.writable = writable
        self.written: set[str] = set()
        self.undeclared_reads: dict[str, str] = {}
        self.undeclared_writes: dict[str, str] = {}

    def read(self, name: str) -> None:
        if name not in self.readable and name not in self.written and name not in self.undeclared_reads:
            self.undeclared_reads[name] = _caller()

    def wrote(self, name: str, where: str = "") -> None:
        self.written.add(name)
        if name not in self.writable and name not in self.undeclared_writes:
            self.undeclared_writes[name] = where or _caller()


class _RecordingContext(MemoryContext):
    """A `MemoryContext` that tells its recorder every field read and assigned."""

    _recorder: _Recorder

    def __getattribute__(self, name: str) -> Any:
        if name in CONTEXT_FIELDS:
            object.__getattribute__(self, "_recorder").read(name)
        return object.__getattribute__(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in CONTEXT_FIELDS:
            object.__getattribute__(self, "_recorder").wrote(name)
        object.__setattr__(self, name, value)


def _state(ctx: MemoryContext) -> dict[str, Any]:
    """The context's attributes, read without recording."""
    state: dict[str, Any] = object.__getattribute__(ctx, "__dict__")
    return state


def _changed(details: dict[str, Any], before: dict[str, Any]) -> bool:
    return details.keys() != before.keys() or any(value is not before[key] for key, value in details.items())


def _caller() -> str:
    """Where the worker's code touched the field: the first frame outside this module."""
    frame: FrameType | None = sys._getframe(1)  # checking mode only: the line to fix is worth a frame walk
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    if frame is None:
        return "?"
    path = Path(frame.f_code.co_filename)
    return f"{path.parent.name}/{path.name}:{frame.f_lineno}"


def _message(owner: str, recorder: _Recorder) -> str:
    problems = [
        f"{owner} reads {name!r} ({where}) without declaring it: add {name!r} to {owner}.reads "
        f"(or to {owner}.optional_reads, if an earlier step may not write it)"
        for name, where in recorder.undeclared_reads.items()
    ]
    problems += [
        f"{owner} writes {name!r} ({where}) without declaring it: add {name!r} to {owner}.writes"
        for name, where in recorder.undeclared_writes.items()
    ]
    return "; ".join(problems)
