"""MemoryScope 0.1.x's command line: `memoryscope --config_path=PATH` or `memoryscope --language=en
--memory_chat_class=cli_memory_chat --generation_backend=openai_generation ...`, flags named after
`Arguments` fields (plus `config_path`), values read as Python literals where they are one
(`--enable_ranker=True`, `--worker_params='{"get_reflection_subject": {"reflect_num_questions": 3}}'`)."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from memoryscope.compat.arguments import FIELD_NAMES
from memoryscope.errors import MemoryScopeError, closest

__all__ = ["FLAG_NAMES", "is_flag_form", "parse_flags"]

FLAG_NAMES = ("config_path", *FIELD_NAMES)


def is_flag_form(argv: Sequence[str]) -> bool:
    """True when the command line is 0.1.x's: it starts with a `--flag` (subcommands never do)."""
    return bool(argv) and argv[0].startswith("--") and argv[0] not in ("--help", "--version")


def parse_flags(argv: Sequence[str]) -> dict[str, Any]:
    """{field: value} from `--name=value`, `--name value`, `--name` (True) and `--noname` (False)."""
    values: dict[str, Any] = {}
    index = 0
    while index < len(argv):
        token = argv[index]
        if not token.startswith("--") or token == "--":
            raise MemoryScopeError(f"expected a --flag, got {token!r}; flags: --{' --'.join(FLAG_NAMES)}")
        name, has_value, text = token[2:].partition("=")
        name = _name(name)
        if not has_value and index + 1 < len(argv) and not argv[index + 1].startswith("--"):
            index += 1
            text, has_value = argv[index], "="
        if not has_value and name not in FLAG_NAMES and name.startswith("no") and name[2:] in FLAG_NAMES:
            name, value = name[2:], False
        else:
            value = _value(text) if has_value else True
        if name not in FLAG_NAMES:
            close = closest(name, FLAG_NAMES)
            hint = f" Did you mean --{close}?" if close else ""
            raise MemoryScopeError(f"unknown flag --{name}.{hint} Flags: --{' --'.join(FLAG_NAMES)}")
        values[name] = value
        index += 1
    return values


def _name(text: str) -> str:
    return text.replace("-", "_")


def _value(text: str) -> Any:
    """A Python literal (`True`, `5`, `None`, `{...}`) when the text is one, else the text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text
