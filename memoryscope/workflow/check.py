"""Prove a workflow plan can run before anything runs.

The check walks the plan the way the runner will and reports every problem at once: unknown
worker names, fields read before anything writes them, declared fields (`reads`,
`optional_reads`, `writes`) that the context does not have, and parallel branches that would
overwrite each other's results when merged. That a worker touches only what it declares is
checked while it runs, in the runner's checking mode (`memoryscope.workflow.io_check`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from memoryscope.context import CONTEXT_FIELDS, RUNNER_FIELDS
from memoryscope.errors import ConfigError, closest
from memoryscope.memory_types import MemoryType
from memoryscope.workflow.plan import Sequence, Step

__all__ = ["MERGED_FIELDS", "WorkerSpec", "check_plan", "validate_plan"]

# The runner merges these from every branch instead of copying one branch's value, and they
# always hold a usable value (an empty dict, no reason), so they never conflict and never need
# an earlier writer.
MERGED_FIELDS: frozenset[str] = frozenset({"details", "stop_reason"})


class WorkerSpec(Protocol):
    """What the check needs of a worker (class or instance): its declared fields. An
    `optional_reads` tuple, when the spec has one, is checked too (names only: nothing needs to
    write those fields)."""

    @property
    def reads(self) -> Iterable[str]: ...

    @property
    def writes(self) -> Iterable[str]: ...


def check_plan(plan: Sequence, workers: Mapping[str, WorkerSpec], given: Iterable[str], where: str) -> list[tuple[str, str]]:
    """Every problem of `plan` as (YAML path, message); empty when it can run.

    `workers` maps the names a workflow may use to their specs, `given` names the context
    fields the caller fills in, and `where` is the YAML path of the workflow string.
    """
    return _Checker(plan, workers, tuple(given), where).problems()


def validate_plan(plan: Sequence, workers: Mapping[str, WorkerSpec], given: Iterable[str], where: str) -> None:
    """Raise `ConfigError` listing every problem of `plan`, if it has any."""
    problems = check_plan(plan, workers, given, where)
    if problems:
        raise ConfigError(problems)


class _Checker:
    def __init__(self, plan: Sequence, workers: Mapping[str, WorkerSpec], given: tuple[str, ...], where: str):
        self._plan = plan
        self._workers = workers
        self._given = given
        self._where = where
        self._messages: list[str] = []
        self._declared: dict[str, tuple[tuple[str, ...], tuple[str, ...]] | None] = {}
        self._step_index = 0  # position of the current step in `plan.step_names()`
        # For hints: every step that writes a field, as (position, worker name).
        self._writers: dict[str, list[tuple[int, str]]] = {}

    def problems(self) -> list[tuple[str, str]]:
        for field in self._given:
            if field not in CONTEXT_FIELDS:
                self._report(f"the caller gives {field!r}, which is not a MemoryContext field{_hint(field)}")
        for position, name in enumerate(self._plan.step_names()):
            declared = self._declared_fields(name)
            for field in declared[1] if declared else ():
                self._writers.setdefault(field, []).append((position, name))
        self._sequence(self._plan, frozenset(self._given) | MERGED_FIELDS | RUNNER_FIELDS)
        # A worker used twice would repeat its declaration problems; keep the first of each.
        return [(self._where, message) for message in dict.fromkeys(self._messages)]

    def _sequence(self, sequence: Sequence, available: frozenset[str]) -> tuple[frozenset[str], dict[str, str]]:
        """Fields available after `sequence`, and each field it writes → its first writer."""
        written: dict[str, str] = {}
        for item in sequence.items:
            if isinstance(item, Step):
                available = self._step(item.name, available, written)
                continue
            outcomes = [self._sequence(branch, available) for branch in item.branches]
            self._report_conflicts([branch_written for _, branch_written in outcomes])
            for branch_available, branch_written in outcomes:
                available |= branch_available
                for field, writer in branch_written.items():
                    written.setdefault(field, writer)
        return available, written

    def _step(self, name: str, available: frozenset[str], written: dict[str, str]) -> frozenset[str]:
        position = self._step_index
        self._step_index += 1
        declared = self._declared_fields(name)
        if declared is None:
            return available
        reads, writes = declared
        for field in reads:
            if field not in available:
                self._report_missing(name, field, position)
        for field in writes:
            written.setdefault(field, name)
        return available.union(writes)

    def _declared_fields(self, name: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """The worker's valid (reads, writes); None for an unknown name. Reports problems once."""
        if name in self._declared:
            return self._declared[name]
        spec = self._workers.get(name)
        if spec is None:
            close = closest(name, self._workers)
            hint = f" Did you mean {close!r}?" if close else ""
            known = ", ".join(sorted(self._workers)) or "(none)"
            self._report(f"unknown worker {name!r}.{hint} Known: {known}")
            self._declared[name] = None
            return None
        declared = (self._valid_fields(name, spec, "reads"), self._valid_fields(name, spec, "writes"))
        self._valid_fields(name, spec, "optional_reads")
        self._check_memory_types(name, spec)
        self._declared[name] = declared
        return declared

    def _check_memory_types(self, name: str, spec: WorkerSpec) -> None:
        owner = spec.__name__ if isinstance(spec, type) else type(spec).__name__
        for memory_type in getattr(spec, "memory_types", ()):
            if memory_type not in MemoryType:
                self._report(
                    f"worker {name!r} ({owner}) uses memory type {memory_type!r}, which nobody registered: "
                    "register it in the worker's package with memoryscope.memory_types.register_memory_type"
                )

    def _valid_fields(self, name: str, spec: WorkerSpec, kind: str) -> tuple[str, ...]:
        fields = getattr(spec, kind, ())
        owner = spec.__name__ if isinstance(spec, type) else type(spec).__name__
        if isinstance(fields, str):  # `reads = ("query")` is a string, not a one-field tuple
            self._report(f"worker {name!r} ({owner}) {kind} must be a tuple of field names, not the string {fields!r}")
            fields = (fields,)
        valid: dict[str, None] = {}  # a dict keeps the declared order
        for field in fields:
            if field in CONTEXT_FIELDS:
                valid[field] = None
            else:
                problem = f"{kind} {field!r}, which is not a MemoryContext field{_hint(field)}"
                self._report(f"worker {name!r} ({owner}) {problem}")
        return tuple(valid)

    def _report_missing(self, name: str, field: str, position: int) -> None:
        message = f"worker {name!r} reads {field!r}, but no earlier step writes it and the caller does not give it"
        others = [(at, writer) for at, writer in self._writers.get(field, ()) if at != position]
        later = [writer for at, writer in others if at > position]
        beside = [writer for at, writer in others if at < position]  # earlier in the string, yet not available
        if later:
            message += f" ({later[0]!r} writes it later)"
        elif beside:
            message += f" ({beside[0]!r} writes it in a parallel branch, which runs at the same time)"
        else:
            message += f" (the caller gives: {', '.join(self._given) or 'nothing'})"
        self._report(message)

    def _report_conflicts(self, branches: list[dict[str, str]]) -> None:
        writers: dict[str, list[str]] = {}
        for number, branch_written in enumerate(branches, start=1):
            for field, writer in branch_written.items():
                if field not in MERGED_FIELDS:
                    writers.setdefault(field, []).append(f"{writer!r} (branch {number})")
        for field, names in writers.items():
            if len(names) > 1:
                self._report(f"parallel branches write the same field {field!r}: {' and '.join(names)}")

    def _report(self, message: str) -> None:
        self._messages.append(message)


def _hint(field: str) -> str:
    close = closest(field, CONTEXT_FIELDS)
    if close:
        return f". Did you mean {close!r}?"
    return " (a capability declares its own fields with memoryscope.context.context_field, beside its workers)"
