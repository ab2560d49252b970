"""The `keywords` field of `elasticsearch_memory_store` against `FakeElasticsearch`: the words
the SQLite store indexes, how an index from before the field is upgraded without losing
anything, and how its older memories get the field (`fill_keywords`, `memoryscope reembed`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from memoryscope.errors import StoreError
from memoryscope.memory import MemoryNode
from memoryscope.models.base import EmbeddingModel
from memoryscope.progress import Progress
from memoryscope.stores import _es_queries
from memoryscope.stores._es_metadata import META_INDEX_MAPPING
from memoryscope.stores.base import MemoryFilter, SearchMode
from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore
from memoryscope.testing.fake_elasticsearch import FakeElasticsearch
from memoryscope.text import KEYWORD_TEXT_VERSION
from memoryscope.transfer.stores import open_store, reembed

pytest.importorskip("elasticsearch", reason='needs the Elasticsearch client: pip install "memoryscope[elasticsearch]"')

INDEX = "memories"
ANN = MemoryFilter("ann")
T0 = datetime(2024, 10, 26, 21, 26, 20, 123456, tzinfo=timezone(timedelta(hours=8)))
OLD_META = {"embedding_model": "ones-4d", "dimension": 4, "schema_version": 1}
UPGRADED_META = {"embedding_model": "ones-4d", "dimension": 4, "schema_version": 4}
FILLED_META = {
    **UPGRADED_META,
    "keyword_text_version": KEYWORD_TEXT_VERSION,
    "metadata_index_version": "1",
    "rank_terms_version": KEYWORD_TEXT_VERSION,
}
FILLED = "filled the 'keywords' and 'rank_terms' fields and 'meta_index' objects of"
WARNING = "are not found by keyword search until their 'keywords' field is filled: run `memoryscope reembed --config CONFIG`"


class OnesEmbedding(EmbeddingModel):
    """The same 4-d vector for every text (these tests search by keyword)."""

    backend = "ones"

    def __init__(self) -> None:
        super().__init__("ones-4d")

    @property
    def dimension(self) -> int:
        return 4

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32)

    embed_queries = embed_passages = _embed


class Notes(Progress):
    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, message: str) -> None:
        self.notes.append(message)


def node(memory_id: str, content: str, **fields: Any) -> MemoryNode:
    return MemoryNode(user_name="ann", content=content, memory_id=memory_id, created_at=T0, updated_at=T0, **fields)


OLD_NODES = {
    "a": node("a", "likes green tea"),
    "b": node("b", "I have been painting", meta={"speaker": "Caroline", "context": "Melanie: any new hobby?"}),
}


def old_mappings() -> dict[str, Any]:
    """The mapping schema version 1 made: no `keywords` field (nor `meta_index`, which came with 3)."""
    mappings = _es_queries.index_body(embedding_model="ones-4d", dimension=4, analyzer="standard")["mappings"]
    del mappings["properties"]["keywords"]
    del mappings["properties"]["meta_index"]
    del mappings["properties"]["rank_terms"]  # came with 4
    return {**mappings, "_meta": dict(OLD_META)}


def old_document(memory: MemoryNode) -> dict[str, Any]:
    """A `_source` as schema version 1 wrote it: the node's fields and its vector, no `keywords`."""
    source = {name: value for name, value in memory.to_dict().items() if name != "score"}
    return {**source, "vector": [0.5, 0.5, 0.5, 0.5]}


@pytest.fixture
def server() -> Iterator[FakeElasticsearch]:
    with FakeElasticsearch() as running:
        running.create_index(INDEX, old_mappings(), {memory_id: old_document(n) for memory_id, n in OLD_NODES.items()})
        yield running


@pytest.fixture
def store(server: FakeElasticsearch) -> Iterator[ElasticsearchMemoryStore]:
    with ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=OnesEmbedding()) as opened:
        yield opened


def keyword_ids(store: ElasticsearchMemoryStore, query: str) -> list[str]:
    return sorted(n.memory_id for n in store.search(ANN, query=query, mode=SearchMode.KEYWORD))


def mappings_of(server: FakeElasticsearch) -> dict[str, Any]:
    with ElasticsearchMemoryStore(hosts=[server.url], index_name="unused", embedding_model=OnesEmbedding()) as admin:
        return dict(admin.client.indices.get_mapping(index=INDEX).body[INDEX]["mappings"])


