"""Memory types: a registry, open to every capability.

    MOOD = register_memory_type("mood", labels={"en": "mood", "zh": "情绪"}, owner="my_package.workers")
    MemoryType("mood") is MOOD      # True: one member per name
    [member.value for member in MemoryType]   # every registered type, in registration order

MemoryScope's own types are registered here (what retrieval, consolidation and reflection read
and write); a capability registers its own in its package, beside its workers (MemoryOS's in
`workers/_memoryos.py`), and a worker that writes a type names it in `writes_memory_types`, so
the plan check (`memoryscope.workflow.plan`) refuses a workflow writing a type nobody registered.
Listings (the CLI's groups, REST and MCP schemas, the playground) read the registry.

A member is a `str` (its name), so it compares equal to its name, serialises as it, and keys
stores and JSON alike. `MemoryType(name)` refuses a name nobody registered (ValueError naming the
known ones): what a face checks a caller's input with. A store reads back whatever type a memory
was written with, registered in this process or not (`MemoryType.stored`): a memory of a
capability not loaded here is still read, listed under its own name, never dropped.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = ["MemoryType", "MemoryTypeSpec", "register_memory_type", "memory_type_spec", "memory_type_specs"]

_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_lock = threading.Lock()


@dataclass(frozen=True)
class MemoryTypeSpec:
    """How a memory type is shown and listed."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)  # language -> the group's header ("en", "zh")
    listed: bool = True  # in listings when no types are asked for
    order: int = 100  # groups are shown by this, then by registration
    owner: str = "memoryscope"  # the package that registered it
    registered: bool = True  # False: met in a store, registered by no capability loaded here

    def label(self, language: str) -> str:
        return self.labels.get(language) or self.labels.get("en") or self.name.replace("_", " ")


class _Registry(type):
    """`MemoryType`'s class: iterating, `in` and `len` go over the registered members."""

    _members: dict[str, MemoryType]
    _specs: dict[str, MemoryTypeSpec]

    def __iter__(cls) -> Iterator[MemoryType]:
        return iter([member for name, member in cls._members.items() if cls._specs[name].registered])

    def __len__(cls) -> int:
        return sum(1 for _ in cls)

    def __contains__(cls, value: object) -> bool:
        return isinstance(value, str) and value in cls._specs and cls._specs[value].registered


class MemoryType(str, metaclass=_Registry):
    """A kind of memory (see the module); the built-in members are class attributes."""

    _members: ClassVar[dict[str, MemoryType]] = {}
    _specs: ClassVar[dict[str, MemoryTypeSpec]] = {}

    CONVERSATION: ClassVar[MemoryType]
    OBSERVATION: ClassVar[MemoryType]
    OBS_CUSTOMIZED: ClassVar[MemoryType]
    INSIGHT: ClassVar[MemoryType]
    CORE_MEMORY: ClassVar[MemoryType]
    AGENT_STATE: ClassVar[MemoryType]
    SOURCE_PASSAGE: ClassVar[MemoryType]

    def __new__(cls, value: Any) -> MemoryType:
        if isinstance(value, MemoryType):
            return value
        member = cls._members.get(value) if isinstance(value, str) else None
        if member is None or not cls._specs[value].registered:
            known = ", ".join(str(known) for known in cls)
            raise ValueError(f"{value!r} is not a memory type; the types are: {known}")
        return member

    @classmethod
    def stored(cls, name: str) -> MemoryType:
        """The member named `name` as a store read it: registered, or made for it (unlisted)."""
        member = cls._members.get(name)
        if member is not None:
            return member
        if not isinstance(name, str) or not name:
            raise ValueError(f"a memory type is a name, got {name!r}")
        with _lock:
            if name not in cls._members:
                cls._specs[name] = MemoryTypeSpec(name, listed=False, owner="", registered=False)
                cls._members[name] = str.__new__(cls, name)
        return cls._members[name]

    @property
    def value(self) -> str:
        """The name (as an Enum member's `.value` was)."""
        return str.__str__(self)

    @property
    def spec(self) -> MemoryTypeSpec:
        return type(self)._specs[self.value]

    def __repr__(self) -> str:
        return f"MemoryType({self.value!r})"

    def __str__(self) -> str:
        return self.value

    def __reduce__(self) -> tuple[Any, ...]:
        return (MemoryType.stored, (self.value,))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """In a pydantic model: a text checked against the registry, its JSON schema an enum of
        the types registered when the schema is made (a server's, after its workers loaded)."""
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(
            cls, core_schema.str_schema(), serialization=core_schema.plain_serializer_function_ser_schema(str)
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> dict[str, Any]:
        return {"type": "string", "enum": [member.value for member in cls]}


def register_memory_type(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    listed: bool = True,
    order: int = 100,
    owner: str = "",
) -> MemoryType:
    """Register memory type `name` (lowercase letters, digits, `_`) and return its member.
    Registering a name again with the same settings returns the same member (a module imported
    twice); with other settings it is an error naming both owners."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"memory type name {name!r}: use a lowercase letter, then lowercase letters, digits or '_' (64 at most)")
    spec = MemoryTypeSpec(name, dict(labels or {}), listed, order, owner or "memoryscope")
    with _lock:
        known = MemoryType._specs.get(name)
        if known is not None and known.registered and known != spec:
            raise ValueError(f"memory type {name!r} is registered by {known.owner!r} already (now by {spec.owner!r})")
        MemoryType._specs[name] = spec
        if name not in MemoryType._members:
            MemoryType._members[name] = str.__new__(MemoryType, name)
        return MemoryType._members[name]


def memory_type_spec(memory_type: str) -> MemoryTypeSpec:
    """The spec of a type (registered, or met in a store)."""
    return MemoryType.stored(memory_type).spec


def memory_type_specs() -> list[MemoryTypeSpec]:
    """Every registered type's spec, in the order listings show them."""
    specs = [member.spec for member in MemoryType]
    return sorted(specs, key=lambda spec: spec.order)


# MemoryScope's own types. Retrieval, consolidation and reflection name the types they read.
MemoryType.CONVERSATION = register_memory_type("conversation", labels={"en": "conversation memory", "zh": "对话记忆"}, order=60)
MemoryType.OBSERVATION = register_memory_type("observation", labels={"en": "observation memory", "zh": "观察记忆"}, order=50)
MemoryType.OBS_CUSTOMIZED = register_memory_type("obs_customized", labels={"en": "added memory", "zh": "自定义记忆"}, order=40)
MemoryType.INSIGHT = register_memory_type("insight", labels={"en": "insight memory", "zh": "洞察记忆"}, order=30)
# A MemGPT-style agent's blocks and state as an older MemoryScope kept them, as memories; now state
# records (`memoryscope.stores.state`), moved on first use (`memoryscope.stores.legacy_agent`). Never listed.
MemoryType.CORE_MEMORY = register_memory_type("core_memory", labels={"en": "core memory", "zh": "核心记忆"}, listed=False)
MemoryType.AGENT_STATE = register_memory_type("agent_state", labels={"en": "agent state", "zh": "智能体状态"}, listed=False)
# The passages of a named data source (`memoryscope load`, MemGPT's sources): found by the
# archival_memory_search of an agent the source is attached to. Never listed with the user's memories.
MemoryType.SOURCE_PASSAGE = register_memory_type(
    "source_passage", labels={"en": "data source passage", "zh": "数据源段落"}, listed=False, order=90
)
