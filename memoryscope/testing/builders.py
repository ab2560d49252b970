"""Build parts the way a config would, for tests: `build_worker("semantic_rank", {"top_k": 1}, env)`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from memoryscope.config.specs import GlobalSettings
from memoryscope.env import Env
from memoryscope.errors import ConfigError
from memoryscope.stores.base import MemoryStore
from memoryscope.worker import WORKERS, Worker

__all__ = ["build_worker", "make_env"]


def make_env(store: MemoryStore | None = None, models: Mapping[str, Any] | None = None, **settings: Any) -> Env:
    """An Env with `global:` settings given as keyword arguments (`language="zh"`)."""
    return Env(settings=GlobalSettings(**settings), models=dict(models or {}), store=store)


def build_worker(
    class_name: str, params: Mapping[str, Any] | None = None, env: Env | None = None, name: str | None = None
) -> Worker:
    """A worker built from a dict as the YAML `worker.<name>:` entry would be, then bound."""
    name = name or class_name
    where = f"worker.{name}"
    cls = WORKERS.get(class_name, f"{where}.class")
    try:
        validated = cls.Params.model_validate(dict(params or {}))
    except ValidationError as error:
        raise ConfigError([(f"{where}.{'.'.join(map(str, item['loc']))}", item["msg"]) for item in error.errors()]) from None
    worker = cls(name, validated)
    worker.bind(env or make_env())
    return worker
