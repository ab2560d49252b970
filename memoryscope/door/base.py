"""What every verb of the door stands on: the service and store it works on, the caller a face
names, the one way a verb writes (an operation of the service), and how a memory id is found for
a caller (the store's filter applies the user)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

from memoryscope.config.specs import GlobalSettings
from memoryscope.door.caller import Caller
from memoryscope.door.inputs import parse_time
from memoryscope.door.limits import Limits
from memoryscope.door.records import MemoryRecord, record_of
from memoryscope.errors import (
    InvalidInputError,
    MemoryScopeError,
    NotFoundError,
    PermissionDeniedError,
    StoreError,
    UnknownNameError,
    WorkerError,
)
from memoryscope.memory import MemoryNode
from memoryscope.service import MemoryService
from memoryscope.stores.base import MemoryStore
from memoryscope.stores.metadata import MetadataCondition, metadata_conditions
from memoryscope.workflow import RunResult

__all__ = [
    "DoorBase",
    "MemoryNotFoundError",
    "InvalidFilterError",
    "UnknownOperationError",
    "MEMORYOS_OPERATION",
    "conditions",
]

# A service with this operation keeps memory MemoryOS's way (`configs/memoryos.yaml`).
MEMORYOS_OPERATION = "memoryos_add"
_INPUT_ERRORS = (InvalidInputError, NotFoundError, PermissionDeniedError)
_OWNER_PAGE = 500
_Door = TypeVar("_Door", bound="DoorBase")


class MemoryNotFoundError(NotFoundError, StoreError):
    """No memory of the caller's has the id asked for (a `StoreError` too, as it was)."""

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        super().__init__(
            f"no memory has the id {memory_id!r} (list them with get_all or `memoryscope run list_memory`)", code="unknown_memory"
        )


class InvalidFilterError(InvalidInputError, StoreError):
    """A metadata filter that does not read (the caller's mistake; a `StoreError` too, as it was)."""


class UnknownOperationError(UnknownNameError, NotFoundError):
    """No operation of that name in the service: a config name (with the closest known one) that
    the faces answer as not found."""

    def __init__(self, service: str, name: str, known: Sequence[str]) -> None:
        UnknownNameError.__init__(self, f"memory_service.{service}.memory_operations", "operation", name, known)
        self.code = "unknown_operation"


