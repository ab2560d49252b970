"""The typed context that workers of one workflow run share.

One `MemoryContext` is made per run (concurrent runs share nothing). Workers declare which
fields they `reads` and `writes`; the workflow check proves every field read was given by the
caller or written by an earlier step, and the runner's checking mode
(`MEMORYSCOPE_CHECK_WORKER_IO=1`, see `memoryscope.workflow.io_check`) fails a step that reads or
writes a field its worker does not declare. Every field but `ALWAYS_READABLE` must be declared.
Values are immutable (tuples, frozen nodes), so parallel branches can work on shallow forks of
the context and be merged field by field.

What one layer tells another travels in typed fields (`stored_message_ids`, `unknown_memory_ids`,
`store_outcome`, ...). `details` holds only what each worker says about its own run, under its
name (`details["info_filter"]["llm_calls"]`): numbers and ids for people and logs, which no other
step and no caller reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from memoryscope.history import UndoPlan
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.stores.base import TimeRange
from memoryscope.stores.metadata import MetadataCondition

__all__ = [
    "MemoryContext",
    "Message",
    "TextVector",
    "SearchFilter",
    "StoreOutcome",
    "CONTEXT_FIELDS",
    "ContextField",
    "context_field",
    "context_extensions",
    "CALLER_FIELDS",
    "RUNNER_FIELDS",
    "ALWAYS_READABLE",
]


@dataclass(frozen=True)
class Message:
    """One chat message as handed to MemoryScope: who said what, and when."""

    role: str  # "user" | "assistant" | "system"
    content: str
    time: datetime
    name: str = ""  # the speaker's name, when the chat has several people
    message_id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)  # kept in the stored memory's meta


@dataclass(frozen=True)
class TextVector:
    """A text the caller already embedded with the store's embedding model, as a query or as a
    passage (for a memory, `memoryscope.memory.embedding_text`). A step that would embed exactly
    this text the same way uses the vector instead; any other text is embedded as usual."""

    text: str
    vector: np.ndarray = field(compare=False)
    is_query: bool


@dataclass(frozen=True)
class SearchFilter:
    """What a caller narrows a retrieval to (the simple API's `search`): only these kinds of
    memory, only this time range, only memories whose metadata passes these conditions. And the
    one way it is wider than the run's scope: `any_target` / `any_workspace`, the user's memories
    of every target / workspace (a door caller with `target=None` / `workspace=None`)."""

    memory_types: tuple[MemoryType, ...] | None = None
    time_range: TimeRange | None = None
    metadata: tuple[MetadataCondition, ...] = ()
    any_target: bool = False
    any_workspace: bool = False


@dataclass(frozen=True)
class StoreOutcome:
    """What `store_memory` wrote, in numbers (its `result` says it in words)."""

    observations: int = 0  # new observations stored
    insights: int = 0  # insights created or changed
    expired: int = 0  # memories marked expired
    messages: int = 0  # pending messages marked consolidated
    pending: int = 0  # messages left pending: the facts drawn from them stayed unreadable
    reflected: int = 0  # observations marked reflected on
    written: int = 0  # nodes written in the one atomic write
    memory_ids: tuple[str, ...] = ()  # the ids of those nodes
    dropped: int = 0  # nodes left out: deleted meanwhile (a user's delete is never undone)
    pinned_kept: int = 0  # expiries and insight updates of pinned memories left out


@dataclass
class MemoryContext:
    """Everything a workflow run knows. Caller fields first, then what workers derive."""

    # -- given by the caller (see CALLER_FIELDS) --
    user_name: str
    target_name: str = ""
    workspace: str = ""
    query: str = ""
    query_time: datetime | None = None
    query_vector: np.ndarray | None = None  # precomputed query embedding, when the caller has one
    messages: tuple[Message, ...] = ()  # new chat messages to remember
    memory_ids: tuple[str, ...] = ()  # for delete_memory
    new_memories: tuple[str | Message, ...] = ()  # add_memory: texts, or messages (with their time, role, metadata)
    new_metadata: dict[str, Any] | None = None  # update_memory: metadata keys to set (None values remove theirs)
    undo_run_id: str = ""  # undo_run: the run whose changes to revert
    chat_history: tuple[Message, ...] = ()  # the chat's recent turns before the query, oldest first
    embedded: tuple[TextVector, ...] = ()  # texts already embedded (a chat turn's query and message)
    retry_failed: bool = False  # consolidate_memory: take messages parked or backing off after failures too
    search_filter: SearchFilter | None = None  # retrieval: only memories of these kinds, times and metadata
    top_k: int = 0  # retrieval: how many memories to answer with (0: as configured)
    # -- written by workers --
    time_range: TimeRange | None = None  # when the query is about (extract_time)
    retrieved: tuple[MemoryNode, ...] = ()  # candidates from the store
    ranked: tuple[MemoryNode, ...] = ()  # candidates re-scored by the rank model
    memories: tuple[MemoryNode, ...] = ()  # the operation's answer: memories, best first
    # consolidate_memory
    pending_messages: tuple[MemoryNode, ...] = ()  # conversation memories not yet consolidated
    informative_messages: tuple[MemoryNode, ...] = ()  # those worth remembering (info_filter)
    observations: tuple[MemoryNode, ...] = ()  # facts from messages without a time (get_observation)
    timed_observations: tuple[MemoryNode, ...] = ()  # facts with an event time (get_observation_with_time)
    today_memories: tuple[MemoryNode, ...] = ()  # what is already known from today (load_memory)
    new_observations: tuple[MemoryNode, ...] = ()  # checked new facts to store (contra_repeat)
    expired_memories: tuple[MemoryNode, ...] = ()  # old memories to mark expired, with superseded_by set
    # reflect_and_reconsolidate
    unreflected_observations: tuple[MemoryNode, ...] = ()  # observations not yet reflected on (load_memory)
    insights: tuple[MemoryNode, ...] = ()  # the user's current insights (load_memory)
    insight_subjects: tuple[str, ...] = ()  # new profile attributes to learn (get_reflection_subject)
    updated_insights: tuple[MemoryNode, ...] = ()  # new and changed insights (update_insight)
    # messages whose facts stayed unreadable after one repair request: left pending, retried later
    unreadable_message_ids: tuple[str, ...] = ()  # by get_observation
    unreadable_timed_message_ids: tuple[str, ...] = ()  # by get_observation_with_time
    store_outcome: StoreOutcome = StoreOutcome()  # what store_memory wrote (frozen: one default serves all)
    # read_message: the memory ids of the messages stored new (not those stored before); None
    # when no step of the run stores messages
    stored_message_ids: tuple[str, ...] | None = None
    # update_memory
    added_memory_ids: tuple[str, ...] = ()  # the memories add_memory made
    deleted_memory_ids: tuple[str, ...] = ()  # the user's memories delete_memory was asked to delete
    unknown_memory_ids: tuple[str, ...] = ()  # ids delete_memory was given that name no memory of the user's
    deleted_count: int = 0  # how many memories delete_memory or delete_all deleted
    updated_memory_ids: tuple[str, ...] = ()  # the memories update_memory (update, pin, unpin) changed
    undo_plan: UndoPlan | None = None  # what undo_run did: restored, deleted, refused, already undone
    undo_of_run: str = ""  # the id undo_run recorded its own changes under
    # (a capability's own fields, MemoryOS's tiers among them, are declared in its package with
    # `context_field`: see workers/_memoryos.py)
    result: str = ""  # a readable summary of what the operation did
    # each worker's own numbers for people and logs, under its name; no other step or layer reads them
    details: dict[str, Any] = field(default_factory=dict)
    stop_reason: str = ""
    # -- set by the workflow runner, for every step --
    operation: str = ""  # the operation this run is
    on_demand: bool = False  # asked for now (not fired by a trigger): thresholds that gate automatic runs do not apply
    run_id: str = ""  # this run's id: kept with every change it makes (memory history, `memoryscope undo`)

    if TYPE_CHECKING:
        # A capability's own fields (`context_field`) are read and written as attributes too; the
        # workflow check and the worker I/O check hold them to their declarations at run time.
        def __getattr__(self, name: str) -> Any: ...

        def __setattr__(self, name: str, value: Any) -> None: ...

    def stop(self, reason: str) -> None:
        """Ask the runner to end the workflow after the current step, with `reason`."""
        self.stop_reason = reason

    def fork(self) -> MemoryContext:
        """A shallow copy for one parallel branch (its own `details` dict)."""
        # Not `dataclasses.replace`: a fork is made per branch per run, and __init__ costs ten times more.
        forked = object.__new__(type(self))
        forked.__dict__.update(self.__dict__, details=dict(self.details))
        return forked


@dataclass(frozen=True)
class ContextField:
    """A field a capability adds to the context: its name, its default, what it holds, whose it is."""

    name: str
    default: Any
    description: str
    owner: str


_CORE_FIELDS: frozenset[str] = frozenset(item.name for item in dataclasses.fields(MemoryContext))
_EXTENSIONS: dict[str, ContextField] = {}
_IMMUTABLE = (tuple, frozenset, str, bytes, int, float, bool, type(None))


def context_field(name: str, default: Any, description: str, *, owner: str) -> ContextField:
    """Declare a field of the `MemoryContext` for a capability's workers (a memory policy, a
    plugin): `context_field("mood", "", "how the user sounds (detect_mood)", owner="my_plugin")`,
    at import of the module that defines its workers. Workers then declare it in `reads` and
    `writes` like any field, the workflow check holds them to it, and it reads as `default` until
    a step writes it. The default must be immutable (a tuple, a text, a number, None): every run
    starts from it. Declaring the same field again for the same owner is harmless."""
    if not name.isidentifier() or name.startswith("_"):
        raise ValueError(f"context field {name!r}: give a name of letters, digits and '_' that does not start with '_'")
    if name in _CORE_FIELDS:
        raise ValueError(f"context field {name!r} is MemoryContext's own; pick another name")
    if not isinstance(default, _IMMUTABLE) and not getattr(type(default), "__dataclass_params__", None):
        raise ValueError(f"context field {name!r}: its default must be immutable (a tuple, a text, a number, None)")
    declared = _EXTENSIONS.get(name)
    if declared is not None and declared.owner != owner:
        raise ValueError(f"context field {name!r} is declared already, by {declared.owner!r}; pick another name")
    field_ = ContextField(name, default, description, owner)
    _EXTENSIONS[name] = field_
    setattr(MemoryContext, name, default)  # read until a step writes the instance's own
    return field_


def context_extensions() -> dict[str, ContextField]:
    """Every field capabilities declared, by name."""
    return dict(_EXTENSIONS)


class _FieldNames(AbstractSet[str]):
    """The context's field names: its own and those capabilities declared (so far)."""

    def __contains__(self, name: object) -> bool:
        return name in _CORE_FIELDS or name in _EXTENSIONS

    def __iter__(self) -> Iterator[str]:
        yield from _CORE_FIELDS
        yield from (name for name in _EXTENSIONS if name not in _CORE_FIELDS)

    def __len__(self) -> int:
        return len(_CORE_FIELDS) + len(_EXTENSIONS)


CONTEXT_FIELDS: AbstractSet[str] = _FieldNames()
CALLER_FIELDS: frozenset[str] = frozenset(
    (
        "user_name",
        "target_name",
        "workspace",
        "query",
        "query_time",
        "query_vector",
        "messages",
        "memory_ids",
        "new_memories",
        "new_metadata",
        "undo_run_id",
        "chat_history",
        "embedded",
        "retry_failed",
        "search_filter",
        "top_k",
    )
)
# Set by the workflow runner for every run.
RUNNER_FIELDS: frozenset[str] = frozenset(("operation", "on_demand", "run_id"))
# What every worker may read without declaring it: whose memories the run is about (every store
# access is scoped by them), what the runner set, and whether the run was stopped.
ALWAYS_READABLE: frozenset[str] = frozenset(("user_name", "target_name", "workspace", "stop_reason")) | RUNNER_FIELDS
