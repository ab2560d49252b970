"""The simple memory API on `MemoryScope`: the verbs users of other memory libraries know.

    ms.add("I moved to Hangzhou last week", user_id="lin")       # kept; consolidation extracts facts
    ms.add([{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}], user_id="lin")
    ms.add("prefers tea", user_id="lin", infer=False, metadata={"source": "crm"})  # stored as given
    hits = ms.search("where does Lin live?", user_id="lin", top_k=5, filters={"source": "crm"})
    hits[0].id, hits[0].memory, hits[0].score, hits[0].text    # text: "[2024-10-26 21:26:20 Sat] ..."
    ms.get(memory_id); ms.get_all(user_id="lin", filters={"rating": {"gte": 3}})
    ms.update(memory_id, text="prefers green tea", metadata={"rating": 5})   # re-embedded
    ms.delete(memory_id); ms.delete_all(user_id="lin"); ms.history(memory_id)

`infer=True` stores the messages as the conversation (the configured `read_message` operation),
and consolidation draws observations from them in the background, as a chat's messages;
`infer=False` stores each text as one memory of the user's own (`obs_customized`), no LLM
involved. `search` runs the configured retrieval (`retrieve_memory`: the same search, ranking and
time handling a chat gets), narrowed by `filters` (see `memoryscope.stores.metadata`), `types`
and `time_range`. Metadata lives in the memory's `meta`; the keys MemoryScope itself keeps there
(`role`, `speaker`, `context`, `reply`, `consolidation_*`) cannot be set. Observations drawn
from messages carry the messages' metadata, so a filter finds what was learnt from them too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memoryscope.context import Message, SearchFilter
from memoryscope.errors import MemoryScopeError, StoreError
from memoryscope.history import ChangeSource, MemoryChange
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType, caller_metadata, is_own_meta_key
from memoryscope.stores.base import MemoryFilter, MemoryStore, TimeRange
from memoryscope.stores.metadata import metadata_conditions

if TYPE_CHECKING:
    from memoryscope.config import Config
    from memoryscope.service import MemoryService

__all__ = ["MemoryApi", "MemoryRecord", "MemoryNotFoundError"]
_PAGE = 500
# What `get_all` lists when no types are asked for: every memory but an agent's saved state (its
# message queue and counters: a working copy, not something known about the user).
_LISTED_BY_DEFAULT = tuple(member for member in MemoryType if member is not MemoryType.AGENT_STATE)
MessagesIn = str | Message | Mapping[str, Any] | Sequence[str | Message | Mapping[str, Any]]


class MemoryNotFoundError(StoreError, LookupError):
    """No memory has the id asked for."""

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        super().__init__(f"no memory has the id {memory_id!r} (list them with get_all or `memoryscope run list_memory`)")


@dataclass(frozen=True)
class MemoryRecord:
    """One memory as the simple API returns it. `memory` is its text, `text` the time-stamped line
    a person or an LLM sees; `score` is set by `search` (higher is better); `node` is the full
    `MemoryNode`."""

    id: str
    memory: str
    user_id: str
    memory_type: str
    status: str
    superseded_by: str | None  # an expired memory: the id of the memory that replaced it
    score: float | None
    text: str
    time: datetime
    created_at: datetime
    updated_at: datetime
    event_time: datetime | None
    message_time: datetime | None
    role: str | None
    metadata: dict[str, Any]
    node: MemoryNode = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (times as ISO 8601 texts)."""
        out: dict[str, Any] = {}
        for name in MemoryRecord.__dataclass_fields__:
            if name == "node":
                continue
            value = getattr(self, name)
            out[name] = value.isoformat() if isinstance(value, datetime) else value
        return out