class DoorBase:
    """The door's ground: see `memoryscope.door.door.Door` for the verbs."""

    def __init__(
        self,
        service: MemoryService,
        store: MemoryStore | None,
        settings: GlobalSettings,
        *,
        limits: Limits,
        source: str,
        retrieve_operation: str = "retrieve_memory",
        store_operation: str = "read_message",
        agent_policy: bool = False,
        heat_threshold: float | None = None,
        core_memory_of: Callable[[str, str], Any] | None = None,
    ) -> None:
        self.service = service
        self._store = store
        self.settings = settings
        self.limits = limits
        self._source = source
        self._retrieve_operation = retrieve_operation
        self._store_operation = store_operation
        self._agent_policy = agent_policy
        self.heat_threshold = heat_threshold  # MemoryOS: the heat at which an update promotes a segment
        self.core_memory_of = core_memory_of  # an agent config: (user, target) -> that agent's core memory (door.blocks)

    def with_limits(self: _Door, limits: Limits) -> _Door:
        """The same door with other limits (a server given its own `server:` settings)."""
        door = object.__new__(type(self))
        door.__dict__.update(self.__dict__, limits=limits)
        return door

    def for_service(self: _Door, service: MemoryService) -> _Door:
        """The same door on another service of the scope (a chat configured with its own)."""
        if service is self.service:
            return self
        door = object.__new__(type(self))
        door.__dict__.update(self.__dict__, service=service)
        return door

    # -- who ---------------------------------------------------------------------------------

    def caller(
        self,
        user_id: str | None = None,
        *,
        workspace: str | None = "",
        target: str | None = "",
        local: bool = True,
        **more: Any,
    ) -> Caller:
        """The caller of a face: `user_id`, or the service's `human_name` when the face names no
        user. `local`: this process (Python, the command line), which owns the store. `workspace`
        or `target` None: the reads cover any (see `Caller`)."""
        if user_id is not None and not isinstance(user_id, str):
            raise InvalidInputError(f"user_id must be a text, got {type(user_id).__name__}")
        named = user_id is not None
        user = user_id if user_id is not None else self.service.params.human_name
        if local and not more:
            return Caller.local(user, named=named, workspace=workspace, target=target)
        return Caller(user, workspace, target, named=named, **more)

    @property
    def memoryos(self) -> bool:
        """Whether the service keeps memory MemoryOS's way."""
        return MEMORYOS_OPERATION in self.service.operations

    @property
    def policy(self) -> str:
        """The memory policy this door's service keeps: `memoryos`, `agent` or `memoryscope`."""
        if self.memoryos:
            return "memoryos"
        return "agent" if self._agent_policy else "memoryscope"

    def _run(self, caller: Caller, operation: str, verb: str, **inputs: Any) -> RunResult:
        """Run `operation` for the caller's user: the one way a verb writes."""
        if not self.service.has_operation(operation):
            known = ", ".join(self.service.operations)
            raise MemoryScopeError(
                f"{verb} runs the operation {operation!r}, which memory_service.{self.service.name} does not define "
                f"(it has: {known}); add it to the config's memory_operations"
            )
        try:
            return self.service.run_operation(
                operation, caller.user_id, target_name=caller.write_target, workspace=caller.write_workspace, **inputs
            )
        except WorkerError as error:
            if isinstance(error.cause, _INPUT_ERRORS):
                raise error.cause from None  # the caller's mistake, whichever worker found it
            raise

    def _require_store(self) -> MemoryStore:
        if self._store is None:
            raise MemoryScopeError(f"{self._source}: this config has no memory_store; the memory verbs need one")
        return self._store

    def _now(self, moment: datetime | str | None, name: str = "time") -> datetime:
        """`moment` (a datetime, or ISO 8601 text as a message's `time` is), else now; naive: the
        config's zone. Anything else is the caller's mistake, named by `name`."""
        zone = self.settings.tzinfo
        given = parse_time(name, moment, zone)
        return datetime.now(zone) if given is None else given

    def _reaches(self, caller: Caller, user_id: str, workspace: str) -> bool:
        if caller.reach is not None:
            return caller.reach.permits(user_id, workspace)
        return user_id == caller.user_id and (caller.workspace is None or workspace == caller.workspace)

    def _reachable(self, caller: Caller, memory_ids: list[str]) -> list[MemoryNode]:
        """The memories among `memory_ids` this caller reaches: its own through the store's
        filter; for a caller that reaches other users (an admin, a local process), by owner."""
        ids = [memory_id for memory_id in dict.fromkeys(memory_ids) if isinstance(memory_id, str) and memory_id]
        if not ids:
            return []
        store = self._require_store()
        if caller.reach is None:
            return store.scan(caller.memory_filter(status=None, memory_ids=tuple(ids), any_target=True), limit=len(ids))
        return [node for node in store.get(ids) if caller.reach.permits(node.user_name, node.workspace)]

    def _owned(self, caller: Caller, memory_id: str) -> tuple[Caller, MemoryNode]:
        """The caller's memory with this id and the caller acting as its owner; not found otherwise."""
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise InvalidInputError("give the id of a memory (get_all lists them)")
        found = self._reachable(caller, [memory_id.strip()])
        if not found:
            raise MemoryNotFoundError(memory_id)
        node = found[0]
        return replace(caller.for_user(node.user_name, node.workspace), target=node.target_name), node

    def _owners(self, caller: Caller, *, with_state: bool = False) -> list[Caller]:
        """The caller as each exact owner it covers: one per target and workspace of its user's
        memories (and, `with_state`, of its state records, such as an agent's blocks) that its
        `target` and `workspace` reach (None: any). An exact caller is its one owner."""
        if not caller.widened:
            return [caller]
        store = self._require_store()
        pairs: set[tuple[str, str]] = set()
        scope, offset = caller.memory_filter(status=None), 0
        while True:
            page = store.scan(scope, limit=_OWNER_PAGE, offset=offset)
            pairs.update((node.target_name, node.workspace) for node in page)
            if len(page) < _OWNER_PAGE:
                break
            offset += len(page)
        if with_state:
            for batch in store.iter_state(user_name=caller.user_id, batch_size=_OWNER_PAGE):
                held = {(record.key.owner.target_name, record.key.owner.workspace) for record in batch}
                pairs.update(pair for pair in held if caller.covers(*pair))
        return [replace(caller, target=target, workspace=workspace) for target, workspace in sorted(pairs)]

    def _by_owner(self, caller: Caller, nodes: list[MemoryNode]) -> dict[Caller, list[str]]:
        owners: dict[Caller, list[str]] = {}
        for node in nodes:
            owner = replace(caller.for_user(node.user_name, node.workspace), target=node.target_name)
            owners.setdefault(owner, []).append(node.memory_id)
        return owners

    def _record(self, node: MemoryNode) -> MemoryRecord:
        return record_of(node, self.settings.language, self.settings.tzinfo)

    def _records(self, nodes: Sequence[MemoryNode]) -> list[MemoryRecord]:
        return [self._record(node) for node in nodes]

    def _record_by_id(self, memory_id: str) -> MemoryRecord:
        found = self._require_store().get([memory_id])
        if not found:
            raise MemoryNotFoundError(memory_id)
        return self._record(found[0])


def conditions(filters: Mapping[str, Any] | None) -> tuple[MetadataCondition, ...]:
    """Metadata filters read (a bad one is the caller's mistake, not the store's failure)."""
    try:
        return metadata_conditions(filters)
    except StoreError as error:
        raise InvalidFilterError(str(error), code="invalid_filter") from None
