"""Operations: named workflows a service runs (`retrieve_memory`, `consolidate_memory`, ...).

A frontend operation runs on the caller's thread and returns its answer. A backend operation
(`consolidate_memory`, `reflect_and_reconsolidate`) may also be run by the service's scheduler
when its trigger fires: `trigger_messages` new messages, `trigger_observations` unreflected
observations, or every `interval_time` seconds.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict, Field

from memoryscope.config.bounds import BoundedParams
from memoryscope.registry import Registry

__all__ = ["OperationParams", "FrontendOperation", "BackendOperation", "OPERATIONS"]


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
