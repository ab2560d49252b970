"""Configuration: read, translate (MemoryScope 0.1.x), validate — before anything runs.

config = load_config("default")                 # a shipped config, by name
config = load_config("my.yaml", overrides={"global.language": "zh"})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from memoryscope.config.legacy import is_legacy, translate_legacy
from memoryscope.config.schema import Config, GlobalSettings, validate_config
from memoryscope.config.source import read_config_source, shipped_config_names
from memoryscope.errors import ConfigError

__all__ = ["Config", "GlobalSettings", "load_config", "shipped_config_names", "validate_config"]


def load_config(
    source: str | Path | Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    adjust: Callable[[dict[str, Any]], None] | None = None,
) -> Config:
    """A validated config from a shipped name, a YAML path, or an already-parsed dict.

    `adjust` may change the raw dict after it is read and before it is translated and checked
    (MemoryScope 0.1.x `Arguments` are set this way).
    """
    if isinstance(source, Mapping):
        raw, label = dict(source), "config"
    else:
        raw, label = read_config_source(source, overrides, environ)
    if adjust is not None:
        adjust(raw)
    notices: list[str] = []
    if is_legacy(raw):
        try:
            raw, notices = translate_legacy(raw)
        except ConfigError as error:
            raise ConfigError(error.problems, source=label) from None
    return validate_config(raw, source=label, notices=tuple(notices))
