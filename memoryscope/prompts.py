"""Prompts live beside their worker, in `workers/prompts/<worker>.yaml`, one block per language.

    en:
      system: |
        ...
      user: |
        ... {placeholders} ...
    zh:
      ...

`global.language` picks the block; a language the file lacks falls back to English.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from memoryscope.errors import ConfigError

__all__ = ["load_prompts"]


@lru_cache(maxsize=64)
def _read(worker: str) -> dict[str, Any]:
    resource = resources.files("memoryscope.workers").joinpath(f"prompts/{worker}.yaml")
    try:
        data = yaml.safe_load(resource.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no prompt file for worker {worker!r} (expected workers/prompts/{worker}.yaml)") from None
    if not isinstance(data, dict) or "en" not in data:
        raise ConfigError(f"workers/prompts/{worker}.yaml must map languages (at least `en`) to prompts")
    return data


def load_prompts(worker: str, language: str) -> dict[str, str]:
    """The prompt texts of `worker` in `language` (English when the file has no such block)."""
    data = _read(worker)
    block = data.get(language) or data["en"]
    return {str(key): str(value) for key, value in block.items()}
