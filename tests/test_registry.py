"""Registries: one list of names per kind, lazy discovery, dotted paths to user code."""

from __future__ import annotations

import pytest

from memoryscope.errors import ConfigError, UnknownNameError
from memoryscope.models.base import EMBEDDING_BACKENDS, GENERATION_BACKENDS, RANK_BACKENDS
from memoryscope.registry import Registry
from memoryscope.stores.base import STORES
from memoryscope.worker import WORKERS


class Base:
    pass


def test_builtin_names_are_discovered_from_their_packages() -> None:
    assert {"set_query", "extract_time", "retrieve_memory", "semantic_rank", "fuse_rerank"} <= set(WORKERS.names())
    assert {"openai_like", "openai", "dashscope"} <= set(GENERATION_BACKENDS.names())
    assert {"bge_embedding", "local_embedding"} <= set(EMBEDDING_BACKENDS.names())
    assert {"bge_rank", "dashscope_rank", "fusion_rank"} <= set(RANK_BACKENDS.names())
    assert {"sqlite_memory_store", "elasticsearch_memory_store"} <= set(STORES.names())


def test_unknown_name_lists_known_ones_and_the_closest() -> None:
    registry: Registry[type[Base]] = Registry("widget", Base)
    registry.register("blue_widget")(type("BlueWidget", (Base,), {}))
    with pytest.raises(UnknownNameError) as caught:
        registry.get("blu_widget", "widgets.a.class")
    assert str(caught.value) == "widgets.a.class: unknown widget 'blu_widget'. Did you mean 'blue_widget'? Known: blue_widget"


def test_the_same_name_cannot_mean_two_classes() -> None:
    registry: Registry[type[Base]] = Registry("widget", Base)
    registry.register("w")(type("One", (Base,), {}))
    with pytest.raises(ConfigError, match="registered twice"):
        registry.register("w")(type("Two", (Base,), {}))


def test_dotted_paths_import_user_classes_checked_against_the_base() -> None:
    registry: Registry[type[Base]] = Registry("widget", Base)
    assert registry.get(f"{__name__}.Base") is Base
    with pytest.raises(ConfigError, match="is not a widget"):
        registry.get("collections.OrderedDict", "w.class")
    with pytest.raises(ConfigError, match="cannot import 'no_such_module'"):
        registry.get("no_such_module.Thing", "w.class")
    with pytest.raises(ConfigError, match="has no 'Nope'"):
        registry.get(f"{__name__}.Nope", "w.class")
