"""Configuration: read, translate (MemoryScope 0.1.x), validate — before anything runs.

config = load_config("default")                 # a shipped config, by name
config = load_config("my.yaml", overrides={"global.language": "zh"})

The package holds modules of two heights: leaves every layer uses (`bounds`, `specs`: the
`global:` settings and the spec types), and the loader (`loading`, `schema`), which imports every
registry to check a config and so sits above workers, stores, services and chats. Python runs
this file before any module of the package, so it imports nothing: the names below are imported
on first use, and `from memoryscope.config.bounds import BoundedParams` in a worker does not pull
in the loader (which would import that worker back).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["Config", "GlobalSettings", "load_config", "shipped_config_names", "validate_config"]

if TYPE_CHECKING:
    from memoryscope.config.loading import load_config
    from memoryscope.config.schema import validate_config
    from memoryscope.config.source import shipped_config_names
    from memoryscope.config.specs import Config, GlobalSettings

_HOMES = {
    "Config": "memoryscope.config.specs",
    "GlobalSettings": "memoryscope.config.specs",
    "load_config": "memoryscope.config.loading",
    "shipped_config_names": "memoryscope.config.source",
    "validate_config": "memoryscope.config.schema",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'memoryscope.config' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value
