"""`elasticsearch_memory_store` without a server: the real client and store against `FakeElasticsearch`.

Pins every request body the store sends (Elasticsearch 8.x REST API), the errors it raises, and
runs the shared store contract on the fake (which approximates Elasticsearch's search; the real
server runs it in `test_elasticsearch_contract.py`).
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar

import numpy as np
import pytest

from memoryscope.errors import StoreConflict, StoreError
from memoryscope.history import ChangeSource
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.models.base import EmbeddingModel
from memoryscope.stores import _es_queries
from memoryscope.stores.base import STORES, MemoryFilter, SearchMode, TimeRange
from memoryscope.stores.elasticsearch_store import BulkWriteError, ElasticsearchMemoryStore
from memoryscope.stores.fusion import reciprocal_rank_fusion
from memoryscope.testing.es_contract import ElasticsearchContract
from memoryscope.testing.fake_elasticsearch import FakeElasticsearch, RecordedRequest
from memoryscope.text import KEYWORD_TEXT_VERSION, keyword_text, rank_terms

pytestmark = pytest.mark.slow  # 193 tests over HTTP to the fake Elasticsearch; `-m "not slow"` leaves it out

# the client is an optional extra (the store imports it lazily); without it these tests cannot run
pytest.importorskip("elasticsearch", reason='needs the Elasticsearch client: pip install "memoryscope[elasticsearch]"')

INDEX = "memories"
ANN = MemoryFilter("ann")
T0 = datetime(2024, 10, 26, 21, 26, 20, 123456, tzinfo=timezone(timedelta(hours=8)))
USER_TERM = {"term": {"user_name": "ann"}}
SOURCE_SHOWN = {"excludes": ["vector", "keywords", "meta_index"]}  # reads leave out the vector and what is indexed for search


class TableEmbedding(EmbeddingModel):
    """4-d vectors from a fixed table (exact in float32, so pinned bodies stay readable); counts calls."""

    backend = "table"
    TABLE: ClassVar[dict[str, list[float]]] = {
        "likes green tea": [1.0, 0.0, 0.0, 0.0],
        "plays the guitar": [0.0, 1.0, 0.0, 0.0],
        "has a cat": [0.0, 0.0, 1.0, 0.0],
        "tea": [0.5, 0.5, 0.5, 0.5],
    }

    def __init__(self) -> None:
        super().__init__("table-4d")
        self.embedded: list[str] = []

    @property
    def dimension(self) -> int:
        return 4

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded.extend(texts)
        return np.asarray([self.TABLE[text] for text in texts], dtype=np.float32)

    embed_queries = embed_passages = _embed


@pytest.fixture
def server() -> Iterator[FakeElasticsearch]:
    with FakeElasticsearch() as running:
        yield running


@pytest.fixture
def model() -> TableEmbedding:
    return TableEmbedding()


@pytest.fixture
def store(server: FakeElasticsearch, model: TableEmbedding) -> Iterator[ElasticsearchMemoryStore]:
    with ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=model) as opened:
        yield opened


def node(memory_id: str, content: str = "likes green tea", **fields: Any) -> MemoryNode:
    fields.setdefault("created_at", T0)
    fields.setdefault("updated_at", T0)
    return MemoryNode(user_name=fields.pop("user_name", "ann"), content=content, memory_id=memory_id, **fields)


def document(
    memory_id: str, content: str = "likes green tea", vector: list[float] | None = None, **fields: Any
) -> dict[str, Any]:
    """The `_source` the store writes for `node(memory_id, content, **fields)`."""
    source: dict[str, Any] = {
        "user_name": "ann", "content": content, "memory_type": "observation", "target_name": "", "workspace": "",
        "memory_id": memory_id, "key": "", "value": "", "status": "valid", "superseded_by": "",
        "created_at": "2024-10-26T21:26:20.123456+08:00", "updated_at": "2024-10-26T21:26:20.123456+08:00",
        "event_time": None, "message_time": None, "source_message_ids": [], "reflected": False, "updated": False,
        "access_count": 0, "last_accessed_at": None, "meta": {},
    }  # fmt: skip
    meta_index = fields.pop("meta_index", None)
    source.update(fields)
    source.setdefault("keywords", keyword_text(MemoryNode.from_dict(source)))
    source.setdefault("rank_terms", rank_terms(MemoryNode.from_dict({k: v for k, v in source.items() if k != "keywords"})))
    if meta_index is not None:
        source["meta_index"] = meta_index
    if vector is not None:
        source["vector"] = vector
    return source


def last(server: FakeElasticsearch, action: str) -> RecordedRequest:
    """The last request to `action` on the memory index (not its history or leases index)."""
    side = (f"/{INDEX}-history", f"/{INDEX}-leases")
    return [r for r in server.requests_to(action) if not r.path.startswith(side)][-1]


E1, E2, E3 = [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]
HALVES = [0.5, 0.5, 0.5, 0.5]

# ---- the index ------------------------------------------------------------------------------------

PINNED_INDEX_BODY = {
    "mappings": {
        "dynamic": "strict",
        "_meta": {
            "embedding_model": "table-4d",
            "dimension": 4,
            "schema_version": 4,
            "keyword_text_version": KEYWORD_TEXT_VERSION,
            "metadata_index_version": "1",
            "rank_terms_version": KEYWORD_TEXT_VERSION,
        },
        "properties": {
            "memory_id": {"type": "keyword"},
            "user_name": {"type": "keyword"},
            "target_name": {"type": "keyword"},
            "workspace": {"type": "keyword"},
            "memory_type": {"type": "keyword"},
            "status": {"type": "keyword"},
            "superseded_by": {"type": "keyword"},
            "key": {"type": "keyword", "fields": {"text": {"type": "text", "analyzer": "standard"}}},
            "source_message_ids": {"type": "keyword"},
            "content": {"type": "text", "analyzer": "standard"},
            "value": {"type": "text", "analyzer": "standard"},
            "keywords": {"type": "text", "analyzer": "whitespace"},
            # the ranker's terms, parsed when written: kept in `_source`, never indexed
            "rank_terms": {"type": "object", "enabled": False},
            "reflected": {"type": "boolean"},
            "updated": {"type": "boolean"},
            "access_count": {"type": "integer"},
            "created_at": {"type": "date_nanos"},
            "updated_at": {"type": "date_nanos"},
            "event_time": {"type": "date"},
            "message_time": {"type": "date"},
            "last_accessed_at": {"type": "date"},
            "meta": {"type": "object", "enabled": False},
            "meta_index": {
                "type": "nested",
                "properties": {
                    "key": {"type": "keyword"},
                    "text": {"type": "keyword"},
                    "number": {"type": "double"},
                    "time": {"type": "double"},
                },
            },
            "vector": {
                "type": "dense_vector",
                "dims": 4,
                "index": True,
                "similarity": "cosine",
                "index_options": {"type": "hnsw"},
            },
        },
    }
}


def test_first_use_creates_the_index_with_the_pinned_mapping(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    assert server.requests == []  # nothing happens when the store is built
    store.count(ANN)
    head, create, count = server.requests
    assert (head.method, head.path, create.method, create.path) == ("HEAD", f"/{INDEX}", "PUT", f"/{INDEX}")
    assert create.body == PINNED_INDEX_BODY
    assert count.path == f"/{INDEX}/_count"
    store.count(ANN)
    assert len(server.requests) == 4  # the index is checked once


def test_analyzer_setting_reaches_every_text_field(server: FakeElasticsearch, model: TableEmbedding) -> None:
    with ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=model, analyzer="smartcn") as store:
        store.ensure_index()
    properties = last(server, f"/{INDEX}").body["mappings"]["properties"]
    assert properties["content"]["analyzer"] == properties["value"]["analyzer"] == "smartcn"
    assert properties["key"]["fields"]["text"]["analyzer"] == "smartcn"


def test_an_existing_index_for_the_same_model_is_checked_not_recreated(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    server.create_index(INDEX, PINNED_INDEX_BODY["mappings"])
    store.count(ANN)
    assert [(r.method, r.path) for r in server.requests] == [
        ("HEAD", f"/{INDEX}"), ("GET", f"/{INDEX}/_mapping"), ("POST", f"/{INDEX}/_count")
    ]  # fmt: skip


@pytest.mark.parametrize(("recorded", "dimension"), [("multilingual-e5-small", 4), ("table-4d", 384)])
def test_an_index_of_another_model_is_refused(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore, recorded: str, dimension: int
) -> None:
    mappings = {
        **PINNED_INDEX_BODY["mappings"],
        "_meta": {"embedding_model": recorded, "dimension": dimension, "schema_version": 2},
    }
    server.create_index(INDEX, mappings)
    with pytest.raises(StoreError) as caught:
        store.search(ANN, vector=np.asarray(E1), mode=SearchMode.DENSE)
    message = str(caught.value)
    assert recorded in message and "table-4d" in message and str(dimension) in message
    assert "memoryscope reembed --config" in message
    assert server.requests_to("_search") == []


def test_an_index_created_meanwhile_by_another_process_is_checked(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    server.create_index(INDEX, PINNED_INDEX_BODY["mappings"])
    server.fail_next(status=404, method="HEAD")  # it did not exist yet when the store looked
    assert store.count(ANN) == 0
    assert [(r.method, r.path, r.status) for r in server.requests] == [
        ("HEAD", f"/{INDEX}", 404),
        ("PUT", f"/{INDEX}", 400),  # resource_already_exists_exception
        ("GET", f"/{INDEX}/_mapping", 200),
        ("POST", f"/{INDEX}/_count", 200),
    ]


def test_an_index_of_another_schema_version_is_refused(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    server.create_index(
        INDEX, {**PINNED_INDEX_BODY["mappings"], "_meta": {"embedding_model": "table-4d", "dimension": 4, "schema_version": 5}}
    )
    with pytest.raises(StoreError, match="schema version 5; this MemoryScope reads 4"):
        store.count(ANN)


def test_an_index_not_made_by_memoryscope_is_refused(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    server.create_index(INDEX, {"properties": {"text": {"type": "text"}}})
    with pytest.raises(StoreError, match="not created by MemoryScope"):
        store.count(ANN)


# ---- search bodies ------------------------------------------------------------------------------

FULL_FILTER = MemoryFilter(
    "ann",
    target_name="bob",
    workspace="w1",
    memory_types=(MemoryType.INSIGHT, MemoryType.OBSERVATION),
    status=MemoryStatus.VALID,
    time_range=TimeRange("event_time", T0 - timedelta(days=7), T0),
    reflected=False,
    updated=True,
    memory_ids=("a", "b"),
)
FULL_FILTER_CLAUSES = [
    USER_TERM,
    {"term": {"target_name": "bob"}},
    {"term": {"workspace": "w1"}},
    {"terms": {"memory_type": ["insight", "observation"]}},
    {"term": {"status": "valid"}},
    {"term": {"reflected": False}},
    {"term": {"updated": True}},
    {"terms": {"memory_id": ["a", "b"]}},
    {"range": {"event_time": {"gte": "2024-10-19T21:26:20.123456+08:00", "lt": "2024-10-26T21:26:20.123456+08:00"}}},
]


def test_dense_search_body_is_knn_with_the_filter(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore, model: TableEmbedding
) -> None:
    store.search(FULL_FILTER, query="tea", mode=SearchMode.DENSE, top_k=3)
    request = last(server, "_search")
    assert (request.method, request.path) == ("POST", f"/{INDEX}/_search")
    assert request.body == {
        "knn": {
            "field": "vector",
            "query_vector": HALVES,
            "k": 3,
            "num_candidates": 100,
            "filter": {"bool": {"filter": FULL_FILTER_CLAUSES}},
        },
        "size": 3,
        "_source": SOURCE_SHOWN,
    }
    assert model.embedded == ["tea"]


def test_num_candidates_is_at_least_top_k_and_at_most_10000(server: FakeElasticsearch, model: TableEmbedding) -> None:
    with ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=model, num_candidates=20) as store:
        store.search(ANN, vector=np.asarray(E1), mode=SearchMode.DENSE, top_k=50)
        assert last(server, "_search").body["knn"]["num_candidates"] == 50
    assert _es_queries.knn_search_body(ANN, E1, top_k=10_000, num_candidates=20_000)["knn"]["num_candidates"] == 10_000


def test_keyword_search_body_is_bm25_over_the_keywords_with_the_filter(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    # the query as the SQLite store searches it: stopwords out, stemmed, each word once
    store.search(FULL_FILTER, query="Which green teas does she like? Green TEA", mode=SearchMode.KEYWORD, top_k=7)
    assert last(server, "_search").body == {
        "query": {
            "bool": {
                "must": [{"match": {"keywords": {"query": "green tea like", "operator": "or"}}}],
                "filter": FULL_FILTER_CLAUSES,
            }
        },
        "size": 7,
        "_source": SOURCE_SHOWN,
    }


def test_time_range_open_at_both_ends_means_the_time_is_known() -> None:
    clauses = _es_queries.filter_clauses(MemoryFilter("ann", time_range=TimeRange("message_time")))
    assert clauses == [USER_TERM, {"exists": {"field": "message_time"}}]
    clauses = _es_queries.filter_clauses(MemoryFilter("ann", time_range=TimeRange("created_at", end=T0)))
    assert clauses == [USER_TERM, {"range": {"created_at": {"lt": "2024-10-26T21:26:20.123456+08:00"}}}]


def test_dense_scores_are_cosines_and_hybrid_fuses_both_lists(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    sources = {name: document(name, vector=None) for name in "abc"}
    server.script_search(
        [{"_id": "a", "_score": 1.0, "_source": sources["a"]}, {"_id": "b", "_score": 0.75, "_source": sources["b"]}],
        [{"_id": "b", "_score": 3.5, "_source": sources["b"]}, {"_id": "c", "_score": 1.25, "_source": sources["c"]}],
        [{"_id": "a", "_score": 0.25, "_source": sources["a"]}],
    )
    hybrid = store.search(ANN, query="tea", vector=np.asarray(HALVES), mode=SearchMode.HYBRID, top_k=2)
    fused = reciprocal_rank_fusion([["a", "b"], ["b", "c"]])[:2]
    assert [(n.memory_id, n.score) for n in hybrid] == [(memory_id, pytest.approx(score)) for memory_id, score in fused]
    dense_body, keyword_body = (request.body for request in server.requests_to("_search"))
    assert dense_body["knn"]["k"] == 100 and dense_body["size"] == 100  # hybrid_candidates deep, then fused
    assert keyword_body["size"] == 100 and "match" in keyword_body["query"]["bool"]["must"][0]
    [dense] = store.search(ANN, vector=np.asarray(E1), mode=SearchMode.DENSE)
    assert dense.score == pytest.approx(-0.5)  # knn _score (1 + cos) / 2 = 0.25


def test_hybrid_score_fusion_scales_each_list_and_weighs_keywords(server: FakeElasticsearch, model: TableEmbedding) -> None:
    sources = {name: document(name, vector=None) for name in "abc"}
    server.script_search(
        # knn _score (1 + cos) / 2: cosines 1.0, 0.6 and 0.0 -> scaled 1, 0.6, 0
        [
            {"_id": "a", "_score": 1.0, "_source": sources["a"]},
            {"_id": "b", "_score": 0.8, "_source": sources["b"]},
            {"_id": "c", "_score": 0.5, "_source": sources["c"]},
        ],
        # BM25 4.0, 2.5 and 2.0 -> scaled 1, 0.25 and 0, weighted 0.5
        [
            {"_id": "c", "_score": 4.0, "_source": sources["c"]},
            {"_id": "a", "_score": 2.5, "_source": sources["a"]},
            {"_id": "b", "_score": 2.0, "_source": sources["b"]},
        ],
    )
    settings = {"hybrid_fusion": "scores", "hybrid_keyword_weight": 0.5}
    with ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=model, **settings) as store:
        hybrid = store.search(ANN, query="tea", vector=np.asarray(HALVES), mode=SearchMode.HYBRID, top_k=3)
    # a: 1 + 0.5 * 0.25, b: 0.6 + 0.5 * 0, c: 0 + 0.5 * 1 (reciprocal ranks would put c before b)
    assert [n.memory_id for n in hybrid] == ["a", "b", "c"]
    assert [n.score for n in hybrid] == pytest.approx([1.125, 0.6, 0.5])


def test_an_unknown_hybrid_fusion_is_refused_naming_the_choices(model: TableEmbedding) -> None:
    with pytest.raises(StoreError, match=r"hybrid_fusion.*rrf.*scores"):
        ElasticsearchMemoryStore(hosts=["http://127.0.0.1:9"], index_name=INDEX, embedding_model=model, hybrid_fusion="borda")  # type: ignore[arg-type]


def test_retrieve_mode_is_the_default_mode(server: FakeElasticsearch, model: TableEmbedding) -> None:
    with ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=model, retrieve_mode="keyword") as store:
        store.search(ANN, query="tea")
        assert [("knn" in r.body, "query" in r.body) for r in server.requests_to("_search")] == [(False, True)]
        store.search(ANN, query="tea", mode="dense")
        assert "knn" in last(server, "_search").body


def test_every_read_and_filtered_delete_is_scoped_to_the_user(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.upsert([node("a"), node("b", user_name="bob")], vectors=np.asarray([E1, E2]))
    for mode in SearchMode:
        store.search(ANN, query="tea", vector=np.asarray(E1), mode=mode)
    store.search(MemoryFilter("ann", workspace="w"), query="tea")
    store.scan(ANN)
    store.count(MemoryFilter("ann", memory_types=(MemoryType.INSIGHT,)))
    store.delete_by_filter(MemoryFilter("ann", status=MemoryStatus.EXPIRED))
    scoped = [
        request
        for action in ("_search", "_count", "_delete_by_query")
        for request in server.requests_to(action)
        if request.path.startswith(f"/{INDEX}/")  # not the history index: its searches are by memory id
    ]
    assert len(scoped) == 10  # the filtered delete reads what it deletes first, for the history
    for request in scoped:
        query = request.body["knn"]["filter"] if "knn" in request.body else request.body["query"]
        assert query["bool"]["filter"][0] == USER_TERM, request.body
    assert [n.memory_id for n in store.scan(MemoryFilter("bob"))] == ["b"]


# ---- write bodies ---------------------------------------------------------------------------------


def test_upsert_is_one_bulk_of_index_actions_with_refresh(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    event = datetime(2024, 10, 19, tzinfo=timezone.utc)
    store.upsert(
        [node("a", event_time=event, meta={"source": "chat"}, source_message_ids=("m1",)), node("b", "plays the guitar")],
        vectors=np.asarray([E1, [0.0, 2.0, 0.0, 0.0]]),
    )
    request = last(server, "_bulk")
    assert (request.method, request.path, request.params) == ("PUT", f"/{INDEX}/_bulk", {"refresh": "wait_for"})
    assert request.body[1]["keywords"] == "like green tea"  # keyword_text: tokenised and stemmed here
    assert request.body[1]["rank_terms"] == "like green tea\n"  # the ranker's terms: own words, newline, around
    assert [n.rank_terms for n in store.get(["a", "b"])] == ["like green tea\n", "play guitar\n"]  # read back
    assert request.body == [
        {"index": {"_id": "a"}},
        document(
            "a",
            vector=E1,
            event_time="2024-10-19T00:00:00+00:00",
            meta={"source": "chat"},
            source_message_ids=["m1"],
            meta_index=[{"key": "source", "text": "chat"}],  # what metadata filters read (`_es_metadata`)
        ),
        {"index": {"_id": "b"}},
        document("b", "plays the guitar", vector=E2),  # given vectors are stored as unit vectors
    ]


def test_upsert_keeps_stored_vectors_of_unchanged_content_and_embeds_the_rest_once(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore, model: TableEmbedding
) -> None:
    store.upsert([node("a")], vectors=np.asarray([HALVES]))
    store.upsert([node("a", access_count=2), node("b", "plays the guitar"), node("c", "has a cat")])
    assert model.embedded == ["plays the guitar", "has a cat"]
    [mget] = [r for r in server.requests_to("_mget") if "_source_includes" in r.params][-1:]
    assert (mget.body, mget.params) == ({"ids": ["a", "b", "c"]}, {"_source_includes": "content,vector"})
    lines = last(server, "_bulk").body
    assert [line.get("vector") for line in lines[1::2]] == [HALVES, E2, E3]


def test_upsert_with_requirements_reads_them_before_and_after_the_bulk(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    store.upsert([node("m1", "I play the guitar")], vectors=np.asarray([E1]))
    dropped = store.upsert(
        [node("m1", "I play the guitar", reflected=True), node("o1", "plays the guitar", source_message_ids=("m1",)), node("o2")],
        vectors=np.asarray([E1, E2, E3]),
        requires={"m1": ("m1",), "o1": ("m1",), "o2": ("m2",)},  # m2 is gone (deleted meanwhile)
    )
    assert dropped == ["o2"]
    checks = [r for r in server.requests if r.path == f"/{INDEX}/_mget" and r.params == {"_source": "false"}]
    assert [r.body for r in checks] == [{"ids": ["m1", "m2"]}, {"ids": ["m1", "m2"]}]  # before and after the write
    assert [line["index"]["_id"] for line in last(server, "_bulk").body if "index" in line] == ["m1", "o1"]


def test_a_repeated_id_in_one_batch_keeps_the_last(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.upsert([node("a", "first"), node("a", "second")], vectors=np.asarray([E1, E2]))
    assert [line for line in last(server, "_bulk").body if "index" in line] == [{"index": {"_id": "a"}}]
    assert store.get(["a"])[0].content == "second"


def test_a_zero_vector_is_stored_without_one(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.upsert([node("a")], vectors=np.zeros((1, 4)))
    assert "vector" not in last(server, "_bulk").body[1]
    assert [n.memory_id for n in store.search(ANN, query="tea", mode=SearchMode.KEYWORD)] == ["a"]


def test_bulk_partial_failure_raises_listing_failed_ids_and_keeps_the_rest(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    server.fail_items(
        {"b": "failed to parse field [content]", "d": ("version_conflict_engine_exception", "[d]: version conflict")}
    )
    with pytest.raises(BulkWriteError) as caught:
        store.upsert([node(name) for name in "abcd"], vectors=np.asarray([E1, E2, E3, HALVES]))
    error = caught.value
    assert isinstance(error, StoreError)
    assert error.failed == {"b": "mapper_parsing_exception: failed to parse field [content]",
                            "d": "version_conflict_engine_exception: [d]: version conflict"}  # fmt: skip
    assert error.written == ["a", "c"]
    message = str(error)
    assert "2 of 4 memories failed" in message and "not atomic" in message
    assert "b: mapper_parsing_exception: failed to parse field [content]" in message and "d: version_conflict" in message
    assert sorted(server.documents(INDEX)) == ["a", "c"]


def test_update_sends_only_changed_fields_guarded_by_the_version_read(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    store.upsert([node("a")], vectors=np.asarray([E1]))
    later = T0 + timedelta(days=1)
    changed = store.update("a", reflected=True, updated_at=later)
    read = last(server, "_mget")
    assert (read.body, read.params) == ({"ids": ["a"]}, {})
    request = last(server, "_update/a")
    assert (request.method, request.path) == ("POST", f"/{INDEX}/_update/a")
    assert request.body == {"doc": {"reflected": True, "updated_at": "2024-10-27T21:26:20.123456+08:00"}}
    # the fake numbers writes from 1: the bulk write of "a" was the first
    assert request.params == {"refresh": "wait_for", "if_seq_no": "1", "if_primary_term": "1"}
    assert store.get(["a"]) == [changed] and changed.reflected and changed.updated_at == later


def test_update_of_content_reembeds_and_sends_the_new_vector(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore, model: TableEmbedding
) -> None:
    store.upsert([node("a")], vectors=np.asarray([E1]))
    store.update("a", content="has a cat", updated_at=T0)
    assert last(server, "_update/a").body == {
        "doc": {"content": "has a cat", "keywords": "has a cat", "rank_terms": "cat\n", "vector": E3}
    }
    assert model.embedded == ["has a cat"]


def test_update_of_meta_rewrites_the_whole_document_so_keys_can_be_dropped(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    store.upsert([node("a", meta={"old": 1, "kept": {"x": 1}})], vectors=np.asarray([E1]))
    store.update("a", meta={"kept": {"y": 2}}, updated_at=T0)
    request = last(server, "_doc/a")
    assert (request.method, request.params["refresh"], "if_seq_no" in request.params) == ("PUT", "wait_for", True)
    assert request.body == document("a", vector=E1, meta={"kept": {"y": 2}})
    assert store.get(["a"])[0].meta == {"kept": {"y": 2}}


def test_update_refusals(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.upsert([node("a")], vectors=np.asarray([E1]))
    with pytest.raises(StoreError, match="no memory 'missing'"):
        store.update("missing", reflected=True)
    server.fail_next(status=409, error_type="version_conflict_engine_exception", action="_update/a")
    with pytest.raises(StoreError, match="changed while it was being updated"):
        store.update("a", reflected=True)


def test_delete_is_a_bulk_of_delete_actions_counting_what_existed(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    store.upsert([node("a"), node("b")], vectors=np.asarray([E1, E2]))
    assert store.delete(["a", "missing", "a", "b"]) == 2
    request = last(server, "_bulk")
    assert request.params == {"refresh": "wait_for"}
    assert request.body == [{"delete": {"_id": "a"}}, {"delete": {"_id": "missing"}}, {"delete": {"_id": "b"}}]
    assert store.delete([]) == 0


def test_delete_by_filter_body_and_refresh(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.upsert([node("a", status=MemoryStatus.EXPIRED), node("b")], vectors=np.asarray([E1, E2]))
    assert store.delete_by_filter(MemoryFilter("ann", status=MemoryStatus.EXPIRED)) == 1
    request = last(server, "_delete_by_query")
    assert (request.method, request.params) == ("POST", {"refresh": "true"})
    assert request.body == {"query": {"bool": {"filter": [USER_TERM, {"term": {"status": "expired"}}]}}}


def test_refresh_setting_is_passed_on_every_write(server: FakeElasticsearch, model: TableEmbedding) -> None:
    with ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=model, refresh="false") as store:
        store.upsert([node("a")], vectors=np.asarray([E1]))
        store.update("a", reflected=True)
        store.delete(["a"])
        store.delete_by_filter(ANN)
    writes = [r for r in server.requests if r.path.endswith(("_bulk", "_update/a", "_delete_by_query"))]
    assert [r.params["refresh"] for r in writes if r.path.startswith(f"/{INDEX}/")] == ["false", "false", "false", "false"]
    assert {r.params["refresh"] for r in writes} == {"false"}  # the history's writes too


# ---- read bodies -----------------------------------------------------------------------------------


def test_count_body(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.upsert([node("a"), node("b", reflected=True)], vectors=np.asarray([E1, E2]))
    assert store.count(MemoryFilter("ann", reflected=True)) == 1
    request = last(server, "_count")
    assert (request.method, request.body) == ("POST", {"query": {"bool": {"filter": [USER_TERM, {"term": {"reflected": True}}]}}})


def test_get_body(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.upsert([node("a"), node("b")], vectors=np.asarray([E1, E2]))
    assert [n.memory_id for n in store.get(["b", "zzz", "a", "b"])] == ["b", "a", "b"]
    request = last(server, "_mget")
    assert (request.body, request.params) == ({"ids": ["b", "zzz", "a"]}, {"_source_excludes": "vector,keywords,meta_index"})


def test_scan_body_pages_by_created_at_then_id(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.scan(ANN, limit=5, offset=10)
    assert last(server, "_search").body == {
        "query": {"bool": {"filter": [USER_TERM]}},
        "sort": [{"created_at": {"order": "desc"}}, {"memory_id": {"order": "desc"}}],
        "size": 5,
        "track_total_hits": False,
        "_source": SOURCE_SHOWN,
        "from": 10,
    }
    store.scan(ANN, newest_first=False)
    assert last(server, "_search").body["sort"] == [{"created_at": {"order": "asc"}}, {"memory_id": {"order": "asc"}}]


def test_scan_past_the_result_window_walks_with_search_after(monkeypatch: pytest.MonkeyPatch, model: TableEmbedding) -> None:
    monkeypatch.setattr(_es_queries, "MAX_RESULT_WINDOW", 4)
    nodes = [node(f"id-{index}", created_at=T0 + timedelta(seconds=index)) for index in range(10)]
    with (
        FakeElasticsearch(max_result_window=4) as server,
        ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=model) as store,
    ):
        store.upsert(nodes, vectors=np.tile(E1, (10, 1)))
        server.clear_requests()
        assert [n.memory_id for n in store.scan(ANN, limit=3, offset=5, newest_first=False)] == ["id-5", "id-6", "id-7"]
        bodies = [r.body for r in server.requests_to("_search")]
        assert [(b["size"], b.get("from", 0), "search_after" in b, b["_source"]) for b in bodies] == [
            (4, 0, False, False), (1, 0, True, False), (3, 0, True, SOURCE_SHOWN)
        ]  # fmt: skip
        assert store.scan(ANN, limit=3, offset=12) == []
        assert [n.memory_id for n in store.scan(ANN, limit=6, offset=0)] == [f"id-{i}" for i in range(9, 3, -1)]


def test_history_past_the_result_window_pages_and_deletes_forget_every_change(
    monkeypatch: pytest.MonkeyPatch, model: TableEmbedding
) -> None:
    """A user's history longer than one request may return, and a delete of more memories than
    one `terms` query may name: every change is read, and every deleted memory's content goes."""
    from memoryscope.stores import _es_history

    monkeypatch.setattr(_es_queries, "MAX_RESULT_WINDOW", 4)
    monkeypatch.setattr(_es_history, "_TERMS_PER_QUERY", 3)
    ids = [f"id-{index}" for index in range(10)]
    with (
        FakeElasticsearch(max_result_window=4) as server,
        ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=model) as store,
    ):
        store.upsert([node(memory_id, content=f"secret {memory_id}") for memory_id in ids], vectors=np.tile(E1, (10, 1)))
        store.update("id-3", reflected=True)
        every = sorted(server.documents(f"{INDEX}-history").values(), key=lambda doc: (doc["seq"], doc["memory_id"]))
        assert len(every) == 11
        server.clear_requests()
        history = store.history(user_name="ann", limit=10)
        assert [(change.seq, change.memory_id) for change in history] == [(doc["seq"], doc["memory_id"]) for doc in every[:10]]
        pages = [request.body for request in server.requests_to("_search") if request.path.startswith(f"/{INDEX}-history")]
        assert [page["size"] for page in pages] == [4, 4, 2]
        assert pages[1]["search_after"] == [every[3]["seq"], every[3]["memory_id"]]
        assert pages[0]["sort"] == [{"seq": "asc"}, {"memory_id": "asc"}] and "_source" not in pages[0]

        server.clear_requests()
        assert store.delete(ids) == 10
        named = [
            request.body["query"]["bool"]["filter"][0]["terms"]["memory_id"]
            for request in server.requests_to("_search")
            if request.path.startswith(f"/{INDEX}-history")
        ]
        chunks = {tuple(terms) for terms in named}  # a chunk's changes may take more than one page
        assert sorted(memory_id for terms in chunks for memory_id in terms) == sorted(ids)  # each id in one chunk
        assert max(len(terms) for terms in chunks) == 3
        left = server.documents(f"{INDEX}-history").values()
        assert len(left) == 11 + 10  # the changes stay, with a record of each delete
        assert all(doc.get("before") is None and doc.get("after") is None for doc in left if doc["memory_id"] in ids)
        assert "secret" not in str(list(left))


