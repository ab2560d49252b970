"""Metadata filters in `elasticsearch_memory_store` against `FakeElasticsearch`: the `nested`
queries every filtered request carries (pinned), how an index from before `meta_index` is
upgraded, refuses metadata filters until its older memories are filled, and is filled in place,
and the fake's `nested` semantics. The meaning itself is pinned by the store contract."""

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
from memoryscope.stores import _es_queries
from memoryscope.stores.base import MemoryFilter, SearchMode
from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore
from memoryscope.stores.metadata import metadata_conditions
from memoryscope.testing.fake_elasticsearch import FakeElasticsearch
from memoryscope.text import KEYWORD_TEXT_VERSION, keyword_text

pytest.importorskip("elasticsearch", reason='needs the Elasticsearch client: pip install "memoryscope[elasticsearch]"')

INDEX = "memories"
T0 = datetime(2024, 10, 26, 21, 26, 20, 123456, tzinfo=timezone(timedelta(hours=8)))
USER_TERM = {"term": {"user_name": "ann"}}
V2_META = {"embedding_model": "ones-4d", "dimension": 4, "schema_version": 2, "keyword_text_version": KEYWORD_TEXT_VERSION}
UPGRADED_META = {"embedding_model": "ones-4d", "dimension": 4, "schema_version": 4, "keyword_text_version": KEYWORD_TEXT_VERSION}
META_INDEX_MAPPING = {
    "type": "nested",
    "properties": {
        "key": {"type": "keyword"},
        "text": {"type": "keyword"},
        "number": {"type": "double"},
        "time": {"type": "double"},
    },
}
OCTOBER_1 = 1727740800.0  # 2024-10-01T00:00:00Z


class OnesEmbedding(EmbeddingModel):
    """The same 4-d vector for every text."""

    backend = "ones"

    def __init__(self) -> None:
        super().__init__("ones-4d")

    @property
    def dimension(self) -> int:
        return 4

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32)

    embed_queries = embed_passages = _embed


def node(memory_id: str, **fields: Any) -> MemoryNode:
    return MemoryNode(user_name="ann", content=f"memo {memory_id}", memory_id=memory_id, created_at=T0, updated_at=T0, **fields)


def nested(key: str, *tests: dict[str, Any]) -> dict[str, Any]:
    return {"nested": {"path": "meta_index", "query": {"bool": {"filter": [{"term": {"meta_index.key": key}}, *tests]}}}}


FILTERS = {
    "category": "music",
    "rating": {"gte": 3, "lt": 5},
    "due": {"lt": "2024-10-01T08:00:00+08:00"},
    "tags": {"in": ["a", 2, True, "2024-10-01"]},
}
CLAUSES = [
    USER_TERM,
    nested("category", {"term": {"meta_index.text": "music"}}),
    nested("rating", {"range": {"meta_index.number": {"gte": 3.0}}}, {"range": {"meta_index.number": {"lt": 5.0}}}),
    nested("due", {"range": {"meta_index.time": {"lt": OCTOBER_1}}}),
    nested(
        "tags",
        {
            "bool": {
                "should": [
                    {"terms": {"meta_index.text": ["a", "true"]}},
                    {"term": {"meta_index.number": 2.0}},
                    {"term": {"meta_index.time": OCTOBER_1}},
                ],
                "minimum_should_match": 1,
            }
        },
    ),
]
MATCHING = node(
    "hit", meta={"category": "music", "rating": 4, "due": "2024-09-30T12:00:00Z", "tags": ["b", "2024-10-01T00:00:00+00:00"]}
)


@pytest.fixture
def server() -> Iterator[FakeElasticsearch]:
    with FakeElasticsearch() as running:
        yield running


@pytest.fixture
def store(server: FakeElasticsearch) -> Iterator[ElasticsearchMemoryStore]:
    with ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=OnesEmbedding()) as opened:
        yield opened


