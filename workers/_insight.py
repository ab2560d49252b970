"""What the reflection workers share: insight keys and ids, how an insight reads, prompt budgets.

An insight is one profile attribute of the person memories are about: `key` is the attribute
("hobby", "爱好"), `value` its value ("playing the guitar"), and `content` the readable line
("user's hobby: playing the guitar", "用户的爱好：弹吉他"). Keys compare case- and
space-insensitively, and a new insight's id is derived from the isolation key and its key, so
reflecting twice on the same facts (after a crash, say) rewrites one node instead of adding two.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

from memoryscope.context import MemoryContext
from memoryscope.errors import ConfigError, MemoryScopeError
from memoryscope.llm_output import as_number, extract_json, item_field, labelled, reply_lines
from memoryscope.models.token_count import count_tokens
from memoryscope.text import cap_text, clean_model_text
from memoryscope.worker import LLMWorker

__all__ = [
    "normalize_key",
    "insight_id",
    "render_insight",
    "render_subject",
    "person",
    "is_unknown",
    "normalize_value",
    "clean_value",
    "fit_in_budget",
    "ReflectionWorker",
    "parse_values",
    "strip_key",
    "cap_value",
    "MAX_VALUE_CHARS",
]

# Longest insight value stored: an attribute's value is a phrase ("playing the guitar"); a model
# that writes more is cut at a word boundary (reported by `update_insight`).
MAX_VALUE_CHARS = 300

_ID_NAMESPACE = uuid.UUID("6f1c1f0e-9b1a-4d51-9a57-3c2f1e0b7a10")  # fixed: ids must not change between versions
_EDGE_MARKS = " \t\r\n\"'`“”‘’<>《》「」【】[]()（）*-•·.,;:。，；：、!?！？"
_UNKNOWN = frozenset(
    {
        "",
        "unknown",
        "none",
        "null",
        "n/a",
        "na",
        "nil",
        "not mentioned",
        "not known",
        "no information",
        "unclear",
        "无",
        "未知",
        "不详",
        "不知道",
        "没有",
        "无信息",
        "未提及",
        "暂无",
    }
)
_INSIGHT_FORMAT = {"en": "{person}'s {key}: {value}", "zh": "{person}的{key}：{value}"}
_SUBJECT_FORMAT = {"en": "{person}'s {key}", "zh": "{person}的{key}"}


def normalize_key(key: str) -> str:
    """The form keys are compared in: case-folded, without spaces and edge punctuation."""
    return "".join(key.strip(_EDGE_MARKS).casefold().split())


def insight_id(user_name: str, target_name: str, workspace: str, key: str) -> str:
    """A stable memory_id for the insight `key` of one user/target/workspace."""
    name = "\x1f".join(("insight", user_name, target_name, workspace, normalize_key(key)))
    return uuid.uuid5(_ID_NAMESPACE, name).hex


def person(ctx: MemoryContext) -> str:
    """Whom the memories are about: the target when there is one, else the user."""
    return ctx.target_name or ctx.user_name


def render_insight(who: str, key: str, value: str, language: str) -> str:
    """`user's hobby: playing the guitar` / `用户的爱好：弹吉他`."""
    return _INSIGHT_FORMAT.get(language, _INSIGHT_FORMAT["en"]).format(person=who, key=key, value=value)


def render_subject(who: str, key: str, language: str) -> str:
    """`user's hobby` / `用户的爱好`: the text an attribute is matched by."""
    return _SUBJECT_FORMAT.get(language, _SUBJECT_FORMAT["en"]).format(person=who, key=key)


def clean_value(text: Any) -> str:
    """A value (or attribute) as the model wrote it, as one clean line (`clean_model_text`: no
    control characters, escape sequences or bidi overrides; lists and objects as readable text),
    without quotes, brackets, bullets and a final full stop."""
    value = clean_model_text(text)
    return value.strip(" \"'`“”‘’<>《》「」*•").rstrip("。.").strip()


def is_unknown(value: str) -> bool:
    """True for "unknown", "none", "无", "未知", empty and the like: the model found no value."""
    normalized = normalize_value(value)
    return normalized in _UNKNOWN or normalized.replace(" ", "") in _UNKNOWN


def normalize_value(value: str) -> str:
    return " ".join(value.strip(_EDGE_MARKS).casefold().split())


def fit_in_budget(lines: Sequence[str], budget: int) -> int:
    """How many of `lines`, taken in order, fit in `budget` tokens (at least one, if any)."""
    used = 0
    for count, line in enumerate(lines):
        used += count_tokens(line) + 1
        if used > budget and count > 0:
            return count
    return len(lines)


class ReflectionWorker(LLMWorker):
    """An LLM worker of the reflection (`get_reflection_subject`, `update_insight`,
    `long_contra_repeat`): run without its model, it fails with a `ConfigError` at the model key."""

    def missing_model_error(self) -> MemoryScopeError:
        return ConfigError([(self.model_where, "this step needs a generation model, and `model:` has none under that key")])


_LABELS = ("number", "index", "id", "#", "key", "attribute", "subject", "属性", "序号")  # how an entry names its attribute
_VALUE_KEYS = ("value", "值", "取值", "属性值")


def parse_values(reply: str, keys: Sequence[str]) -> dict[int, str] | None:
    """{attribute number: value} from the model's reply; None when it answers no attribute.

    Reads `{"1": "guitar", "2": "unknown"}` (numbers or keys as names, values as strings or
    `{"value": ...}`; null means unknown), a list of `{"number"|"key": ..., "value": ...}`
    objects or table rows (`| attribute | value |`), a list of plain values in order, all inside
    code fences or chatter, single quotes and trailing commas too; else lines of a list:
    `1. guitar`, `- hobby: guitar`, `* home city: Beijing`, `1) job - nurse`, `**hobby**: guitar`.
    Attributes the reply leaves out are missing from the result.
    """
    found = extract_json(reply)
    values: dict[int, str] = {}
    if isinstance(found, dict):
        nested = found.get("values") or found.get("attributes")
        entries = nested if isinstance(nested, (dict, list)) else found
        found = entries
    if isinstance(found, dict):
        for name, item in found.items():
            number = _number(name, keys)
            if number is not None:
                values.setdefault(number, _value_text(item))
    elif isinstance(found, list):
        plain = all(not isinstance(item, dict) for item in found)
        for position, item in enumerate(found, start=1):
            if isinstance(item, dict):
                label = item_field(item, _LABELS)
                number = None if label is None else _number(label, keys)
                if number is not None:
                    values.setdefault(number, _value_text(item_field(item, _VALUE_KEYS)))
            elif plain and len(found) == len(keys):
                values.setdefault(position, _value_text(item))
    return values or _listed_values(reply, keys) or None


def _listed_values(reply: str, keys: Sequence[str]) -> dict[int, str]:
    """Values from lines: `key: value` when the key is an attribute's, else `N. value` by number."""
    values: dict[int, str] = {}
    for line in reply_lines(reply):
        pair = labelled(line.text)
        named = None if pair is None else _number(pair[0], keys, possessive=True)
        if pair is not None and named is not None:
            values.setdefault(named, pair[1])
        elif line.number is not None and line.listed and 1 <= line.number <= len(keys):
            values.setdefault(line.number, line.text)
    return values


