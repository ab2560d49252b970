"""The memory service: runs the configured operations by name, each on a fresh context."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memoryscope.context import CALLER_FIELDS, MemoryContext
from memoryscope.errors import MemoryScopeError, UnknownNameError
from memoryscope.registry import Registry
from memoryscope.workflow import RunResult, WorkflowRunner

__all__ = ["MemoryService", "Operation", "SERVICES"]


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


class MemoryService:
    """Holds the operations of one `memory_service:` entry and runs them."""

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        human_name: str = Field("user", description="How memories name the user when the chat gives no name.")
        assistant_name: str = Field("assistant", description="How the assistant is named in prompts.")
        history_msg_count: int = Field(100, gt=0, description="Chat history kept in memory (0.1.x key).")
        contextual_msg_count: int = Field(6, ge=0, description="Recent turns sent with each chat request.")
        bootstrap_service: bool = Field(False, description="0.1.x key; accepted and unused.")

    def __init__(self, name: str, params: Params, operations: Mapping[str, Operation], executor: ThreadPoolExecutor) -> None:
        self.name = name
        self.params = params
        self.operations = dict(operations)
        self._executor = executor
        self._closed = threading.Event()

    def operation_names(self) -> list[str]:
        return list(self.operations)

    def run_operation(self, name: str, user_name: str, **caller_fields: Any) -> RunResult:
        """Run operation `name` for `user_name`; caller fields are MemoryContext inputs (`query=...`)."""
        if self._closed.is_set():
            raise MemoryScopeError(f"service {self.name!r} is closed")
        operation = self.operations.get(name)
        if operation is None:
            raise UnknownNameError(f"memory_service.{self.name}.memory_operations", "operation", name, self.operations)
        unknown = sorted(set(caller_fields) - CALLER_FIELDS)
        if unknown:
            raise MemoryScopeError(
                f"unknown inputs {unknown} for operation {name!r}; known: {sorted(CALLER_FIELDS - {'user_name'})}"
            )
        context = MemoryContext(user_name=user_name, **caller_fields)
        return operation.runner.run(context)

    def close(self) -> None:
        self._closed.set()


SERVICES: Registry[type[MemoryService]] = Registry("memory service", MemoryService)
SERVICES.register("memory_service")(MemoryService)
SERVICES.register("memory_scope_service")(MemoryService)  # the 0.1.x name
