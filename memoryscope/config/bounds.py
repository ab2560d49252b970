"""Bounds on every number a config gives, so that a value which passes the check also runs.

A count, `*_top_k`, size or threshold ends up in an SQLite `LIMIT` (64-bit), a `timedelta` or
a thread's wait, where a value such as `1e23` or `.inf` fails long after `check-config` said
yes. Rather than a bound on each field of each worker, every `int` and `float` field of a
`Params` model is bounded here, once:

- within ±`MAX_NUMBER`, unless the field sets its own upper bound (`Field(le=...)`);
- a seconds value (`*_s`, `*timeout*`, `interval_time`) within `MAX_SECONDS`;
- a float must be finite;
- numbers inside a mapping or list (a ratio table, an LLM's options) must be finite and fit in
  64 bits.

`BoundedParams` applies the bounds while validating (the base of worker, operation, service and
global settings models); `bound_problems` checks an already-validated model of any other kind.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from annotated_types import Le, Lt
from pydantic import BaseModel, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from memoryscope.errors import shorten

__all__ = ["MAX_NUMBER", "MAX_SECONDS", "BoundedParams", "bound_problems", "number_problem"]

MAX_NUMBER = 10_000_000
MAX_SECONDS = 1_000_000  # about 11.5 days; SQLite's busy timeout is a 32-bit count of milliseconds
_INT64 = 2**63 - 1


def number_problem(model: type[BaseModel], name: str, value: Any) -> str | None:
    """What is wrong with `value` as field `name` of `model`, or None when it is in bounds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return "must be a finite number"
        field = model.model_fields.get(name)
        if field is not None and any(isinstance(rule, (Le, Lt)) for rule in field.metadata):
            return None  # the field says its own upper bound; pydantic checked it
        limit = MAX_SECONDS if _is_seconds(name) else MAX_NUMBER
        if value > limit:
            return f"must be at most {limit}"
        if value < -limit:
            return f"must be at least {-limit}"
        return None
    if isinstance(value, (Mapping, list, tuple, set, frozenset)):
        bad = _first_unbounded(value)
        if bad is not None:
            return f"every number in it must be finite and fit in 64 bits, not {shorten(bad)}"
    return None


def bound_problems(params: BaseModel) -> list[tuple[str, str, Any]]:
    """(field, message, value) for every field of `params` out of bounds."""
    found = []
    for name in type(params).model_fields:
        value = getattr(params, name)
        problem = number_problem(type(params), name, value)
        if problem is not None:
            found.append((name, problem, value))
    return found


class BoundedParams(BaseModel):
    """A `Params` base whose numbers are bounded while validating (see the module docstring)."""

    @field_validator("*", mode="after")
    @classmethod
    def _bounded(cls, value: Any, info: ValidationInfo) -> Any:
        problem = number_problem(cls, info.field_name or "", value)
        if problem is not None:
            raise PydanticCustomError("number_bound", "{problem}", {"problem": problem})
        return value


def _is_seconds(name: str) -> bool:
    return name.endswith(("_s", "_seconds")) or "timeout" in name or name == "interval_time"


def _first_unbounded(value: Any, depth: int = 0) -> Any:
    if depth > 20:
        return None  # config data is shallow; a deeper structure is not ours to walk
    items = value.values() if isinstance(value, Mapping) else value
    for item in items:
        if isinstance(item, bool):
            continue
        if isinstance(item, float) and not math.isfinite(item):
            return item
        if isinstance(item, int) and not -_INT64 - 1 <= item <= _INT64:
            return item
        if isinstance(item, (Mapping, list, tuple, set, frozenset)):
            bad = _first_unbounded(item, depth + 1)
            if bad is not None:
                return bad
    return None
