"""The memory node: one record of what is known about a user, and how it is shown."""

from __future__ import annotations

import dataclasses
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any, ClassVar

from memoryscope.memory_types import MemoryType

__all__ = [
    "MemoryNode",
    "MemoryType",
    "MemoryTypeName",
    "MemoryStatus",
    "new_memory_id",
    "format_time",
    "utc_now",
    "searchable_text",
    "embedding_text",
    "embedding_text_of",
    "caller_metadata",
    "node_of_checked_fields",
    "is_own_meta_key",
]


# Which type a memory is: a registry open to every capability (`memoryscope.memory_types`).
# The name of a type in a schema (REST, MCP): checked against the registry when a request comes.
MemoryTypeName = MemoryType


class MemoryStatus(str, Enum):
    VALID = "valid"
    EXPIRED = "expired"


# Chinese, Japanese or Korean script: such a message is embedded in the Chinese form
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")

_WEEKDAYS = {
    "en": ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"),
    "zh": ("周一", "周二", "周三", "周四", "周五", "周六", "周日"),
}


def searchable_text(node: MemoryNode) -> str:
    """What keyword search matches a memory on: its own words and the words around it (see
    `searchable_parts`), as one text."""
    return "\n".join(part for part in searchable_parts(node) if part)


def searchable_parts(node: MemoryNode) -> tuple[str, str]:
    """`(own, around)`: a memory's content and key; and for a chat message who said it
    (`meta["speaker"]`), the messages it answered (`meta["context"]`) and the one that answered
    it (`meta["reply"]`, see `read_message`). Questions name people and ask about answers
    ("What did Jon say about Paris?"), while a message's own text names neither its speaker nor
    what it replies to; rankers may weigh the words around a message below its own."""
    return parts_of(searchable_fields(node))


# The meta entries of a chat message that keyword search sees around its own words.
AROUND_META = ("speaker", "context", "reply")  # spelt out in `searchable_fields` too
# The meta entries MemoryScope writes itself: a chat message's role, speaker and neighbours
# (`read_message`), which worker drew an observation and how its time was read
# (`get_observation*`), the observations an insight came from (`update_insight`), and
# consolidation's retry bookkeeping (`consolidation_*`, `memoryscope.message_retries`), and whether
# the memory is pinned (only the `pin` and `unpin` verbs set it). A worker that keeps something new
# in `meta` names it here. The rest of `meta` is the caller's metadata (`MemoryScope.add(...,
# metadata=...)`).
OWN_META = frozenset({"role", *AROUND_META, "worker", "time_source", "time_text", "observation_ids", "pinned"})
# consolidation's retry bookkeeping; MemoryOS's tiers (a page's tier and segment, a segment's
# keywords and heat inputs: workers/_memoryos.py)
_BOOKKEEPING_PREFIX = ("consolidation_", "memoryos_")


def caller_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """The entries of `meta` a caller gave (not the ones MemoryScope keeps itself)."""
    return {key: value for key, value in meta.items() if key not in OWN_META and not key.startswith(_BOOKKEEPING_PREFIX)}


def is_own_meta_key(key: str) -> bool:
    """Whether MemoryScope writes meta entry `key` itself (a caller may not set it)."""
    return key in OWN_META or key.startswith(_BOOKKEEPING_PREFIX)


def searchable_fields(node: MemoryNode) -> tuple[Any, ...]:
    """The raw values `searchable_parts` is made of, cheap to take and hashable (meta that is
    not text is left out, as `searchable_parts` leaves it): a cache key for rankers."""
    meta = node.meta
    # AROUND_META spelt out: this runs for every candidate of every ranking
    speaker, context, reply = meta.get("speaker"), meta.get("context"), meta.get("reply")
    return (
        node.content,
        node.key,
        speaker if isinstance(speaker, str) else None,
        context if isinstance(context, str) else None,
        reply if isinstance(reply, str) else None,
    )


def parts_of(fields: tuple[Any, ...]) -> tuple[str, str]:
    """`searchable_parts` from `searchable_fields` (written out: ~4x faster than joining generators)."""
    content, key, speaker, context, reply = fields
    own = f"{content}\n{key}" if content and key else content or key
    around = [value for value in (speaker, context, reply) if value and isinstance(value, str)]
    return own, "\n".join(around)


def embedding_text(node: MemoryNode) -> str:
    """What a memory's vector is made from: a chat message as a sentence about its speaker
    (`Jon said, "..."`), anything else its content.

    Questions about a person ask for what that person said, so the speaker is embedded with the
    message; and as a sentence rather than a transcript line ("Jon: ..."), which the embedding
    model reads far better: on LoCoMo, plain dense recall@10 of the evidence turns of multi-hop
    questions rose from 0.28 to 0.43 with nothing else changed (benchmarks/README.md, §1).
    """
    return embedding_text_of(node.content, node.meta)


def embedding_text_of(content: str, meta: dict[str, Any]) -> str:
    """`embedding_text` from a memory's content and meta (for stores that read raw columns)."""
    speaker = meta.get("speaker")
    if not isinstance(speaker, str) or not speaker:
        return content
    if _CJK.search(content):
        return f"{speaker}说：“{content}”"
    return f'{speaker} said, "{content}"'


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def new_memory_id() -> str:
    return uuid.uuid4().hex


