"""Reading a config: by name or path, YAML parsed safely, `${VAR}` filled in, overrides applied.

A config may start from another with `extends: NAME|PATH`: its sections are merged over the
base's, key by key, except that an entry which names its own `class:` replaces the base's entry
whole (so switching a model's backend never inherits the old backend's keys).

Precedence, highest first: arguments (`overrides=`) > environment (`MEMORYSCOPE__SECTION__KEY`) >
the YAML file > defaults in the schema.

YAML anchors and aliases (`&name`, `*name`) and duplicate keys are refused with their line: an
alias can multiply a few lines into gigabytes (a "billion laughs"), and a second `language:`
silently overriding the first hides a mistake.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from memoryscope.errors import ConfigError, closest, shorten

__all__ = ["apply_overrides", "read_config_source", "shipped_config_names", "ENV_PREFIX"]

ENV_PREFIX = "MEMORYSCOPE__"
_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def shipped_config_names() -> list[str]:
    """Names of the configs shipped in `memoryscope.configs` (`default`, `siliconflow`, ...)."""
    folder = resources.files("memoryscope.configs")
    return sorted(item.name[: -len(".yaml")] for item in folder.iterdir() if item.name.endswith(".yaml"))


def read_config_source(
    source: str | Path,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    adjust: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[dict[str, Any], str]:
    """The raw config dict for `source` (a shipped name or a path), and a label for messages.

    `adjust` changes the file's dict before the environment and `overrides` are set over it
    (MemoryScope 0.1.x `Arguments` sit where the YAML does, so both still win over them)."""
    environ = os.environ if environ is None else environ
    data, label = _read_with_bases(source, seen=())
    data = _interpolate(data, environ, label, "")
    if adjust is not None:
        adjust(data)
    apply_overrides(data, _environment_overrides(environ), label)
    apply_overrides(data, overrides, label)
    return data, label


def apply_overrides(data: dict[str, Any], overrides: Mapping[str, Any] | None, label: str) -> None:
    """Set each `{"section.key": value}` of `overrides` in the raw config dict `data`."""
    for dotted, value in (overrides or {}).items():
        _set_path(data, dotted, value, label)


def _read_with_bases(source: str | Path, seen: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    text, label = _read_text(source)
    if label in seen:
        raise ConfigError(f"`extends` loops: {' -> '.join([*seen, label])}")
    data = _parse_yaml(text, label)
    base_source = data.pop("extends", None)
    if base_source is None:
        return data, label
    if not isinstance(base_source, str):
        raise ConfigError([("extends", f"must name a config or a path, got {base_source!r}")], source=label)
    if _looks_like_path(base_source) and _looks_like_path(source) and not Path(base_source).expanduser().is_absolute():
        base_source = str(Path(str(source)).expanduser().parent / base_source)  # relative to the extending file
    base, _ = _read_with_bases(base_source, (*seen, label))
    return _merge(base, data), label


class _StrictLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses anchors, aliases and duplicate keys (see the module docstring)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(
                None, None, "anchors and aliases (&name, *name) are not supported; write the value out", event.start_mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                seen = key in first_line
            except TypeError:
                continue  # an unhashable key; the base class says so
            if seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {shorten(key)} (first at line {first_line[key]})", key_node.start_mark
                )
            first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def _load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects


def _parse_yaml(text: str, label: str) -> dict[str, Any]:
    try:
        data = _load_yaml(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        place = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(f"invalid YAML at {place}{problem}", source=label) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"the top level must be a mapping of sections, got {type(data).__name__}", source=label)
    return data


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        replaces_whole = isinstance(value, dict) and "class" in value
        if isinstance(value, dict) and isinstance(merged.get(key), dict) and not replaces_whole:
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_text(source: str | Path) -> tuple[str, str]:
    text_source = str(source)
    if not _looks_like_path(source):
        names = shipped_config_names()
        if text_source in names:
            resource = resources.files("memoryscope.configs").joinpath(f"{text_source}.yaml")
            return resource.read_text(encoding="utf-8"), f"config {text_source!r}"
        close = closest(text_source, names)
        hint = f" Did you mean {close!r}?" if close else ""
        raise ConfigError(
            f"no shipped config called {text_source!r}.{hint} Shipped: {', '.join(names)}; or give a path to a YAML file"
        )
    path = Path(text_source).expanduser()
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read config file {path}: {error}") from None


def _looks_like_path(source: str | Path) -> bool:
    text = str(source)
    return isinstance(source, Path) or "/" in text or text.endswith((".yaml", ".yml"))


def _interpolate(value: Any, environ: Mapping[str, str], label: str, where: str) -> Any:
    """Fill `${NAME}` and `${NAME:-default}` in string values from the environment."""
    if isinstance(value, dict):
        return {key: _interpolate(item, environ, label, f"{where}.{key}" if where else str(key)) for key, item in value.items()}
    if isinstance(value, list):
        return [_interpolate(item, environ, label, f"{where}[{index}]") for index, item in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value
    missing: list[str] = []

    def fill(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        missing.append(name)
        return ""

    filled = _INTERPOLATION.sub(fill, value)
    if missing:
        names = ", ".join(missing)
        raise ConfigError(
            [
                (
                    where,
                    f"environment variable {names} is not set; set it, or give a default: ${{{missing[0]}:-default}}",
                )
            ],
            source=label,
        )
    return filled


def _environment_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """`MEMORYSCOPE__GLOBAL__LANGUAGE=zh` → {"global.language": "zh"} (values parsed as YAML scalars)."""
    found: dict[str, Any] = {}
    for name, raw in environ.items():
        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX):
            dotted = ".".join(part.lower() for part in name[len(ENV_PREFIX) :].split("__"))
            try:
                found[dotted] = _load_yaml(raw) if raw.strip() else ""
            except yaml.YAMLError:
                found[dotted] = raw
    return found


def _set_path(data: dict[str, Any], dotted: str, value: Any, label: str) -> None:
    parts = [part for part in dotted.split(".") if part]
    if not parts:
        raise ConfigError(f"empty override key {dotted!r}", source=label)
    node = data
    for depth, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            where = ".".join(parts[: depth + 1])
            raise ConfigError(
                [(where, f"cannot override {dotted!r}: {where} is a {type(child).__name__}, not a section")], source=label
            )
        node = child
    node[parts[-1]] = value
