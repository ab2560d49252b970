"""`elasticsearch_memory_store` opens without a request: neither Elasticsearch nor the embedding
model is asked anything until an operation needs it; the model's vector size is then checked
against the index's `_meta`. The real client against `FakeElasticsearch`, a remote embedding
model against the fake OpenAI server (or a closed port where it is not running yet)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest

pytest.importorskip("elasticsearch", reason="needs the elasticsearch extra: pip install 'memoryscope[elasticsearch]'")

from memoryscope.errors import ModelError, StoreError
from memoryscope.models.embedding.bge_embedding import BgeEmbedding
from memoryscope.stores.base import MemoryFilter, SearchMode
from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore
from memoryscope.testing.fake_elasticsearch import FakeElasticsearch
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.testing.store_contract import make_node

ANN = MemoryFilter("ann")


@pytest.fixture
def cluster() -> Iterator[FakeElasticsearch]:
    with FakeElasticsearch() as running:
        yield running


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def remote_model(base_url: str, **params: object) -> BgeEmbedding:
    return BgeEmbedding(BgeEmbedding.Params(api_base=base_url, model_name="fake-bge", max_retries=0, **params))  # type: ignore[arg-type]  # pydantic coerces


def test_opening_sends_no_request_anywhere(cluster: FakeElasticsearch, fake_openai: FakeOpenAIServer) -> None:
    with ElasticsearchMemoryStore(hosts=[cluster.url], embedding_model=remote_model(fake_openai.base_url)):
        assert cluster.requests == []
        assert fake_openai.requests == []


def test_reads_of_an_existing_index_need_no_model_and_a_search_waits_for_it(cluster: FakeElasticsearch) -> None:
    with (
        FakeOpenAIServer() as server,
        ElasticsearchMemoryStore(hosts=[cluster.url], embedding_model=remote_model(server.base_url)) as store,
    ):
        store.upsert([make_node("likes green tea", memory_id="tea")])
    port = closed_port()
    with ElasticsearchMemoryStore(hosts=[cluster.url], embedding_model=remote_model(f"http://127.0.0.1:{port}/v1")) as store:
        assert store.count(ANN) == 1  # the index is opened and its model matched by name; no vector needed
        assert [node.memory_id for node in store.search(ANN, query="tea", mode=SearchMode.KEYWORD)] == ["tea"]
        with pytest.raises(ModelError, match=rf"127\.0\.0\.1:{port}.*cannot connect"):
            store.search(ANN, query="tea")
        with FakeOpenAIServer(port=port) as server:
            assert [node.memory_id for node in store.search(ANN, query="tea")] == ["tea"]
            assert [request.path for request in server.requests] == ["/v1/embeddings"]


def test_an_index_of_another_size_is_refused_when_the_size_is_learned(cluster: FakeElasticsearch) -> None:
    with (
        FakeOpenAIServer(embedding_dimension=64) as server,
        ElasticsearchMemoryStore(hosts=[cluster.url], embedding_model=remote_model(server.base_url)) as store,
    ):
        store.upsert([make_node("likes green tea")])
    bulks = [request for request in cluster.requests if request.path.endswith("/_bulk")]
    with (
        FakeOpenAIServer(embedding_dimension=32) as server,
        ElasticsearchMemoryStore(hosts=[cluster.url], embedding_model=remote_model(server.base_url)) as store,
    ):
        assert store.count(ANN) == 1
        with pytest.raises(StoreError) as raised:
            store.search(ANN, query="tea")
        with pytest.raises(StoreError, match="dimension 64"):  # every time, not only the first
            store.upsert([make_node("keeps bees")])
    message = str(raised.value)
    assert "'fake-bge'" in message and "dimension 64" in message and "dimension 32" in message
    assert "memoryscope reembed" in message and "dimensions: 64" in message and "memoryscope_memory" in message
    assert [request for request in cluster.requests if request.path.endswith("/_bulk")] == bulks  # nothing written


def test_a_configured_dimensions_creates_the_index_without_asking_the_model(
    cluster: FakeElasticsearch, fake_openai: FakeOpenAIServer
) -> None:
    model = remote_model(fake_openai.base_url, dimensions=128)
    with ElasticsearchMemoryStore(hosts=[cluster.url], embedding_model=model) as store:
        assert store.count(ANN) == 0  # the first use creates the index, its mapping sized from `dimensions`
        mapping = cluster.requests[1].body
        assert isinstance(mapping, dict) and mapping["mappings"]["properties"]["vector"]["dims"] == 128
        assert fake_openai.requests == []


def test_an_unreachable_cluster_is_one_error_not_the_clients_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    """The client logs each failed attempt with its HTTP library's traceback: at DEBUG only."""
    import elasticsearch

    port = closed_port()
    model = remote_model(f"http://127.0.0.1:{port}/v1")

    def fail_to_count() -> StoreError:
        client = elasticsearch.Elasticsearch([f"http://127.0.0.1:{port}"], max_retries=1)  # the default 3 only waits longer
        with ElasticsearchMemoryStore(client=client, embedding_model=model) as store, pytest.raises(StoreError) as raised:
            store.count(ANN)
        client.close()
        return raised.value

    with caplog.at_level(logging.WARNING):  # as the CLI logs
        error = fail_to_count()
    assert f"127.0.0.1:{port}" in str(error) and "cannot connect" in str(error) and "\n" not in str(error)
    assert [record.getMessage() for record in caplog.records] == []
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="elastic_transport"):
        fail_to_count()
    detail = [record for record in caplog.records if record.name.startswith("elastic_transport")]
    assert detail and {record.levelname for record in detail} == {"DEBUG"}
    assert any(record.exc_info for record in detail)  # the traceback is kept for whoever turns DEBUG on