# ---- whole-index reads and re-embedding (export, migrate, reembed) ----------------------------------


def test_iter_all_pages_every_user_by_memory_id(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.upsert([node("c"), node("a", user_name="bob"), node("b")], vectors=np.asarray([E1, E2, E3]))
    server.clear_requests()
    assert [[n.memory_id for n in batch] for batch in store.iter_all(batch_size=2)] == [["a", "b"], ["c"]]
    first, second = (request.body for request in server.requests_to("_search"))
    assert first == {
        "query": {"match_all": {}},
        "sort": [{"memory_id": {"order": "asc"}}],
        "size": 2,
        "track_total_hits": False,
        "_source": SOURCE_SHOWN,
    }
    assert second == {**first, "search_after": ["b"]}
    list(store.iter_all(batch_size=5, user_name="ann", after_id="b"))
    assert last(server, "_search").body == {**first, "query": {"bool": {"filter": [USER_TERM]}}, "size": 5, "search_after": ["b"]}


def test_user_counts_page_a_composite_aggregation(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("memoryscope.stores.elasticsearch_store._USER_PAGE", 2)
    users = ["ann", "bob", "bob", "cy", "dan"]
    store.upsert([node(f"id-{i}", user_name=user) for i, user in enumerate(users)], vectors=np.tile(E1, (5, 1)))
    server.clear_requests()
    assert store.user_counts() == {"ann": 1, "bob": 2, "cy": 1, "dan": 1}
    bodies = [request.body for request in server.requests_to("_search")]
    terms = [{"user_name": {"terms": {"field": "user_name"}}}]
    assert bodies == [
        {"size": 0, "track_total_hits": False, "aggs": {"users": {"composite": {"size": 2, "sources": terms}}}},
        {"size": 0, "track_total_hits": False,
         "aggs": {"users": {"composite": {"size": 2, "sources": terms, "after": {"user_name": "bob"}}}}},
        {"size": 0, "track_total_hits": False,
         "aggs": {"users": {"composite": {"size": 2, "sources": terms, "after": {"user_name": "dan"}}}}},
    ]  # fmt: skip
    assert not server.requests_to("_refresh")  # writes are visible already (refresh wait_for)


def test_user_counts_refresh_first_when_writes_do_not(server: FakeElasticsearch, model: TableEmbedding) -> None:
    with ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=model, refresh="false") as store:
        assert store.user_counts() == {}
        assert [request.path for request in server.requests[-2:]] == [f"/{INDEX}/_refresh", f"/{INDEX}/_search"]


def test_get_vectors_reads_only_the_vector(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.upsert([node("a"), node("b"), node("z")], vectors=np.asarray([E1, [3.0, 4.0, 0.0, 0.0], [0.0] * 4]))
    vectors = store.get_vectors(["b", "a", "missing", "z"])
    assert set(vectors) == {"a", "b"}  # "z" has a zero vector, stored without one
    np.testing.assert_allclose(vectors["b"], [0.6, 0.8, 0.0, 0.0], atol=1e-7)
    request = last(server, "_mget")
    assert (request.body, request.params) == ({"ids": ["b", "a", "missing", "z"]}, {"_source_includes": "vector"})


def test_reembed_copies_into_a_new_index_and_swaps_an_alias_in(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    store.upsert([node("a", "likes green tea"), node("b", "has a cat")], vectors=np.asarray([E1, E2]))
    renamed = TableEmbedding()
    renamed.model_name = "table-4d-v2"
    with ElasticsearchMemoryStore(
        hosts=[server.url], index_name=INDEX, embedding_model=renamed, allow_model_change=True
    ) as moving:
        assert moving.recorded_embedding == ("table-4d", 4)
        with pytest.raises(StoreError, match=r"opened to re-embed them with 'table-4d-v2': upsert waits until reembed\(\)"):
            moving.upsert([node("c")])
        server.clear_requests()
        assert moving.reembed(batch_size=1) == 2
        assert moving.recorded_embedding == ("table-4d-v2", 4)
    [new_index] = [name for name in server.index_names() if not name.endswith("-history")]
    assert new_index.startswith(f"{INDEX}-reembed-")
    created = next(r for r in server.requests if r.method == "PUT" and r.path == f"/{new_index}")
    assert created.body["mappings"]["_meta"]["embedding_model"] == "table-4d-v2"
    bulks = server.requests_to("_bulk")
    assert [(r.path, r.params) for r in bulks] == [(f"/{new_index}/_bulk", {"refresh": "false"})] * 2
    assert last(server, "_aliases").body == {
        "actions": [{"remove_index": {"index": INDEX}}, {"add": {"index": new_index, "alias": INDEX}}]
    }
    # the new model's vectors ("has a cat" is E3 in the table; E2 was given at the upsert)
    assert server.documents(INDEX) == {"a": document("a", vector=E1), "b": document("b", "has a cat", vector=E3)}
    assert renamed.embedded == ["likes green tea", "has a cat"]


# ---- errors ----------------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_connection_refused_names_the_host_but_not_the_password(model: TableEmbedding) -> None:
    port = _closed_port()
    with (
        ElasticsearchMemoryStore(
            hosts=[f"http://elastic:hunter2@127.0.0.1:{port}"], embedding_model=model, request_timeout=2
        ) as store,
        pytest.raises(StoreError) as caught,
    ):
        store.count(ANN)
    message = str(caught.value)
    assert f"http://127.0.0.1:{port}" in message and "Connection refused" in message
    assert "hunter2" not in message and "elastic:" not in message and "\n" not in message
    assert "hunter2" not in repr(store)


def test_server_errors_become_one_line_store_errors(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.ensure_index()
    # (502, 503 and 504 are retried by the client first; 500 is not)
    server.fail_next(status=500, error_type="search_phase_execution_exception", reason="all shards failed\nsee the logs")
    with pytest.raises(StoreError) as caught:
        store.search(ANN, query="tea", mode=SearchMode.KEYWORD)
    message = str(caught.value)
    assert message == (
        f"Elasticsearch at {server.url} (index 'memories'): keyword search failed: "
        "HTTP 500 search_phase_execution_exception: all shards failed see the logs"
    )
    server.fail_next(status=401, error_type="security_exception", reason="unable to authenticate")
    with pytest.raises(StoreError, match="check api_key_env"):
        store.count(ANN)


def test_secrets_come_from_named_environment_variables(
    server: FakeElasticsearch, model: TableEmbedding, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_ES_API_KEY", "c2VjcmV0OmtleQ==")
    with ElasticsearchMemoryStore(hosts=[server.url], embedding_model=model, api_key_env="TEST_ES_API_KEY") as store:
        store.count(ANN)
    monkeypatch.setenv("TEST_ES_USER", "elastic")
    monkeypatch.setenv("TEST_ES_PASSWORD", "hunter2")
    with ElasticsearchMemoryStore(
        hosts=[server.url], embedding_model=model, username_env="TEST_ES_USER", password_env="TEST_ES_PASSWORD"
    ) as store:
        store.count(ANN)
    assert {r.auth_scheme for r in server.requests[:3]} == {"ApiKey"}
    assert {r.auth_scheme for r in server.requests[3:]} == {"Basic"}
    monkeypatch.delenv("TEST_ES_PASSWORD")
    with pytest.raises(StoreError, match=r"password_env names \$TEST_ES_PASSWORD, which is not set"):
        ElasticsearchMemoryStore(
            hosts=[server.url], embedding_model=model, username_env="TEST_ES_USER", password_env="TEST_ES_PASSWORD"
        )
    with pytest.raises(StoreError, match="both username_env and password_env"):
        ElasticsearchMemoryStore(hosts=[server.url], embedding_model=model, username_env="TEST_ES_USER")


def test_missing_client_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch, model: TableEmbedding) -> None:
    monkeypatch.setitem(sys.modules, "elasticsearch", None)  # `import elasticsearch` now raises ImportError
    with pytest.raises(StoreError, match=r'pip install "memoryscope\[elasticsearch\]"'):
        ElasticsearchMemoryStore(embedding_model=model)


def test_tls_options_on_plain_http_are_a_store_error(model: TableEmbedding) -> None:
    with pytest.raises(StoreError, match="https"):
        ElasticsearchMemoryStore(hosts=["http://127.0.0.1:9200"], embedding_model=model, ca_certs="/etc/ssl/ca.pem")


# ---- building --------------------------------------------------------------------------------------


def test_registered_and_params_match_the_constructor(model: TableEmbedding, server: FakeElasticsearch) -> None:
    cls = STORES.get("elasticsearch_memory_store")
    assert cls is ElasticsearchMemoryStore
    params = cls.Params.model_validate(
        {"hosts": [server.url], "index_name": "mem-1", "retrieve_mode": "dense", "refresh": "true"}
    )
    assert all(field.description for field in cls.Params.model_fields.values())
    values = params.model_dump()
    assert values.pop("embedding_model") == "embedding_model"
    with cls(**values, embedding_model=model) as store:  # what the app does with validated params
        assert (store.hosts, store.index_name, store.params.retrieve_mode) == ([server.url], "mem-1", "dense")
    with pytest.raises(ValueError, match="es_url"):
        cls.Params.model_validate({"es_url": "http://x:9200"})


@pytest.mark.parametrize(
    ("setting", "value"), [("index_name", "Memories"), ("index_name", "_private"), ("num_candidates", 0), ("hosts", [])]
)
def test_bad_settings_are_store_errors(model: TableEmbedding, setting: str, value: Any) -> None:
    with pytest.raises(StoreError, match=setting):
        ElasticsearchMemoryStore(embedding_model=model, **{setting: value})


def test_an_injected_client_is_used_and_left_open(server: FakeElasticsearch, model: TableEmbedding) -> None:
    from elasticsearch import Elasticsearch

    with Elasticsearch(server.url) as client:
        with ElasticsearchMemoryStore(client=client, index_name=INDEX, embedding_model=model) as store:
            assert store.hosts == [server.url]
            store.count(ANN)
        assert client.count(index=INDEX)["count"] == 0  # still open after the store closed


# ---- the shared contract, on the fake ----------------------------------------------------------------


class TestStoreContractOnFakeServer(ElasticsearchContract):
    """The full contract through the real client and HTTP, against the fake's approximation of
    Elasticsearch search (exact kNN, simplified BM25); the real server runs it too when available,
    with the same hooks (`ElasticsearchContract`)."""

    @pytest.fixture
    def es_settings(self, server: FakeElasticsearch) -> dict[str, Any]:
        return {"hosts": [server.url]}


def test_history_newest_first_sorts_down_and_an_update_keeps_its_run(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    store.upsert([node("a")], vectors=np.asarray([E1]), change=ChangeSource("add_memory", "run-1"))
    store.update("a", change=ChangeSource("pin_memory", "run-2"), meta={"pinned": True})
    assert [c.run_id for c in store.history(memory_id="a")] == ["run-1", "run-2"]
    oldest = [r for r in server.requests_to("_search") if r.path.startswith(f"/{INDEX}-history")][-1]
    assert oldest.body["sort"] == [{"seq": "asc"}, {"memory_id": "asc"}]  # as pinned before
    newest = store.history(memory_id="a", limit=1, newest_first=True)
    request = [r for r in server.requests_to("_search") if r.path.startswith(f"/{INDEX}-history")][-1]
    assert request.body["sort"] == [{"seq": "desc"}, {"memory_id": "desc"}]
    assert [(c.operation, c.run_id) for c in newest] == [("pin_memory", "run-2")]


def test_an_expected_upsert_creates_or_writes_guarded_by_the_version_read(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    store.upsert([node("a")], vectors=np.asarray([E1]), expected={"a": None})
    assert [line for line in last(server, "_bulk").body if "memory_id" not in line] == [{"create": {"_id": "a"}}]
    [read] = store.get(["a"])
    changed = node("a", "likes oolong tea", updated_at=T0 + timedelta(days=1))
    store.upsert([changed], vectors=np.asarray([E2]), expected={"a": read.updated_at})
    [action] = [line for line in last(server, "_bulk").body if "memory_id" not in line]
    assert action == {"index": {"_id": "a", "if_seq_no": 1, "if_primary_term": 1}}  # the version read: the first write
    bulks = len(server.requests_to("_bulk"))
    with pytest.raises(StoreConflict) as raised:  # read before the last write: nothing is sent
        store.upsert([node("a", "likes coffee")], vectors=np.asarray([E3]), expected={"a": read.updated_at})
    assert raised.value.memory_ids == ("a",) and len(server.requests_to("_bulk")) == bulks
    assert [n.content for n in store.get(["a"])] == ["likes oolong tea"]
