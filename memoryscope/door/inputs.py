"""The verbs' inputs read once, for every face: messages, metadata, memory types, time ranges,
and times without a zone (read in the config's zone)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, tzinfo
from typing import Any

from memoryscope.context import Message
from memoryscope.door.limits import check_unicode
from memoryscope.errors import InvalidInputError
from memoryscope.memory import MemoryType, is_own_meta_key
from memoryscope.stores.base import TimeRange

__all__ = [
    "checked_idempotency_key",
    "listed_types",
    "MessagesIn",
    "aware",
    "parse_time",
    "messages_of",
    "checked_metadata",
    "memory_types",
    "time_range",
]

MAX_METADATA_DEPTH = 8  # levels of lists and objects inside one metadata value
MAX_METADATA_CHARS = 32_000  # one memory's metadata, as JSON

MessagesIn = str | Message | Mapping[str, Any] | Sequence[str | Message | Mapping[str, Any]]


def aware(moment: datetime | None, zone: tzinfo) -> datetime | None:
    """A time given without a zone is read in `zone` (the config's): the one rule for every face."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=zone)


def parse_time(name: str, value: str | datetime | None, zone: tzinfo) -> datetime | None:
    """An ISO 8601 time from a face's text input (a flag, a tool argument); naive: the config's zone."""
    if value is None or isinstance(value, datetime):
        return aware(value, zone)
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be an ISO 8601 time, got {type(value).__name__}")
    if not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInputError(
            f"{name} {value!r} is not an ISO 8601 time; write e.g. 2024-10-26, 2024-10-26T21:26:20 or 2024-10-26T21:26:20+08:00"
        ) from None
    return aware(moment, zone)


def messages_of(given: MessagesIn, default_time: datetime, metadata: dict[str, Any]) -> list[Message]:
    items: Sequence[Any] = [given] if isinstance(given, str | Message | Mapping) else given
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise InvalidInputError(f"add takes a text, a message or a list of them, got {type(given).__name__}")
    messages = [_message(item, index, default_time, metadata) for index, item in enumerate(items)]
    if not any(message.content.strip() for message in messages):
        raise InvalidInputError("add: nothing to remember (every text is empty)")
    return messages


def _message(item: Any, index: int, default_time: datetime, metadata: dict[str, Any]) -> Message:
    where = f"add: message {index}"
    if isinstance(item, Message):
        merged = {**metadata, **item.metadata}
        return Message(item.role, item.content, item.time, item.name, item.message_id, merged) if merged else item
    if isinstance(item, str):
        return Message("user", item.strip(), default_time, metadata=metadata)
    if not isinstance(item, Mapping):
        raise InvalidInputError(f"{where}: expected a text or {{'role': ..., 'content': ...}}, got {type(item).__name__}")
    unknown = sorted(str(key) for key in set(item) - {"role", "content", "time", "name"})
    if unknown:
        raise InvalidInputError(f"{where}: unknown keys {unknown}; a message has role, content, time and name")
    content, role = item.get("content"), item.get("role", "user")
    if not isinstance(content, str):
        raise InvalidInputError(f"{where}: 'content' must be a text, got {content!r}")
    if role not in ("user", "assistant"):
        raise InvalidInputError(f"{where}: 'role' must be 'user' or 'assistant', got {role!r}")
    moment = parse_time(f"{where}: 'time'", item.get("time"), default_time.tzinfo or default_time.astimezone().tzinfo)  # type: ignore[arg-type]  # a default time always has a zone
    return Message(role, content.strip(), moment or default_time, str(item.get("name") or ""), metadata=metadata)


def checked_metadata(metadata: Mapping[str, Any] | None, allow_none: bool = False) -> dict[str, Any]:
    """`metadata` as JSON-ready meta entries (datetimes as ISO texts); a bad one names its key."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(f"metadata must be a mapping of key to value, got {type(metadata).__name__}")
    checked: dict[str, Any] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"metadata keys must be non-empty texts, got {key!r}")
        if key == "pinned":
            raise InvalidInputError("metadata key 'pinned' is MemoryScope's own: pin and unpin a memory with the pin verb")
        if is_own_meta_key(key):
            raise InvalidInputError(f"metadata key {key!r} is MemoryScope's own; use another name")
        if value is None and not allow_none:
            raise InvalidInputError(f"metadata {key!r} is None; leave the key out instead")
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise InvalidInputError(f"metadata {key!r}: give a timezone-aware datetime, got naive {value!r}")
            value = value.isoformat()
        check_unicode(key, f"metadata key {key[:40]!r}")
        _check_value(key, value, depth=1)
        checked[key] = value
    size = len(json.dumps(checked, ensure_ascii=False))
    if size > MAX_METADATA_CHARS:
        raise InvalidInputError(
            f"metadata is {size:,} characters as JSON; at most {MAX_METADATA_CHARS:,}: "
            "keep large data elsewhere and store a reference to it",
            code="metadata_too_large",
        )
    return checked


def _check_value(key: str, value: Any, depth: int) -> None:
    """Refuse what could not be stored and read back as it was: non-finite numbers, lone
    surrogates, types JSON has not, nesting deeper than MAX_METADATA_DEPTH."""
    if depth > MAX_METADATA_DEPTH:
        raise InvalidInputError(f"metadata {key!r} is nested more than {MAX_METADATA_DEPTH} deep", code="metadata_too_deep")
    if isinstance(value, str):
        check_unicode(value, f"metadata {key!r}")
    elif isinstance(value, float) and not math.isfinite(value):
        raise InvalidInputError(f"metadata {key!r}: {value} is not a finite number; store finite numbers only", code="not_finite")
    elif isinstance(value, Mapping):
        for inner_key, inner in value.items():
            if not isinstance(inner_key, str):
                raise InvalidInputError(f"metadata {key!r}: keys inside must be texts, got {inner_key!r}")
            check_unicode(inner_key, f"metadata {key!r}")
            _check_value(key, inner, depth + 1)
    elif isinstance(value, list | tuple):
        for inner in value:
            _check_value(key, inner, depth + 1)
    elif value is not None and not isinstance(value, bool | int | float):
        raise InvalidInputError(
            f"metadata {key!r}: {type(value).__name__} cannot be stored; use texts, finite numbers, booleans, lists or dicts"
        )


def checked_idempotency_key(key: str) -> str:
    """A client's key for one request: 1 to 200 printable characters."""
    if not isinstance(key, str) or not key.strip() or len(key) > 200 or not key.isprintable():
        raise InvalidInputError(
            "an idempotency key is 1 to 200 printable characters, e.g. a UUID", code="invalid_idempotency_key"
        )
    return key.strip()


def listed_types() -> tuple[MemoryType, ...]:
    """What a listing shows when no types are asked for: every registered type that is listed
    (`memoryscope.memory_types`; not the agent records an older MemoryScope kept as memories)."""
    return tuple(member for member in MemoryType if member.spec.listed)


def memory_types(types: Sequence[MemoryType | str] | MemoryType | str | None) -> tuple[MemoryType, ...] | None:
    if types is None:
        return None
    if isinstance(types, str | MemoryType):
        types = [types]
    known = ", ".join(member.value for member in MemoryType)
    chosen = []
    for index, name in enumerate(types):
        try:
            chosen.append(MemoryType(name))
        except ValueError:
            raise InvalidInputError(f"types.{index}: unknown memory type {name!r}; use one of {known}") from None
    return tuple(dict.fromkeys(chosen))


def time_range(given: TimeRange | tuple[datetime | None, datetime | None] | None, zone: tzinfo) -> TimeRange | None:
    """A `TimeRange` on when memories were said, from `(start, end)` (either may be None; naive: `zone`)."""
    if given is None or isinstance(given, TimeRange):
        return given
    if not isinstance(given, tuple | list) or len(given) != 2:
        raise InvalidInputError(f"time_range must be a TimeRange or (start, end), got {given!r}")
    start, end = (aware(moment, zone) if isinstance(moment, datetime) else moment for moment in given)
    for name, moment in (("start", start), ("end", end)):
        if moment is not None and not isinstance(moment, datetime):
            raise InvalidInputError(f"time_range {name} must be a datetime or None, got {moment!r}")
    if start is not None and end is not None and start > end:
        message = f"the start (since, {start.isoformat()}) is after until, the end ({end.isoformat()}); swap them"
        raise InvalidInputError(message, code="invalid_time_range")
    if start is None and end is None:
        return None
    return TimeRange(field="message_time", start=start, end=end)
