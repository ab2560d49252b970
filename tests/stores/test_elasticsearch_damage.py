"""`elasticsearch_memory_store` reading a document another program wrote with a value of the wrong
kind: searches and scans leave it out with a warning naming it, the others come back; the store's
`check` (what `memoryscope doctor` prints) names the user. Against `FakeElasticsearch`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores.base import MemoryFilter, SearchMode
from memoryscope.testing.fake_elasticsearch import FakeElasticsearch
from memoryscope.testing.store_contract import make_node

pytest.importorskip("elasticsearch", reason='needs the Elasticsearch client: pip install "memoryscope[elasticsearch]"')

from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore

ANN = MemoryFilter("ann")
INDEX = "memories"


@pytest.fixture
def server() -> Iterator[FakeElasticsearch]:
    with FakeElasticsearch() as running:
        yield running


@pytest.fixture
def store(server: FakeElasticsearch, embedding_model: LocalEmbedding) -> Iterator[ElasticsearchMemoryStore]:
    with ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=embedding_model) as opened:
        opened.upsert([make_node("Ann likes green tea", memory_id="good"), make_node("Ann plays the guitar", memory_id="bad")])
        yield opened


def _hits(server: FakeElasticsearch, **damage: Any) -> list[dict[str, Any]]:
    """Both documents as search hits, `bad` with the fields of `damage`."""
    documents = server.documents(INDEX)
    documents["bad"].update(damage)
    return [{"_id": doc_id, "_score": 1.0, "_source": documents[doc_id]} for doc_id in ("good", "bad")]


@pytest.mark.parametrize(
    "damage", [{"access_count": "abc"}, {"created_at": "abc"}, {"reflected": "yes"}, {"memory_type": 12}], ids=str
)
def test_a_document_of_the_wrong_kind_is_left_out_of_searches_and_scans(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore, damage: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    [field] = damage
    for mode in (SearchMode.DENSE, SearchMode.KEYWORD):
        server.script_search(_hits(server, **damage))
        assert [node.memory_id for node in store.search(ANN, query="Ann", mode=mode)] == ["good"]
    server.script_search(_hits(server, **damage))
    assert [node.memory_id for node in store.scan(ANN)] == ["good"]
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 3
    assert all("'bad'" in warning and "damaged" in warning and field in warning for warning in warnings)


def test_check_reads_every_user(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    assert store.check(full=True) == {"memories": []}