def test_an_index_from_before_the_field_gets_it_when_opened_and_keeps_every_memory(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    before = server.documents(INDEX)
    with caplog.at_level(logging.WARNING, logger="memoryscope.stores.elasticsearch"):
        assert store.count(ANN) == 2
    assert [(r.method, r.path) for r in server.requests] == [
        ("HEAD", f"/{INDEX}"), ("GET", f"/{INDEX}/_mapping"), ("PUT", f"/{INDEX}/_mapping"), ("POST", f"/{INDEX}/_count")
    ]  # fmt: skip
    assert server.requests[2].body == {
        "properties": {
            "keywords": {"type": "text", "analyzer": "whitespace"},
            "meta_index": META_INDEX_MAPPING,
            "rank_terms": {"type": "object", "enabled": False},
        },
        "_meta": UPGRADED_META,
    }
    warning, metadata_warning = caplog.records
    assert WARNING in warning.getMessage() and f"'{INDEX}'" in warning.getMessage()
    assert "metadata filters are refused until `memoryscope reembed --config CONFIG` has run" in metadata_warning.getMessage()
    assert server.documents(INDEX) == before  # nothing rewritten, nothing lost
    assert store.get(["a", "b"]) == [OLD_NODES["a"], OLD_NODES["b"]]
    assert keyword_ids(store, "green tea") == []  # written before the field: not keyword-searchable yet
    # new writes are: every write sends the field
    store.upsert([node("c", "drinks green tea")])
    assert keyword_ids(store, "green tea") == ["c"]


def test_fill_keywords_sets_the_field_in_place_then_records_it(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    store.upsert([node("c", "drinks green tea")])
    vectors = {memory_id: source["vector"] for memory_id, source in server.documents(INDEX).items()}
    server.clear_requests()
    notes = Notes()
    assert store.fill_keywords(batch_size=2, progress=notes) == 2  # "c" has it already
    [first_page, second_page] = [r.body for r in server.requests_to("_search")]
    assert first_page == {
        "query": {"match_all": {}},
        "sort": [{"memory_id": {"order": "asc"}}],
        "size": 2,
        "track_total_hits": False,
        "_source": {"excludes": ["vector"]},
        "seq_no_primary_term": True,
    }
    assert second_page == {**first_page, "search_after": ["b"]}
    [bulk] = server.requests_to("_bulk")[-1:]
    assert bulk.body == [
        {"update": {"_id": "a", "if_seq_no": 1, "if_primary_term": 1}},
        {"doc": {"keywords": "like green tea", "rank_terms": "like green tea\n"}},
        {"update": {"_id": "b", "if_seq_no": 2, "if_primary_term": 1}},
        {
            "doc": {
                "keywords": "i have been paint carolin melani any new hobbi",
                "meta_index": [{"key": "speaker", "text": "Caroline"}, {"key": "context", "text": "Melanie: any new hobby?"}],
                "rank_terms": "paint\ncarolin melani new hobbi",  # own words, then the words around
            }
        },
    ]
    assert server.requests[-1].method == "PUT" and server.requests[-1].body == {"_meta": FILLED_META}
    assert notes.notes == [f"{FILLED} 2 memories"]
    assert [n.rank_terms for n in store.get(["a", "b"])] == ["like green tea\n", "paint\ncarolin melani new hobbi"]
    # the memories are as they were, vectors included, and keyword search finds them now
    assert {memory_id: source["vector"] for memory_id, source in server.documents(INDEX).items()} == vectors
    assert store.get(["a", "b"]) == [OLD_NODES["a"], OLD_NODES["b"]]
    assert keyword_ids(store, "green teas") == ["a", "c"]
    assert keyword_ids(store, "Caroline's hobbies") == ["b"]
    # opened again: nothing to upgrade, nothing to warn about, nothing to fill
    server.clear_requests()
    caplog.clear()
    with (
        caplog.at_level(logging.WARNING, logger="memoryscope.stores.elasticsearch"),
        ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=OnesEmbedding()) as again,
    ):
        assert again.fill_keywords() == 0
    assert caplog.records == []
    assert [r.method for r in server.requests if r.path.endswith("_mapping")] == ["GET", "GET"]


def test_fill_keywords_skips_memories_written_meanwhile_and_reports_real_failures(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    # a writer changed "a" after the page was read: its own write carries the field, so it wins
    server.fail_items({"a": ("version_conflict_engine_exception", "[a]: version conflict")}, status=409)
    assert store.fill_keywords() == 1
    server.create_index(INDEX, old_mappings(), {memory_id: old_document(n) for memory_id, n in OLD_NODES.items()})
    server.fail_items({"a": "failed to parse field [keywords]"})
    with (
        ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=OnesEmbedding()) as again,
        pytest.raises(StoreError, match=r"filling keywords: 1 memories failed \(a: mapper_parsing_exception"),
    ):
        again.fill_keywords()
    assert mappings_of(server)["_meta"] == UPGRADED_META  # not recorded as filled


def test_update_gives_an_older_memory_its_keywords(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.update("a", reflected=True, updated_at=T0)
    assert server.requests_to("_update/a")[-1].body == {
        "doc": {"reflected": True, "keywords": "like green tea", "rank_terms": "like green tea\n"}
    }
    assert keyword_ids(store, "tea") == ["a"]
    store.update("a", access_count=2, updated_at=T0)
    assert server.requests_to("_update/a")[-1].body == {"doc": {"access_count": 2}}  # stored already


def test_keyword_search_without_any_word_sends_nothing(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.count(ANN)
    assert store.search(ANN, query="?!", mode=SearchMode.KEYWORD) == []
    assert server.requests_to("_search") == []
    store.upsert([node("c", "the end")])
    # only stopwords: every word is looked for, as in the SQLite store
    assert keyword_ids(store, "The") == ["c"]
    assert server.requests_to("_search")[-1].body["query"]["bool"]["must"] == [
        {"match": {"keywords": {"query": "the", "operator": "or"}}}
    ]


def test_the_reembed_command_fills_the_field_when_the_model_is_unchanged(server: FakeElasticsearch) -> None:
    local = {"class": "llama_index_embedding_model", "module_name": "local_embedding"}
    settings = {"class": "elasticsearch_memory_store", "hosts": [server.url], "index_name": "local"}
    config = {"model": {"embedding_model": local}, "memory_store": {**settings, "embedding_model": "embedding_model"}}
    with open_store(config) as store:  # built lazily: this touches no index
        name, dimension = store.embedding_model.model_name, int(store.dimension)
    assert server.requests == []
    mappings = {**old_mappings(), "_meta": {"embedding_model": name, "dimension": dimension, "schema_version": 1}}
    mappings["properties"]["vector"]["dims"] = dimension
    server.create_index("local", mappings, {"a": {**old_document(OLD_NODES["a"]), "vector": [1.0] * dimension}})
    notes = Notes()
    assert reembed(config, progress=notes) == 0  # nothing re-embedded...
    assert notes.notes[-1] == f"{FILLED} 1 memories"  # ...but the fields filled
    assert server.documents("local")["a"]["keywords"] == "like green tea"
    assert server.requests_to("_search") and not server.requests_to("_aliases")  # in place, no copy


def test_the_fake_analyses_each_field_with_its_analyzer_and_refuses_a_changed_field(server: FakeElasticsearch) -> None:
    with ElasticsearchMemoryStore(hosts=[server.url], index_name="fresh", embedding_model=OnesEmbedding()) as store:
        store.upsert([node("x", "Tea, please")])  # keywords "tea please"; content "Tea, please"
        client = store.client
        # `whitespace` neither lower-cases nor strips punctuation; `standard` does both
        assert client.count(index="fresh", query={"match": {"keywords": "Tea,"}})["count"] == 0
        assert client.count(index="fresh", query={"match": {"keywords": "tea"}})["count"] == 1
        assert client.count(index="fresh", query={"match": {"content": "TEA!"}})["count"] == 1
        both = {"match": {"keywords": {"query": "tea coffee", "operator": "and"}}}
        assert client.count(index="fresh", query=both)["count"] == 0
        with pytest.raises(Exception, match="conflicts with existing mapper"):
            client.indices.put_mapping(index="fresh", properties={"keywords": {"type": "text", "analyzer": "standard"}})
        with pytest.raises(Exception, match="cannot be changed from type"):
            client.indices.put_mapping(index="fresh", properties={"keywords": {"type": "keyword"}})
        client.indices.put_mapping(index="fresh", properties={"keywords": {"type": "text", "analyzer": "whitespace"}})
        assert mappings_of_index(client, "fresh")["properties"]["keywords"] == {"type": "text", "analyzer": "whitespace"}


def mappings_of_index(client: Any, index: str) -> dict[str, Any]:
    return dict(client.indices.get_mapping(index=index).body[index]["mappings"])