class MemoryApi:
    """The simple verbs, mixed into `MemoryScope` (which provides the attributes below)."""

    config: Config
    store: MemoryStore | None
    services: dict[str, MemoryService]
    chats: dict[str, Any]
    if TYPE_CHECKING:

        @property
        def default_service(self) -> MemoryService: ...

    # -- writing -----------------------------------------------------------------------------

    def add(
        self,
        messages: MessagesIn,
        user_id: str | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        infer: bool = True,
        time: datetime | None = None,
        target_name: str = "",
        workspace: str = "",
    ) -> list[MemoryRecord]:
        """Remember `messages`: a text, a message (`{"role", "content"}`, optionally `"time"` and
        `"name"`, or a `Message`) or a list of them, for `user_id` (default: the service's
        `human_name`). `time` is when they were said (default now; a message's own time wins).

        `infer=True`: kept as the conversation (user and assistant messages alike), and
        consolidation extracts what matters about the user from them (right away when enough
        messages wait, as configured). `infer=False`: each text is stored as one memory, as given.
        `metadata` is kept with every memory stored (filter on it in `search` and `get_all`).
        Returns the memories stored (a message already stored is not stored again)."""
        user = self._user(user_id)
        extra = _checked_metadata(metadata)
        said = _messages(messages, self._aware(time), extra)
        if not infer:
            nodes = [_memory_of(message, user, target_name, workspace) for message in said]
            store = self._store()
            store.upsert(nodes, change=ChangeSource("add"))
            # read back, so a record's times are as every later read gives them (the store's zone)
            stored = {node.memory_id: node for node in store.get([node.memory_id for node in nodes])}
            return [_record(stored.get(node.memory_id, node), self._settings) for node in nodes]
        service = self.default_service
        operation = self._operation("store_operation", "read_message", "add(infer=True)")
        result = service.run_operation(operation, user, messages=tuple(said), target_name=target_name, workspace=workspace)
        ids = list(result.context.stored_message_ids or ())
        return [_record(node, self._settings) for node in self._store().get(ids)]

    def update(self, memory_id: str, text: str | None = None, *, metadata: Mapping[str, Any] | None = None) -> MemoryRecord:
        """Change a memory's text (it is embedded again) and/or metadata: the keys given are set,
        a key given as None is removed, the others are kept. Kept in its history."""
        if text is None and metadata is None:
            raise MemoryScopeError("update needs text= or metadata= (or both)")
        if text is not None and not text.strip():
            raise MemoryScopeError("update: text= is empty; delete the memory instead")
        node = self._node(memory_id)
        changes: dict[str, Any] = {}
        if text is not None:
            changes["content"] = text.strip()
        if metadata is not None:
            merged = dict(node.meta)
            for key, value in _checked_metadata(metadata, allow_none=True).items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            changes["meta"] = merged
        return _record(self._store().update(memory_id, **changes), self._settings)

    def delete(self, memory_id: str) -> bool:
        """Delete one memory; False when no memory has that id."""
        return self._store().delete([memory_id], change=ChangeSource("delete_memory")) > 0

    def delete_all(self, user_id: str | None = None, *, target_name: str = "", workspace: str = "") -> int:
        """Delete every memory of `user_id` (in that target and workspace), an agent's core memory
        and saved state included; returns how many."""
        scope = MemoryFilter(user_name=self._user(user_id), target_name=target_name, workspace=workspace)
        return self._store().delete_by_filter(scope, change=ChangeSource("delete_all"))

    # -- reading -----------------------------------------------------------------------------

    def search(
        self,
        query: str,
        user_id: str | None = None,
        *,
        top_k: int = 10,
        filters: Mapping[str, Any] | None = None,
        types: Sequence[MemoryType | str] | None = None,
        time_range: TimeRange | tuple[datetime | None, datetime | None] | None = None,
        query_time: datetime | None = None,
        target_name: str = "",
        workspace: str = "",
    ) -> list[MemoryRecord]:
        """The `top_k` memories of `user_id` that best answer `query`, best first, with scores.

        `filters` on metadata (`{"source": "crm", "rating": {"gte": 3}}`), `types` of memory
        (`observation`, `insight`, `conversation`, `obs_customized`; an agent's `core_memory` and
        `agent_state` are never retrieved, `get_all` lists them; under the `memoryos` config the
        search is MemoryOS's pack of `memoryos_*` records, narrowed by `types` only), `time_range` a
        `TimeRange` or `(start, end)` on when each memory was said (`message_time`; either end
        may be None). `query_time` is when the question is asked ("last week" is relative to it)."""
        if not query or not query.strip():
            raise MemoryScopeError("search needs a query; get_all lists memories without one")
        if top_k < 1:
            raise MemoryScopeError(f"search: top_k must be 1 or more, got {top_k}")
        narrowed = SearchFilter(
            memory_types=_memory_types(types), time_range=_time_range(time_range), metadata=metadata_conditions(filters)
        )
        operation = self._operation("retrieve_operation", "retrieve_memory", "search")
        result = self.default_service.run_operation(
            operation,
            self._user(user_id),
            query=query,
            query_time=self._aware(query_time),
            search_filter=narrowed,
            top_k=top_k,
            target_name=target_name,
            workspace=workspace,
        )
        return [_record(node, self._settings) for node in result.context.memories[:top_k]]

    def get(self, memory_id: str) -> MemoryRecord | None:
        """The memory with this id, or None."""
        found = self._store().get([memory_id])
        return _record(found[0], self._settings) if found else None

    def get_all(
        self,
        user_id: str | None = None,
        *,
        filters: Mapping[str, Any] | None = None,
        types: Sequence[MemoryType | str] | None = None,
        include_expired: bool = False,
        limit: int | None = None,
        target_name: str = "",
        workspace: str = "",
    ) -> list[MemoryRecord]:
        """`user_id`'s memories, newest first: all of them, or the first `limit`; only those whose
        metadata passes `filters` and of `types`, when given. Expired memories (replaced by newer
        ones) only with `include_expired`. Without `types`, an agent's core memory blocks and
        MemoryOS's records (`memoryos_page`, `memoryos_segment`, `memoryos_profile`,
        `memoryos_knowledge`) are listed and an agent's saved state (`agent_state`) is not: ask
        for that type to see it."""
        if limit is not None and limit < 0:
            raise MemoryScopeError(f"get_all: limit must be 0 or more, got {limit}")
        scope = MemoryFilter(
            user_name=self._user(user_id),
            target_name=target_name,
            workspace=workspace,
            memory_types=_LISTED_BY_DEFAULT if types is None else _memory_types(types),
            status=None if include_expired else MemoryStatus.VALID,
            metadata=metadata_conditions(filters),
        )
        store, records = self._store(), list[MemoryRecord]()
        while limit is None or len(records) < limit:
            page_size = _PAGE if limit is None else min(_PAGE, limit - len(records))
            page = store.scan(scope, limit=page_size, offset=len(records), newest_first=True)
            records += [_record(node, self._settings) for node in page]
            if len(page) < page_size:
                break
        return records

    def history(self, memory_id: str) -> list[MemoryChange]:
        """Every change to one memory, oldest first: added, updated, expired, deleted, by what
        operation and run (`memoryscope undo RUN_ID` takes a run back)."""
        return self._store().history(memory_id=memory_id)

    # -- pieces ------------------------------------------------------------------------------

    @property
    def _settings(self) -> Any:
        return self.config.settings

    def _store(self) -> MemoryStore:
        if self.store is None:
            raise MemoryScopeError(f"{self.config.source}: this config has no memory_store; the memory API needs one")
        return self.store

    def _user(self, user_id: str | None) -> str:
        if user_id is not None and not str(user_id).strip():
            raise MemoryScopeError("user_id is empty; give the user's id, or leave it out for the default user")
        return str(user_id) if user_id is not None else self.default_service.params.human_name

    def _aware(self, moment: datetime | None) -> datetime:
        zone = self._settings.tzinfo
        if moment is None:
            return datetime.now(zone)
        return moment.replace(tzinfo=zone) if moment.tzinfo is None else moment

    def _node(self, memory_id: str) -> MemoryNode:
        found = self._store().get([memory_id])
        if not found:
            raise MemoryNotFoundError(memory_id)
        return found[0]

    def _operation(self, chat_param: str, default: str, verb: str) -> str:
        """The operation a chat of this config uses for `chat_param` (else `default`), checked to exist."""
        chats = self.chats
        name = getattr(next(iter(chats.values())).params, chat_param, default) if chats else default
        service = self.default_service
        if name not in service.operations:
            known = ", ".join(service.operations)
            raise MemoryScopeError(
                f"{verb} runs the operation {name!r}, which memory_service.{service.name} does not define "
                f"(it has: {known}); add it to the config's memory_operations"
            )
        return str(name)


