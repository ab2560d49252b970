"""`load_config`: read a config, translate MemoryScope 0.1.x's forms, validate it."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from memoryscope.config.legacy import translate_legacy
from memoryscope.config.schema import validate_config
from memoryscope.config.source import apply_overrides, read_config_source
from memoryscope.config.specs import Config
from memoryscope.errors import ConfigError

__all__ = ["load_config"]


def load_config(
    source: str | Path | Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    adjust: Callable[[dict[str, Any]], None] | None = None,
) -> Config:
    """A validated config from a shipped name, a YAML path, or an already-parsed dict.

    `adjust` may change the raw dict after it is read, before the environment's and the
    `overrides`' values are set over it (MemoryScope 0.1.x `Arguments` are set this way, so
    both win over them, as over the YAML). `environ` (default: the process environment) fills
    `${VAR}`, applies `MEMORYSCOPE__...` overrides, and gives 0.1.x OpenAI backends their
    endpoint (`OPENAI_BASE_URL`). A dict is taken as it is, with `adjust` and `overrides`
    only (no `${VAR}`, no environment overrides).
    """
    if isinstance(source, Mapping):
        raw, label = copy.deepcopy(dict(source)), "config"
        if adjust is not None:
            adjust(raw)
        apply_overrides(raw, overrides, label)
    else:
        raw, label = read_config_source(source, overrides, environ, adjust=adjust)
    try:
        raw, notices, warnings = translate_legacy(raw, environ)
    except ConfigError as error:
        raise ConfigError(error.problems, source=label) from None
    return validate_config(raw, source=label, notices=tuple(notices), warnings=tuple(warnings))