def test_every_filtered_request_carries_one_nested_query_per_key(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    store.upsert([MATCHING, node("miss", meta={**MATCHING.meta, "rating": [1, 10]})])
    memory_filter = MemoryFilter("ann", metadata=metadata_conditions(FILTERS))
    assert [n.memory_id for n in store.search(memory_filter, query="memo", mode=SearchMode.DENSE)] == ["hit"]
    assert server.requests_to("_search")[-1].body["knn"]["filter"] == {"bool": {"filter": CLAUSES}}
    assert [n.memory_id for n in store.search(memory_filter, query="memo", mode=SearchMode.KEYWORD)] == ["hit"]
    assert server.requests_to("_search")[-1].body["query"]["bool"]["filter"] == CLAUSES
    assert [n.memory_id for n in store.scan(memory_filter)] == ["hit"]
    assert server.requests_to("_search")[-1].body["query"] == {"bool": {"filter": CLAUSES}}
    assert store.count(memory_filter) == 1
    assert server.requests_to("_count")[-1].body == {"query": {"bool": {"filter": CLAUSES}}}
    assert store.delete_by_filter(memory_filter) == 1
    assert server.requests_to("_delete_by_query")[-1].body == {"query": {"bool": {"filter": CLAUSES}}}
    assert [n.memory_id for n in store.scan(MemoryFilter("ann"))] == ["miss"]


def test_documents_carry_their_indexed_values_and_reads_leave_them_out(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    store.upsert([MATCHING, node("plain")])
    stored = server.documents(INDEX)
    assert stored["hit"]["meta_index"] == [
        {"key": "category", "text": "music"},
        {"key": "rating", "number": 4.0},
        {"key": "due", "text": "2024-09-30T12:00:00Z", "time": OCTOBER_1 - 12 * 3600},
        {"key": "tags", "text": "b"},
        {"key": "tags", "text": "2024-10-01T00:00:00+00:00", "time": OCTOBER_1},
    ]
    assert "meta_index" not in stored["plain"]  # nothing to index: no empty list
    assert store.get(["hit"]) == [MATCHING]
    store.update("hit", meta={"category": "sport"})  # a change of meta rewrites the whole document
    assert server.documents(INDEX)["hit"]["meta_index"] == [{"key": "category", "text": "sport"}]


# ---- an index from before `meta_index` (schema version 2) ----------------------------------------


def v2_mappings() -> dict[str, Any]:
    mappings = _es_queries.index_body(embedding_model="ones-4d", dimension=4, analyzer="standard")["mappings"]
    del mappings["properties"]["meta_index"]
    del mappings["properties"]["rank_terms"]  # came with schema version 4
    return {**mappings, "_meta": dict(V2_META)}


def v2_document(memory: MemoryNode) -> dict[str, Any]:
    source = {name: value for name, value in memory.to_dict().items() if name != "score"}
    return {**source, "keywords": keyword_text(memory), "vector": [0.5, 0.5, 0.5, 0.5]}


OLD = {"a": node("a", meta={"category": "music", "n": 1}), "b": node("b"), "c": node("c", meta={"category": "sport"})}
MUSIC = MemoryFilter("ann", metadata=metadata_conditions({"category": "music"}))


@pytest.fixture
def old_server() -> Iterator[FakeElasticsearch]:
    with FakeElasticsearch() as running:
        running.create_index(INDEX, v2_mappings(), {memory_id: v2_document(n) for memory_id, n in OLD.items()})
        yield running


def open_store(server: FakeElasticsearch) -> ElasticsearchMemoryStore:
    return ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=OnesEmbedding())


def test_an_index_from_before_the_field_gets_it_and_refuses_metadata_filters_until_filled(
    old_server: FakeElasticsearch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="memoryscope.stores.elasticsearch"), open_store(old_server) as store:
        assert store.count(MemoryFilter("ann")) == 3  # reads without metadata conditions go on as before
        assert [(r.method, r.path) for r in old_server.requests] == [
            ("HEAD", f"/{INDEX}"), ("GET", f"/{INDEX}/_mapping"), ("PUT", f"/{INDEX}/_mapping"), ("POST", f"/{INDEX}/_count")
        ]  # fmt: skip
        assert old_server.requests[2].body == {
            "properties": {"meta_index": META_INDEX_MAPPING, "rank_terms": {"type": "object", "enabled": False}},
            "_meta": UPGRADED_META,
        }
        [warning] = caplog.records  # the keywords are filled already: only the metadata is named
        assert "no 'meta_index' objects yet, so metadata filters are refused" in warning.getMessage()
        reads = {
            "count": lambda: store.count(MUSIC),
            "scan": lambda: store.scan(MUSIC),
            "search": lambda: store.search(MUSIC, query="memo", mode=SearchMode.HYBRID),
            "delete": lambda: store.delete_by_filter(MUSIC),
        }
        for name, read in reads.items():
            with pytest.raises(StoreError, match=r"run `memoryscope reembed --config CONFIG` once to fill them"):
                read()
            assert old_server.requests[-1].path == f"/{INDEX}/_mapping", name  # looked again, then refused
        assert store.count(MemoryFilter("ann")) == 3  # nothing was deleted


def test_filling_writes_only_the_missing_objects_then_metadata_filters_work_everywhere(
    old_server: FakeElasticsearch,
) -> None:
    with open_store(old_server) as store, open_store(old_server) as other:
        other.count(MemoryFilter("ann"))  # another process, opened before the fill
        store.upsert([node("d", meta={"category": "music"})])  # written now: has its objects already
        old_server.clear_requests()
        # "a", "b" and "c" lack their ranker terms, "a" and "c" their objects ("b" has no
        # metadata); "d", written now, has both
        assert store.fill_keywords() == 3
        [bulk] = [r for r in old_server.requests_to("_bulk") if r.path == f"/{INDEX}/_bulk"]
        assert bulk.body == [
            {"update": {"_id": "a", "if_seq_no": 1, "if_primary_term": 1}},
            {"doc": {"meta_index": [{"key": "category", "text": "music"}, {"key": "n", "number": 1.0}], "rank_terms": "memo\n"}},
            {"update": {"_id": "b", "if_seq_no": 2, "if_primary_term": 1}},
            {"doc": {"rank_terms": "memo b\n"}},
            {"update": {"_id": "c", "if_seq_no": 3, "if_primary_term": 1}},
            {"doc": {"meta_index": [{"key": "category", "text": "sport"}], "rank_terms": "memo c\n"}},
        ]
        done = {**UPGRADED_META, "metadata_index_version": "1", "rank_terms_version": KEYWORD_TEXT_VERSION}
        assert old_server.requests[-1].body == {"_meta": done}
        assert sorted(n.memory_id for n in store.scan(MUSIC)) == ["a", "d"]
        assert sorted(n.memory_id for n in other.search(MUSIC, query="memo", mode=SearchMode.HYBRID)) == ["a", "d"]
        assert store.fill_keywords() == 0  # recorded: nothing read again


def test_updating_an_older_memory_gives_it_its_objects(old_server: FakeElasticsearch) -> None:
    with open_store(old_server) as store:
        store.update("a", reflected=True, updated_at=T0)
        assert old_server.requests_to("_update/a")[-1].body == {
            "doc": {
                "reflected": True,
                "meta_index": [{"key": "category", "text": "music"}, {"key": "n", "number": 1.0}],
                "rank_terms": "memo\n",
            }
        }
        store.update("a", access_count=2, updated_at=T0)
        assert old_server.requests_to("_update/a")[-1].body == {"doc": {"access_count": 2}}  # stored already


# ---- the fake's `nested` ----------------------------------------------------------------------------


def test_the_fake_matches_nested_objects_one_by_one_and_hides_them_elsewhere(server: FakeElasticsearch) -> None:
    with ElasticsearchMemoryStore(hosts=[server.url], index_name="fresh", embedding_model=OnesEmbedding()) as store:
        store.upsert([node("x", meta={"n": [1, 10], "k": "v"})])
        client = store.client

        def count(query: dict[str, Any]) -> int:
            return int(client.count(index="fresh", query=query)["count"])

        one_item = nested("n", {"range": {"meta_index.number": {"gte": 3}}}, {"range": {"meta_index.number": {"lt": 5}}})
        assert count(one_item) == 0  # no single object is between 3 and 5
        assert (
            count(
                {
                    "bool": {
                        "filter": [
                            nested("n", {"range": {"meta_index.number": {"gte": 3}}}),
                            nested("n", {"term": {"meta_index.number": 1}}),
                        ]
                    }
                }
            )
            == 1
        )
        assert count(nested("k", {"term": {"meta_index.text": "v"}})) == 1
        assert count({"term": {"meta_index.key": "k"}}) == 0  # outside a nested query the objects are not seen
        with pytest.raises(Exception, match="failed to find nested object under path"):
            count({"nested": {"path": "meta", "query": {"match_all": {}}}})
        with pytest.raises(Exception, match="nested"):
            count({"nested": {"path": "meta_index"}})
        document = {**server.documents("fresh")["x"]}
        with pytest.raises(Exception, match=r"dynamic introduction of \[colour\] within \[meta_index\]"):
            client.index(index="fresh", id="y", document={**document, "meta_index": [{"key": "k", "colour": "red"}]})
        with pytest.raises(Exception, match=r"failed to parse field \[meta_index.number\]"):
            client.index(index="fresh", id="y", document={**document, "meta_index": [{"key": "k", "number": "many"}]})