def _record(node: MemoryNode, settings: Any) -> MemoryRecord:
    role = node.meta.get("role")
    return MemoryRecord(
        id=node.memory_id,
        memory=node.content,
        user_id=node.user_name,
        memory_type=node.memory_type.value,
        status=node.status.value,
        superseded_by=node.superseded_by or None,
        score=node.score,
        text=node.format(settings.language, settings.tzinfo),
        time=node.shown_time,
        created_at=node.created_at,
        updated_at=node.updated_at,
        event_time=node.event_time,
        message_time=node.message_time,
        role=role if isinstance(role, str) else None,
        metadata=caller_metadata(node.meta),
        node=node,
    )


def _memory_of(message: Message, user: str, target_name: str, workspace: str) -> MemoryNode:
    meta = dict(message.metadata)
    if message.role != "user":
        meta["role"] = message.role
    return MemoryNode(
        user_name=user,
        target_name=target_name,
        workspace=workspace,
        memory_type=MemoryType.OBS_CUSTOMIZED,
        content=message.content,
        message_time=message.time,
        meta=meta,
    )


def _messages(given: MessagesIn, default_time: datetime, metadata: dict[str, Any]) -> list[Message]:
    items: Sequence[Any] = [given] if isinstance(given, str | Message | Mapping) else given
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise MemoryScopeError(f"add takes a text, a message or a list of them, got {type(given).__name__}")
    messages = [_message(item, index, default_time, metadata) for index, item in enumerate(items)]
    if not any(message.content.strip() for message in messages):
        raise MemoryScopeError("add: nothing to remember (every text is empty)")
    return messages


