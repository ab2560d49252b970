"""`memoryscope workers`: the workers a workflow can name, built in and from installed packages.

    memoryscope workers                  # every registered worker
    memoryscope workers semantic_rank    # one in full (a dotted class path works too)
    memoryscope workers --json           # the same as JSON

For each worker: where it comes from (built in, the distribution whose `memoryscope.workers`
entry point registered it, or the module that did), the context fields it reads, reads when
present and writes, whether it needs an LLM, and its parameters (the YAML keys of a `worker:`
entry) with type, bounds, default and description. Entry points that could not be used are
listed after the workers, with what to fix.
"""

from __future__ import annotations

import argparse
import enum
import inspect
import json
import re
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

    from memoryscope.registry import Registry
    from memoryscope.worker import Worker

__all__ = ["add_workers_commands", "describe_worker"]

_BUILT_IN_PACKAGE = "memoryscope.workers"
_BOUNDS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "min_length": "length >=", "max_length": "length <="}
_MODULE_PREFIX = re.compile(r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_])")


def add_workers_commands(commands: Any) -> None:
    """Register `workers` on the `memoryscope` command's subparsers."""
    workers = commands.add_parser("workers", help="the workers a workflow can use: reads, writes, parameters")
    workers.add_argument("name", nargs="?", help="show this worker in full (a registered name or a dotted class path)")
    workers.add_argument("--json", action="store_true", help="print JSON, and nothing else")
    workers.set_defaults(handler=_workers)


def _workers(args: argparse.Namespace) -> int:
    from memoryscope.text import terminal_safe  # docstrings and names may come from any installed package
    from memoryscope.worker import WORKERS

    if args.name:
        described = describe_worker(WORKERS, args.name)
        text = json.dumps(described, ensure_ascii=False, indent=2) if args.json else "\n".join(_full(described))
        print(terminal_safe(text))
        return 0
    described_all = [describe_worker(WORKERS, name) for name in WORKERS.names()]
    broken = WORKERS.broken()
    if args.json:
        problems = [{"name": name, "problem": problem} for name, problem in sorted(broken.items())]
        listing = {"workers": described_all, "broken_entry_points": problems}
        print(terminal_safe(json.dumps(listing, ensure_ascii=False, indent=2)))
        return 0
    lines: list[str] = []
    for described in described_all:
        lines.extend([*_summary(described), ""])
    if broken:
        lines.append(f"entry points of {WORKERS.group} that cannot be used:")
        lines.extend(f"  {name}: {problem}" for name, problem in sorted(broken.items()))
    lines.append(f"{len(described_all)} workers. `memoryscope workers NAME` shows one in full.")
    print(terminal_safe("\n".join(lines)))
    return 0


def describe_worker(registry: Registry[type[Worker]], name: str) -> dict[str, Any]:
    """What `memoryscope workers` shows of worker `name` (registered, or a dotted class path), as JSON-able data."""
    cls = registry.get(name)
    distribution = registry.distribution(name)  # None for a dotted path: not registered
    module = cls.__module__
    built_in = distribution is None and (module == _BUILT_IN_PACKAGE or module.startswith(f"{_BUILT_IN_PACKAGE}."))
    doc = inspect.cleandoc(cls.__dict__.get("__doc__") or "")  # its own: an inherited one describes the base
    return {
        "name": name,
        "class": f"{module}.{cls.__qualname__}",
        "source": "built in" if built_in else distribution or f"module {module}",
        "distribution": distribution,
        "summary": doc.split("\n\n")[0].replace("\n", " "),
        "doc": doc,
        "reads": list(cls.reads),
        "optional_reads": list(cls.optional_reads),
        "writes": list(cls.writes),
        "needs_generation_model": bool(cls.needs_generation_model),
        "params": [_param(key, field) for key, field in cls.Params.model_fields.items()],
    }


def _param(key: str, field: FieldInfo) -> dict[str, Any]:
    from pydantic_core import to_jsonable_python

    required = field.is_required()
    default = None if required else field.get_default(call_default_factory=True)
    bounds = [
        f"{_BOUNDS[attribute]} {getattr(rule, attribute)}"
        for rule in field.metadata
        for attribute in _BOUNDS
        if getattr(rule, attribute, None) is not None
    ]
    return {
        "name": key,
        "type": _type_name(field.annotation),
        "bounds": bounds,
        "required": required,
        "default": to_jsonable_python(default, fallback=repr),
        "description": field.description or "",
    }


def _type_name(annotation: Any) -> str:
    """A type as a config writer reads it: `int`, `dict[str, float]`, `'add' | 'delete'`."""
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(json.dumps(member.value, ensure_ascii=False) for member in annotation)
    if get_origin(annotation) is Literal:
        return " | ".join(json.dumps(value, ensure_ascii=False) for value in get_args(annotation))
    if isinstance(annotation, type) and not get_args(annotation):
        return annotation.__name__
    return _MODULE_PREFIX.sub("", str(annotation))


def _summary(described: dict[str, Any]) -> list[str]:
    """A worker in a few lines, for the list."""
    lines = [f"{described['name']}: {described['summary']}" if described["summary"] else described["name"]]
    lines.append(f"  from {described['source']} ({described['class']})")
    fields = [f"reads {_names(described['reads'])}"]
    if described["optional_reads"]:
        fields.append(f"optional reads {_names(described['optional_reads'])}")
    fields.append(f"writes {_names(described['writes'])}")
    fields.append("needs an LLM" if described["needs_generation_model"] else "no LLM")
    lines.append("  " + "; ".join(fields))
    for param in described["params"]:
        lines.append(f"  {_param_line(param)} {param['description']}".rstrip())
    return lines


def _full(described: dict[str, Any]) -> list[str]:
    """A worker in full, for `memoryscope workers NAME`."""
    lines = [described["name"], ""]
    if described["doc"]:
        lines.extend([described["doc"], ""])
    lines.extend(
        [
            f"class:          {described['class']}",
            f"from:           {described['source']}",
            f"reads:          {_names(described['reads'])}",
            f"optional reads: {_names(described['optional_reads'])}",
            f"writes:         {_names(described['writes'])}",
            f"needs an LLM:   {'yes (skipped when no LLM is configured)' if described['needs_generation_model'] else 'no'}",
        ]
    )
    if not described["params"]:
        lines.append("params:         (none)")
        return lines
    lines.append("params (its keys under `worker:`):")
    for param in described["params"]:
        lines.append(f"  {_param_line(param)}")
        if param["description"]:
            lines.append(f"      {param['description']}")
    return lines


def _param_line(param: dict[str, Any]) -> str:
    bounds = f", {', '.join(param['bounds'])}" if param["bounds"] else ""
    default = "required" if param["required"] else f"default {json.dumps(param['default'], ensure_ascii=False)}"
    return f"{param['name']}: {param['type']}{bounds}; {default}."


def _names(names: list[str]) -> str:
    return ", ".join(names) or "-"