def _number(label: Any, keys: Sequence[str], *, possessive: bool = False) -> int | None:
    """The attribute `label` names: its number, or its key (with `possessive`, also "user's
    hobby" / "用户的爱好"); None when it names none of `keys`."""
    number = as_number(label)
    if number is not None:
        return number if 1 <= number <= len(keys) else None
    text = str(label)
    names = {normalize_key(text)}
    if possessive:
        names |= {normalize_key(re.split(r"'s\s|的", text, maxsplit=1)[-1])}
    for position, key in enumerate(keys, start=1):
        if normalize_key(key) in names:
            return position
    return None


def cap_value(value: str) -> str:
    """`value` in at most `MAX_VALUE_CHARS` characters."""
    return cap_text(value, MAX_VALUE_CHARS)


def _value_text(item: Any) -> str:
    """A value the model gave, as readable text: a list's items joined, an object's entries as
    `key: value` (never a Python repr); None, NaN and the like as "" (unknown)."""
    if isinstance(item, dict):
        item = item.get("value")
    return clean_model_text(item)


def strip_key(value: str, key: str, who: str) -> str:
    """`hobby: guitar` or `user's hobby: guitar` → `guitar` (models sometimes echo the attribute)."""
    for prefix in (render_subject(who, key, "en"), render_subject(who, key, "zh"), key):
        pattern = re.compile(rf"^\s*{re.escape(prefix)}\s*[:：]\s*", re.IGNORECASE)
        stripped = pattern.sub("", value, count=1)
        if stripped != value:
            return stripped.strip()
    return value