def format_time(moment: datetime, language: str = "en", tz: Any = None) -> str:
    """`2024-10-26 21:26:20 Sat` (or `周六` for zh), in `tz` when given."""
    local = moment.astimezone(tz) if tz is not None else moment
    weekday = _WEEKDAYS.get(language, _WEEKDAYS["en"])[local.weekday()]
    return f"{local:%Y-%m-%d %H:%M:%S} {weekday}"


def _require_aware(name: str, value: datetime | None) -> None:
    if value is not None and value.tzinfo is None:
        raise ValueError(f"MemoryNode.{name} must be timezone-aware, got naive {value!r}")


@dataclass(frozen=True)
class MemoryNode:
    """One memory. Immutable: change it with `replace(...)`.

    `user_name` + `target_name` + `workspace` isolate memories: a search for one user never sees
    another's. `event_time` is when the fact happened (when known), `message_time` when it was
    said. `score` is filled by searches and ranking only; vectors stay in the store.

    `rank_terms` is not a field: a store that keeps a memory's ranker terms (parsed once, when
    written: `memoryscope.text.rank_terms`) hands them over on the nodes it decodes, so no query
    parses a memory again. It is None on every other node (the class default), is not compared,
    shown or exported, and survives `with_score` (the same memory) but not `replace` (maybe not).
    """

    rank_terms: ClassVar[str | None] = None

    user_name: str
    content: str
    memory_type: MemoryType = MemoryType.OBSERVATION
    target_name: str = ""
    workspace: str = ""
    memory_id: str = field(default_factory=new_memory_id)
    key: str = ""
    value: str = ""
    status: MemoryStatus = MemoryStatus.VALID
    superseded_by: str = ""
    created_at: datetime = field(default_factory=utc_now)
    updated_at: datetime = field(default_factory=utc_now)
    event_time: datetime | None = None
    message_time: datetime | None = None
    source_message_ids: tuple[str, ...] = ()
    reflected: bool = False
    updated: bool = False
    access_count: int = 0
    last_accessed_at: datetime | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    score: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.memory_type, MemoryType):
            object.__setattr__(self, "memory_type", MemoryType(self.memory_type))
        if not isinstance(self.status, MemoryStatus):
            object.__setattr__(self, "status", MemoryStatus(self.status))
        if not isinstance(self.source_message_ids, tuple):
            object.__setattr__(self, "source_message_ids", tuple(self.source_message_ids))
        for name in ("created_at", "updated_at", "event_time", "message_time", "last_accessed_at"):
            _require_aware(name, getattr(self, name))

    def replace(self, **changes: Any) -> MemoryNode:
        return dataclasses.replace(self, **changes)

    def with_score(self, score: float) -> MemoryNode:
        """A copy carrying `score`; the fields are copied as they are (already checked) in one
        step, their dict, ~10x faster than `replace`: search and ranking copy ~240 memories per
        query. (Why `MemoryNode` has no `__slots__`: copying slot by slot costs twice as much.)"""
        fields = self.__dict__.copy()
        fields["score"] = score
        node = _new_node(MemoryNode)  # `node_of_checked_fields`, inlined: ~240 copies a query
        _set_attribute(node, "__dict__", fields)
        return node

    @property
    def shown_time(self) -> datetime:
        """The time a person sees beside the memory: for a chat message when it was said (its
        words, "yesterday I ...", are relative to that); for anything else when it happened, else
        when it was said."""
        if self.memory_type is MemoryType.CONVERSATION and self.message_time is not None:
            return self.message_time
        return self.event_time or self.message_time or self.created_at

    def format(self, language: str = "en", tz: Any = None) -> str:
        """`[2024-10-26 21:26:20 Sat] user plays the guitar`."""
        return f"[{format_time(self.shown_time, language, tz)}] {self.content}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (times as ISO 8601 strings, enums as their values)."""
        out: dict[str, Any] = {}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, Enum):
                value = value.value
            elif isinstance(value, tuple):
                value = list(value)
            out[item.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryNode:
        """Inverse of `to_dict`; unknown keys are an error, naming them."""
        known = {item.name for item in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown memory fields {unknown}; known: {sorted(known)}")
        values = dict(data)
        if isinstance(values.get("memory_type"), str) and values["memory_type"]:
            # as written: a type registered by a capability not loaded in this process is still read
            values["memory_type"] = MemoryType.stored(values["memory_type"])
        for name in ("created_at", "updated_at", "event_time", "message_time", "last_accessed_at"):
            if isinstance(values.get(name), str):
                values[name] = datetime.fromisoformat(values[name])
        return cls(**values)


_new_node = object.__new__
_set_attribute = object.__setattr__


def node_of_checked_fields(fields: dict[str, Any]) -> MemoryNode:
    """A node holding `fields`, taken as they are: every field of `MemoryNode` present and of its
    type (enums, tuples, aware datetimes), as a store decoding its own rows makes them. Skips
    `__init__`'s per-field stores and `__post_init__`'s checks: twice as fast, and a store decodes
    ~120 rows for a retrieve it has not seen before. `fields` becomes the node's: do not keep it."""
    node = _new_node(MemoryNode)
    _set_attribute(node, "__dict__", fields)  # a frozen dataclass's own __setattr__ refuses
    return node