def _message(item: Any, index: int, default_time: datetime, metadata: dict[str, Any]) -> Message:
    where = f"add: message {index}"
    if isinstance(item, Message):
        merged = {**metadata, **item.metadata}
        return Message(item.role, item.content, item.time, item.name, item.message_id, merged) if merged else item
    if isinstance(item, str):
        return Message("user", item.strip(), default_time, metadata=metadata)
    if not isinstance(item, Mapping):
        raise MemoryScopeError(f"{where}: expected a text or {{'role': ..., 'content': ...}}, got {type(item).__name__}")
    unknown = sorted(set(item) - {"role", "content", "time", "name"})
    if unknown:
        raise MemoryScopeError(f"{where}: unknown keys {unknown}; a message has role, content, time and name")
    content, role = item.get("content"), item.get("role", "user")
    if not isinstance(content, str):
        raise MemoryScopeError(f"{where}: 'content' must be a text, got {content!r}")
    if role not in ("user", "assistant"):
        raise MemoryScopeError(f"{where}: 'role' must be 'user' or 'assistant', got {role!r}")
    return Message(
        role,
        content.strip(),
        _message_time(item.get("time"), default_time, where),
        str(item.get("name") or ""),
        metadata=metadata,
    )


def _message_time(value: Any, default_time: datetime, where: str) -> datetime:
    if value is None:
        return default_time
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise MemoryScopeError(f"{where}: 'time' {value!r} is not an ISO 8601 time (2024-10-26T21:26:20+08:00)") from None
    if not isinstance(value, datetime):
        raise MemoryScopeError(f"{where}: 'time' must be a datetime or an ISO 8601 text, got {value!r}")
    return value.replace(tzinfo=default_time.tzinfo) if value.tzinfo is None else value


def _checked_metadata(metadata: Mapping[str, Any] | None, allow_none: bool = False) -> dict[str, Any]:
    """`metadata` as JSON-ready meta entries (datetimes as ISO texts); a bad one names its key."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise MemoryScopeError(f"metadata must be a mapping of key to value, got {type(metadata).__name__}")
    checked: dict[str, Any] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not key:
            raise MemoryScopeError(f"metadata keys must be non-empty texts, got {key!r}")
        if is_own_meta_key(key):
            raise MemoryScopeError(f"metadata key {key!r} is MemoryScope's own; use another name")
        if value is None and not allow_none:
            raise MemoryScopeError(f"metadata {key!r} is None; leave the key out instead")
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise MemoryScopeError(f"metadata {key!r}: give a timezone-aware datetime, got naive {value!r}")
            value = value.isoformat()
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise MemoryScopeError(
                f"metadata {key!r}: {type(value).__name__} cannot be stored; use texts, numbers, booleans, lists or dicts"
            ) from None
        checked[key] = value
    return checked


def _memory_types(types: Sequence[MemoryType | str] | None) -> tuple[MemoryType, ...] | None:
    if types is None:
        return None
    if isinstance(types, str | MemoryType):
        types = [types]
    known = ", ".join(member.value for member in MemoryType)
    chosen = []
    for name in types:
        try:
            chosen.append(MemoryType(name))
        except ValueError:
            raise MemoryScopeError(f"unknown memory type {name!r}; use one of {known}") from None
    return tuple(dict.fromkeys(chosen))


def _time_range(given: TimeRange | tuple[datetime | None, datetime | None] | None) -> TimeRange | None:
    if given is None or isinstance(given, TimeRange):
        return given
    if not isinstance(given, tuple | list) or len(given) != 2:
        raise MemoryScopeError(f"time_range must be a TimeRange or (start, end), got {given!r}")
    start, end = given
    for name, moment in (("start", start), ("end", end)):
        if moment is not None and (not isinstance(moment, datetime) or moment.tzinfo is None):
            raise MemoryScopeError(f"time_range {name} must be a timezone-aware datetime or None, got {moment!r}")
    return TimeRange(field="message_time", start=start, end=end)
