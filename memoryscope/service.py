"""The memory service: runs the configured operations by name, each on a fresh context, and owns
the background scheduler of its backend operations.

MemoryScope 0.1.x's service calls work too: `service.consolidate_memory()` (any configured
operation, as a method, with 0.1.x keywords such as `role_name=`, `query=`, `memory_id=`,
returning readable text), `init_service()`, `start_backend_service()`, `stop_backend_service()`,
`human_name`, `assistant_name`, `op_description_dict`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from pydantic import AliasChoices, ConfigDict, Field

from memoryscope.compat.inputs import caller_inputs
from memoryscope.config.bounds import BoundedParams
from memoryscope.config.specs import GlobalSettings
from memoryscope.context import CALLER_FIELDS, MemoryContext
from memoryscope.errors import InvalidInputError, MemoryScopeError, ServiceClosed, UnknownNameError
from memoryscope.operation import Operation
from memoryscope.registry import Registry
from memoryscope.scheduler import Scheduler
from memoryscope.stores.base import MemoryStore
from memoryscope.workflow import RunResult

# `Operation` lives in `memoryscope.operation` (the scheduler needs it without the service); it is
# still importable from here, where it used to be.
__all__ = ["MemoryService", "Operation", "SERVICES"]


class MemoryService:
    """Holds the operations of one `memory_service:` entry, runs them, and owns their scheduler.

    Frontend operations run on the caller's thread. Backend operations run on demand (also on
    the caller's thread) or in the background when their trigger fires (see
    `memoryscope.scheduler`); either way one backend operation per user at a time. Storing
    messages (`read_message`, or any operation given `messages=`) tells the scheduler.
    """

    class Params(BoundedParams):
        model_config = ConfigDict(extra="forbid", frozen=True)

        human_name: str = Field("user", description="How memories name the user when the chat gives no name.")
        assistant_name: str = Field("assistant", description="How the assistant is named in prompts.")
        history_msg_count: int = Field(100, gt=0, description="Chat turns a chat keeps in memory (0.1.x key).")
        contextual_msg_max_count: int = Field(
            10,
            ge=0,
            validation_alias=AliasChoices("contextual_msg_max_count", "contextual_msg_count"),
            description="Most recent turns a chat sends with each request (0.1.x key; `contextual_msg_count` too).",
        )
        contextual_msg_min_count: int = Field(
            0,
            ge=0,
            description="0.1.x key (consolidate only with this many new turns); accepted: here `trigger_messages` of "
            "consolidate_memory decides when it runs by itself.",
        )
        bootstrap_service: bool = Field(False, description="0.1.x key; accepted and unused.")
        enable_scheduler: bool = Field(True, description="Run backend operations in the background when triggers fire.")
        scheduler_threads: int = Field(2, gt=0, description="Threads for background operations (users run side by side).")
        scheduler_check_interval_s: float = Field(
            30.0, gt=0, description="How often the scheduler re-checks the triggers of every user it has seen."
        )
        shutdown_timeout_s: float = Field(
            30.0, ge=0, description="On close, how long to wait for a running background operation before abandoning it."
        )
        lease_ttl_s: float = Field(
            300.0, gt=0, le=86_400, description="How long a backend run's lease on its user lasts unless renewed (a killed "
            "process blocks the user at most this long); renewed every third of it while the run goes on.",
        )
        lease_wait_s: float = Field(
            60.0, ge=0, le=86_400, description="How long an on-demand backend run waits while another process runs one for "
            "the same user, before it fails saying so.",
        )

    def __init__(
        self,
        name: str,
        params: Params,
        operations: Mapping[str, Operation],
        executor: ThreadPoolExecutor,
        store: MemoryStore | None = None,
        settings: GlobalSettings | None = None,
    ) -> None:
        self.name = name
        self.params = params
        self.operations = dict(operations)
        # the operations verbs run that the config does not define (`memoryscope.door.verbs`): run
        # by name like the others, not listed among the configured ones
        self.verb_operations: dict[str, Operation] = {}
        self.settings = settings or GlobalSettings()
        self._executor = executor
        self._closed = threading.Event()
        self.scheduler = Scheduler(
            name,
            {op_name: op for op_name, op in self.operations.items() if not op.unavailable},
            store,
            enabled=params.enable_scheduler,
            threads=params.scheduler_threads,
            check_interval_s=params.scheduler_check_interval_s,
            shutdown_timeout_s=params.shutdown_timeout_s,
            lease_ttl_s=params.lease_ttl_s,
            lease_wait_s=params.lease_wait_s,
        )

    def operation_names(self) -> list[str]:
        return list(self.operations)

    def has_operation(self, name: str) -> bool:
        """Whether `name` runs here: a configured operation, or one a verb brings."""
        return name in self.operations or name in self.verb_operations

    def start(self) -> None:
        """Start the background scheduler (when `enable_scheduler`); `MemoryScope` calls this once built."""
        self.scheduler.start()

    def run_operation(self, name: str, user_name: str | None = None, **caller_fields: Any) -> RunResult:
        """Run operation `name` for `user_name` (default `human_name`); caller fields are
        MemoryContext inputs (`query=...`). `role_name=` names the user as in 0.1.x. A blank
        user id is an InvalidInputError (it names no user)."""
        role_name = caller_fields.pop("role_name", None)
        user_name = _user_id(user_name if user_name is not None else role_name, self.params.human_name)
        if self._closed.is_set():
            raise ServiceClosed(f"service {self.name!r} is closed")
        operation = self.operations.get(name) or self.verb_operations.get(name)
        if operation is None:
            raise UnknownNameError(f"memory_service.{self.name}.memory_operations", "operation", name, self.operations)
        unknown = sorted(set(caller_fields) - CALLER_FIELDS)
        if unknown:
            raise MemoryScopeError(
                f"unknown inputs {unknown} for operation {name!r}; known: {sorted(CALLER_FIELDS - {'user_name'})}"
            )
        context = MemoryContext(user_name=user_name, **caller_fields)
        if operation.unavailable:
            return RunResult(context=context, timings=(), stopped=operation.unavailable, total_seconds=0.0)
        # a backend operation runs through the scheduler: one per user at a time, and recorded
        result = self.scheduler.run_now(operation, context) if operation.backend else operation.runner.run(context)
        stored = result.context.stored_message_ids  # None: no step of the operation stores messages
        if context.messages and (stored is None or stored):
            self.notify_messages(user_name, context.target_name, context.workspace)
        return result

    def run_as_text(self, name: str, role_name: str | None = None, **legacy_inputs: Any) -> str:
        """Run `name` as MemoryScope 0.1.x did: 0.1.x keywords in (`query=`, `memory_id=`,
        `timestamp=`), readable text out; for `role_name` (default `human_name`)."""
        inputs = caller_inputs(name, legacy_inputs, self.settings.tzinfo)
        result = self.run_operation(name, _user_id(role_name, self.params.human_name), **inputs)
        return result.readable(name, self.settings.language, self.settings.tzinfo)

    def notify_messages(self, user_name: str, target_name: str = "", workspace: str = "") -> None:
        """New messages of the user (in that target and workspace) are stored: let the scheduler
        check their triggers."""
        self.scheduler.notify(user_name, target_name, workspace)

    def close(self, timeout: float | None = None) -> bool:
        """Refuse new runs; stop the scheduler, waiting up to `timeout` (default `shutdown_timeout_s`)
        for a running background operation. False when one was abandoned (it writes nothing)."""
        self._closed.set()
        return self.scheduler.close(timeout)

    # -- MemoryScope 0.1.x ----------------------------------------------------------------------

    @property
    def human_name(self) -> str:
        return self.params.human_name

    @property
    def assistant_name(self) -> str:
        return self.params.assistant_name

    @property
    def op_description_dict(self) -> dict[str, str]:
        """Each operation's description, by name."""
        return {name: operation.description for name, operation in self.operations.items()}

    def init_service(self, **_: Any) -> None:
        """0.1.x built its operations here; they are built with the service now, so this does nothing."""

    def start_backend_service(self, name: str | None = None, **_: Any) -> None:
        """Let the scheduler run backend operations by their triggers again (after `stop_backend_service`)."""
        self.scheduler.resume()
        self.scheduler.start()

    def stop_backend_service(self, wait_service: bool = False) -> None:
        """Stop running backend operations by trigger (on demand they still run); with
        `wait_service`, wait for the one running now."""
        self.scheduler.pause()
        if wait_service:
            self.scheduler.wait_idle()

    def __getattr__(self, name: str) -> Callable[..., str]:
        # 0.1.x: every configured operation is a method, `service.consolidate_memory(role_name="ann")`
        operations = self.__dict__.get("operations") or {}
        if name in operations:
            return partial(self.run_as_text, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r} (nor an operation of that name)")


def _user_id(given: str | None, default: str) -> str:
    """The user a run is for: `given`, or `default` when none is given; a blank id names no user
    (the door and the server refuse it the same way)."""
    if given is None:
        return default
    if not isinstance(given, str):
        raise InvalidInputError(f"user_id must be a text, got {type(given).__name__}")
    if not given.strip():
        raise InvalidInputError("user_id is empty; give the user's id, or leave it out for the default user")
    return given


SERVICES: Registry[type[MemoryService]] = Registry("memory service", MemoryService)
SERVICES.register("memory_service")(MemoryService)
SERVICES.register("memory_scope_service")(MemoryService)  # the 0.1.x name
