"""Building a store from its validated `memory_store:` entry (used by MemoryScope and the transfer tools)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from memoryscope.config.specs import ComponentSpec
from memoryscope.errors import StoreError
from memoryscope.stores.base import MemoryStore

__all__ = ["build_store"]


def build_store(spec: ComponentSpec, embedding_model: Callable[[str], Any], *, allow_model_change: bool = False) -> MemoryStore:
    """The store `spec` describes; `embedding_model(key)` gives the model named by its `embedding_model:` key.

    `allow_model_change` opens a store whose vectors came from another model, to re-embed them.
    """
    values = spec.params.model_dump()
    key = values.pop("embedding_model", None)
    if key is not None:
        values["embedding_model"] = embedding_model(key)  # the key was checked when the config was validated
    if allow_model_change:
        if "allow_model_change" not in inspect.signature(spec.cls).parameters:
            raise StoreError(f"{spec.where}: {spec.cls.__name__} cannot be opened to re-embed its memories")
        values["allow_model_change"] = True
    store: MemoryStore = spec.cls(**values)
    return store
