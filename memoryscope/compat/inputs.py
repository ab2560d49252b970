"""The keyword inputs of MemoryScope 0.1.x operations (`query=`, `memory_id=`, `timestamp=`), as
this version's caller fields.

0.1.x ran every operation with free keywords and read the few it knew; here an operation's
inputs are the typed fields of its context (`memoryscope.context.CALLER_FIELDS`), so 0.1.x's
names are translated, and a name neither knows is an error that lists both.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, tzinfo
from typing import Any

from memoryscope.context import CALLER_FIELDS
from memoryscope.errors import MemoryScopeError, closest

__all__ = ["LEGACY_INPUTS", "caller_inputs"]

# 0.1.x keyword → what it meant
LEGACY_INPUTS = {
    "query": "the query; for add_memory the memory's text; for delete_memory the exact text to delete",
    "memory_id": "the id of the memory to delete (several: separated by commas or spaces)",
    "timestamp": "when the query was asked, in seconds since the epoch",
}


def caller_inputs(operation: str, values: Mapping[str, Any], zone: tzinfo | None = None) -> dict[str, Any]:
    """Caller fields for a call of `operation` with 0.1.x keywords (this version's field names pass as they are)."""
    inputs: dict[str, Any] = {}
    for key, value in values.items():
        if key == "query":
            inputs["query"] = "" if value is None else str(value)
        elif key == "memory_id":
            inputs["memory_ids"] = tuple(str(value).replace(",", " ").split())
        elif key == "timestamp":
            inputs["query_time"] = _moment(value, zone)
        elif key in CALLER_FIELDS and key != "user_name":
            inputs[key] = value
        else:
            known = sorted({*LEGACY_INPUTS, *CALLER_FIELDS} - {"user_name"})
            close = closest(key, known)
            hint = f" Did you mean {close!r}?" if close else ""
            raise MemoryScopeError(f"operation {operation!r}: unknown input {key!r}.{hint} Known: {', '.join(known)}")
    return inputs


def _moment(value: Any, zone: tzinfo | None) -> datetime:
    if isinstance(value, datetime):
        return value
    try:
        return datetime.fromtimestamp(float(value), zone)
    except (TypeError, ValueError, OverflowError, OSError):
        raise MemoryScopeError(f"timestamp must be seconds since the epoch, got {value!r}") from None
