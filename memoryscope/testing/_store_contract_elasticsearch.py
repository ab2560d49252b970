"""`ElasticsearchContract`: the store contract's hooks for an Elasticsearch cluster (see `es_contract`).

How each check builds its store (a fresh index `<index_prefix><n>` on the cluster `es_settings`
names), reopens it (`reopen`, `reopen_to_reembed`: the same settings, read back from the
store's `params`) and cleans up (the index, or the indices behind it after a re-embed, and its
companions `<name>-*`: history, leases). Import it from `memoryscope.testing.es_contract`.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from memoryscope.models.base import EmbeddingModel
from memoryscope.stores.base import MemoryStore
from memoryscope.testing.es_contract import URL_VARIABLE, delete_indices, settings_from_environment
from memoryscope.testing.store_contract import StoreContract

if TYPE_CHECKING:
    from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore

__all__ = ["ElasticsearchContract"]

_numbers = itertools.count()  # one sequence per process: index names never repeat within a run


class ElasticsearchContract(StoreContract):
    """The store contract against an Elasticsearch cluster; subclass it in a test module.

    Which cluster: the `es_settings` fixture, keyword arguments of `ElasticsearchMemoryStore`
    (`hosts`, `api_key_env`, ...; not `index_name`, `embedding_model` or `client`). By default they
    come from the environment (`settings_from_environment`) and the checks skip without
    `MEMORYSCOPE_ES_URL`. Override the fixture to name another cluster::

        class TestOnMyCluster(ElasticsearchContract):
            index_prefix = "memoryscope_ci_"

            @pytest.fixture
            def es_settings(self):
                return {"hosts": ["https://es.internal:9200"], "api_key_env": "ES_API_KEY"}

    Each check gets a fresh index `<index_prefix><n>`, deleted afterwards with its companions
    unless `keep_indices`. `embedding_model` is the offline `LocalEmbedding`.
    """

    index_prefix: ClassVar[str] = f"memoryscope_contract_{uuid.uuid4().hex[:8]}_"
    keep_indices: ClassVar[bool] = False

    @pytest.fixture
    def embedding_model(self) -> EmbeddingModel:
        from memoryscope.models.embedding.local_embedding import LocalEmbedding  # imports its engine: only when needed

        return LocalEmbedding()  # cheap to make (the engine is loaded once per process)

    @pytest.fixture
    def es_settings(self) -> dict[str, Any]:
        if not os.environ.get(URL_VARIABLE):
            pytest.skip(f"set {URL_VARIABLE} to run the store contract against Elasticsearch")
        return settings_from_environment()

    @pytest.fixture
    def store(self, es_settings: dict[str, Any], embedding_model: EmbeddingModel) -> Iterator[ElasticsearchMemoryStore]:
        from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore

        index_name = f"{self.index_prefix}{next(_numbers)}"
        with ElasticsearchMemoryStore(index_name=index_name, embedding_model=embedding_model, **es_settings) as opened:
            try:
                yield opened
            finally:
                if not self.keep_indices:
                    delete_indices(opened.client, index_name)

    def reopen(self, store: MemoryStore, embedding_model: EmbeddingModel) -> MemoryStore:
        reopened = _same_index(store, embedding_model)
        try:
            reopened.ensure_index()  # the index is checked on first use; the contract wants it at opening
        except BaseException:
            reopened.close()
            raise
        return reopened

    def reopen_to_reembed(self, store: MemoryStore, embedding_model: EmbeddingModel) -> MemoryStore:
        return _same_index(store, embedding_model, allow_model_change=True)


def _same_index(store: MemoryStore, embedding_model: EmbeddingModel, **options: Any) -> ElasticsearchMemoryStore:
    """Another store over `store`'s index, built from its validated settings as the app would."""
    from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore

    if not isinstance(store, ElasticsearchMemoryStore):
        raise TypeError(f"expected an ElasticsearchMemoryStore, got {type(store).__name__}")
    settings = store.params.model_dump(exclude={"embedding_model"})  # the YAML key naming the model, not a model
    return ElasticsearchMemoryStore(embedding_model=embedding_model, **settings, **options)
