"""Operations: named workflows a service runs (`retrieve_memory`, `consolidate_memory`, ...).

A frontend operation runs on the caller's thread and returns its answer. A backend operation
(`consolidate_memory`, `reflect_and_reconsolidate`) may also be run by the service's scheduler
when its trigger fires: `trigger_messages` new messages, `trigger_observations` unreflected
observations, or every `interval_time` seconds.

An operation's class (`frontend_operation`, `backend_operation`) is what a config names; an
`Operation` is one built from it: its workflow runner and its params. The service runs
operations and its scheduler runs the backend ones; both depend on this module, not on each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from memoryscope.config.bounds import BoundedParams
from memoryscope.registry import Registry
from memoryscope.workflow import WorkflowRunner

__all__ = ["Operation", "OperationParams", "FrontendOperation", "BackendOperation", "OPERATIONS"]


@dataclass(frozen=True)
class Operation:
    """A built operation: its workflow runner and what the config said about it."""

    name: str
    params: Any  # the operation class's Params (workflow, description, triggers)
    backend: bool
    runner: WorkflowRunner

    @property
    def description(self) -> str:
        return str(self.params.description)

    @property
    def unavailable(self) -> str:
        """Why a backend operation cannot do its work here ("" when it can).

        A backend workflow with LLM steps skipped (no LLM configured) would still load and store,
        marking messages consolidated or observations reflected that were never looked at; it is
        not run at all instead, so everything stays pending until an LLM is configured.
        """
        skipped = sorted(self.runner.skipped_workers)
        if self.backend and skipped:
            return f"{self.name} needs an LLM (steps {', '.join(skipped)}); none is configured, so it is skipped"
        return ""


class OperationParams(BoundedParams):
    model_config = ConfigDict(extra="forbid", frozen=True)

    workflow: str = Field(..., description="Workers to run: `a,[b|c,d],e` (parallel branches in brackets).")
    description: str = Field("", description="What the operation does, shown by /help and the CLI.")


class OperationKind:
    """Base of the operation classes; `backend` says whether the scheduler may run it."""

    backend: ClassVar[bool] = False

    class Params(OperationParams):
        pass


OPERATIONS: Registry[type[OperationKind]] = Registry("operation class", OperationKind)


@OPERATIONS.register("frontend_operation")
class FrontendOperation(OperationKind):
    """Runs when called, on the caller's thread (retrieval, listing, adding, deleting)."""


@OPERATIONS.register("backend_operation")
class BackendOperation(OperationKind):
    """Runs on demand or on the service's scheduler when a trigger fires."""

    backend = True

    class Params(OperationParams):
        trigger_messages: int | None = Field(None, gt=0, description="Run when this many new messages wait.")
        trigger_observations: int | None = Field(None, gt=0, description="Run when this many observations are unreflected.")
        interval_time: float | None = Field(
            None, gt=0, le=366 * 24 * 3600, description="Run at most every this many seconds (0.1.x name; a year at most)."
        )


# MemoryScope 0.1.x had a separate class for consolidation; it is a backend operation here.
OPERATIONS.register("consolidate_memory_op")(BackendOperation)


def default_operation_class(operation_name: str) -> str:
    """Operations known to be background work default to `backend_operation`."""
    backend_names = {"consolidate_memory", "reflect_and_reconsolidate"}
    return "backend_operation" if operation_name in backend_names else "frontend_operation"
