"""The shared store contract against a real Elasticsearch 8.x server.

Runs only when `MEMORYSCOPE_ES_URL` is set (e.g. `http://localhost:9200`, the docker-compose
server). Optional: `MEMORYSCOPE_ES_API_KEY`, or `MEMORYSCOPE_ES_USERNAME` and
`MEMORYSCOPE_ES_PASSWORD`; `MEMORYSCOPE_ES_CA_CERTS` for https with a private CA. Each test gets
its own index `memoryscope_test_<run>_<n>`, deleted after the test (and any left over from this
run at the end of the session)::

    MEMORYSCOPE_ES_URL=http://localhost:9200 pytest -m elasticsearch tests/stores/test_elasticsearch_contract.py
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from memoryscope.models.base import EmbeddingModel
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores.base import MemoryStore
from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore
from memoryscope.testing.store_contract import StoreContract

ES_URL = os.environ.get("MEMORYSCOPE_ES_URL", "")
RUN = uuid.uuid4().hex[:8]
PREFIX = f"memoryscope_test_{RUN}_"
_numbers = itertools.count()

pytestmark = [
    pytest.mark.elasticsearch,
    pytest.mark.skipif(not ES_URL, reason="set MEMORYSCOPE_ES_URL to run the store contract against Elasticsearch"),
]


def _settings() -> dict[str, Any]:
    """Store keyword arguments from the MEMORYSCOPE_ES_* environment variables."""
    settings: dict[str, Any] = {"hosts": [ES_URL], "request_timeout": 30.0}
    if os.environ.get("MEMORYSCOPE_ES_API_KEY"):
        settings["api_key_env"] = "MEMORYSCOPE_ES_API_KEY"
    if os.environ.get("MEMORYSCOPE_ES_USERNAME"):
        settings.update(username_env="MEMORYSCOPE_ES_USERNAME", password_env="MEMORYSCOPE_ES_PASSWORD")
    if os.environ.get("MEMORYSCOPE_ES_CA_CERTS"):
        settings["ca_certs"] = os.environ["MEMORYSCOPE_ES_CA_CERTS"]
    return settings


@pytest.fixture(scope="session")
def embedding_model() -> LocalEmbedding:
    return LocalEmbedding()


@pytest.fixture(scope="session")
def admin(embedding_model: LocalEmbedding) -> Iterator[Any]:
    """A client for cleaning up: the store's own, through a store that never touches an index."""
    with ElasticsearchMemoryStore(index_name=f"{PREFIX}admin", embedding_model=embedding_model, **_settings()) as store:
        client = store.client  # the same connection settings as the stores under test
        yield client
        leftovers = client.indices.get(index=f"{PREFIX}*", allow_no_indices=True, expand_wildcards="open")
        for name in leftovers:  # by name: wildcard deletes are refused by default (action.destructive_requires_name)
            client.indices.delete(index=name, ignore_unavailable=True)


class TestElasticsearchStoreContract(StoreContract):
    @pytest.fixture
    def store(self, embedding_model: LocalEmbedding, admin: Any) -> Iterator[ElasticsearchMemoryStore]:
        index_name = f"{PREFIX}{next(_numbers)}"
        try:
            with ElasticsearchMemoryStore(index_name=index_name, embedding_model=embedding_model, **_settings()) as opened:
                yield opened
        finally:
            # by the indices behind the name: after a re-embed it is an alias, which DELETE refuses
            for name in admin.indices.get(index=index_name, ignore_unavailable=True):
                admin.indices.delete(index=name, ignore_unavailable=True)

    def reopen(self, store: MemoryStore, embedding_model: EmbeddingModel) -> MemoryStore:
        if not isinstance(store, ElasticsearchMemoryStore):
            raise TypeError(f"expected an ElasticsearchMemoryStore, got {type(store).__name__}")
        reopened = ElasticsearchMemoryStore(index_name=store.index_name, embedding_model=embedding_model, **_settings())
        try:
            reopened.ensure_index()  # the index is checked on first use; the contract wants it at opening
        except BaseException:
            reopened.close()
            raise
        return reopened

    def reopen_to_reembed(self, store: MemoryStore, embedding_model: EmbeddingModel) -> MemoryStore:
        if not isinstance(store, ElasticsearchMemoryStore):
            raise TypeError(f"expected an ElasticsearchMemoryStore, got {type(store).__name__}")
        return ElasticsearchMemoryStore(
            index_name=store.index_name, embedding_model=embedding_model, allow_model_change=True, **_settings()
        )
