"""State records in `elasticsearch_memory_store` without a server: the real client and store against
`FakeElasticsearch`. Pins the requests state records send to the companion index `<index>-state`
(its mapping, a write's `_mget` and `_bulk`, each read's body, deletion), that the memory index's
requests do not change, and how a version conflict and a partly failed write end. The meaning is
pinned by the store contract (`_store_contract_state`), which `test_elasticsearch_bodies` runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from memoryscope.errors import StoreConflict, StoreError
from memoryscope.history import ChangeSource
from memoryscope.stores import _es_state
from memoryscope.stores._es_state import record_id
from memoryscope.stores.base import MemoryFilter
from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore
from memoryscope.stores.state import StateKey, StateOwner, StateRecord
from memoryscope.testing.fake_elasticsearch import FakeElasticsearch, RecordedRequest
from tests.stores.test_elasticsearch_bodies import E1, E2, TableEmbedding, node

pytest.importorskip("elasticsearch", reason='needs the Elasticsearch client: pip install "memoryscope[elasticsearch]"')

INDEX = "memories"
STATE = f"/{INDEX}-state"
ANN = StateOwner("ann")
HUMAN = StateKey(ANN, "core_block", "human")
PERSONA = StateKey(ANN, "core_block", "persona")
H, P = record_id(HUMAN), record_id(PERSONA)
NOW = datetime(2024, 10, 26, 13, 26, 20, 123456, tzinfo=timezone.utc)
NOW_S = 1729949180.123456  # NOW in epoch seconds, as `updated_at` is stored
ANN_TERMS = [{"term": {"user_name": "ann"}}, {"term": {"target_name": ""}}, {"term": {"workspace": ""}}]

PINNED_STATE_MAPPINGS = {
    "dynamic": "strict",
    "properties": {
        "user_name": {"type": "keyword"},
        "target_name": {"type": "keyword"},
        "workspace": {"type": "keyword"},
        "kind": {"type": "keyword"},
        "name": {"type": "keyword"},
        "version": {"type": "long"},
        "current": {"type": "boolean"},
        "updated_at": {"type": "double"},
        "operation": {"type": "keyword"},
        "run_id": {"type": "keyword"},
        "value": {"type": "object", "enabled": False},
    },
}


@pytest.fixture
def server() -> Iterator[FakeElasticsearch]:
    with FakeElasticsearch() as running:
        yield running


@pytest.fixture
def store(server: FakeElasticsearch, monkeypatch: pytest.MonkeyPatch) -> Iterator[ElasticsearchMemoryStore]:
    monkeypatch.setattr(_es_state, "utc_now", lambda: NOW)
    with ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=TableEmbedding()) as opened:
        yield opened


def doc(key: StateKey, version: int, value: dict[str, Any], *, current: bool = True, operation: str = "", run_id: str = "",
        updated_at: float = NOW_S) -> dict[str, Any]:  # fmt: skip
    """The `_source` of a state document."""
    user_name, target_name, workspace, kind, name = key.parts()
    return {
        "user_name": user_name, "target_name": target_name, "workspace": workspace, "kind": kind, "name": name,
        "version": version, "current": current, "updated_at": updated_at, "operation": operation, "run_id": run_id,
        "value": value,
    }  # fmt: skip


def state_requests(server: FakeElasticsearch) -> list[RecordedRequest]:
    return [r for r in server.requests if r.path == STATE or r.path.startswith(f"{STATE}/")]


def last(server: FakeElasticsearch, action: str) -> RecordedRequest:
    return [r for r in state_requests(server) if r.path.endswith(action)][-1]


# ---- the index -------------------------------------------------------------------------------------


def test_reads_of_a_state_never_written_make_nothing_and_find_nothing(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    assert store.read_state([HUMAN]) == [] and store.list_state(ANN, "core_block") == []
    assert store.state_versions(HUMAN) == [] and list(store.iter_state()) == [] and store.delete_state("ann") == 0
    assert [(r.method, r.path, r.status) for r in server.requests] == [
        ("POST", f"{STATE}/_mget", 200),  # Elasticsearch answers each id with index_not_found_exception
        ("POST", f"{STATE}/_search", 404),
        ("POST", f"{STATE}/_search", 404),
        ("POST", f"{STATE}/_search", 404),
        ("POST", f"{STATE}/_count", 404),
        ("POST", f"{STATE}/_delete_by_query", 404),
    ]
    assert server.index_names() == []


def test_the_first_write_makes_the_state_index_with_the_pinned_mapping(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    store.write_state({HUMAN: {"text": "Ann"}})
    head, create, mget, bulk = server.requests
    assert [(r.method, r.path) for r in (head, create)] == [("HEAD", STATE), ("PUT", STATE)]
    assert create.body == {"mappings": PINNED_STATE_MAPPINGS}
    assert (mget.path, bulk.path) == (f"{STATE}/_mget", f"{STATE}/_bulk")
    store.write_state({HUMAN: {"text": "Ann"}})
    assert [r.path for r in server.requests[4:]] == [f"{STATE}/_mget", f"{STATE}/_bulk"]  # made once per store


def test_the_memory_index_requests_do_not_change_and_never_reach_the_state_index(server: FakeElasticsearch) -> None:
    with ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=TableEmbedding()) as store:
        store.ensure_index()
        assert [(r.method, r.path) for r in server.requests][:2] == [("HEAD", f"/{INDEX}"), ("PUT", f"/{INDEX}")]
        store.upsert([node("a"), node("b", "plays the guitar")], vectors=np.asarray([E1, E2]))
        store.get(["a"])
        store.search(MemoryFilter("ann"), query="tea", top_k=2)
        store.scan(MemoryFilter("ann"))
        list(store.iter_all())
        store.update("a", reflected=True)
        store.delete(["b"])
        store.delete_by_filter(MemoryFilter("ann"))
        assert store.user_counts() == {}
    assert state_requests(server) == [] and f"{INDEX}-state" not in server.index_names()


# ---- writes ----------------------------------------------------------------------------------------


def test_a_write_reads_the_current_documents_then_sends_one_guarded_bulk(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    [first] = store.write_state({HUMAN: {"text": "Ann"}}, change=ChangeSource("core_memory_create", "r1"))
    assert last(server, "_mget").body == {"ids": [H]}
    bulk = last(server, "_bulk")
    assert (bulk.method, bulk.params) == ("PUT", {"refresh": "wait_for"})
    assert bulk.body == [{"create": {"_id": H}}, doc(HUMAN, 1, {"text": "Ann"}, operation="core_memory_create", run_id="r1")]
    assert first == StateRecord(HUMAN, {"text": "Ann"}, 1, NOW, "core_memory_create", "r1")

    later = NOW + timedelta(seconds=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_es_state, "utc_now", lambda: later)
        written = store.write_state({HUMAN: {"text": "Ann plays"}, PERSONA: {"text": "Sam"}}, expected={HUMAN: 1}, versioned=True)
    assert [(r.key, r.version, r.updated_at) for r in written] == [(HUMAN, 2, later), (PERSONA, 1, later)]
    assert last(server, "_mget").body == {"ids": [H, P]}
    assert last(server, "_bulk").body == [
        {"index": {"_id": H, "if_seq_no": 1, "if_primary_term": 1}},  # guarded by the version read
        doc(HUMAN, 2, {"text": "Ann plays"}, updated_at=NOW_S + 1),
        {"index": {"_id": f"{H}.1"}},  # versioned: the version replaced is kept, as it was
        doc(HUMAN, 1, {"text": "Ann"}, current=False, operation="core_memory_create", run_id="r1"),
        {"create": {"_id": P}},  # none read: created, so a writer in between fails it
        doc(PERSONA, 1, {"text": "Sam"}, updated_at=NOW_S + 1),
    ]
    assert set(server.documents(f"{INDEX}-state")) == {H, f"{H}.1", P}


def test_an_expected_version_that_does_not_match_sends_nothing(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    store.write_state({HUMAN: {"text": "Ann"}})
    bulks = len(server.requests_to("_bulk"))
    with pytest.raises(StoreConflict) as raised:
        store.write_state({HUMAN: {"text": "x"}, PERSONA: {"text": "y"}}, expected={HUMAN: 0, PERSONA: 0})
    assert raised.value.memory_ids == ("core_block/human",) and len(server.requests_to("_bulk")) == bulks
    with pytest.raises(StoreError, match="whole number from 0"):
        store.write_state({HUMAN: {"text": "x"}}, expected={HUMAN: -1})
    with pytest.raises(StoreError, match="JSON"):
        store.write_state({HUMAN: {"n": float("inf")}})
    assert len(server.requests_to("_bulk")) == bulks


def test_a_writer_in_between_makes_the_guarded_item_fail_and_the_write_a_conflict(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.write_state({HUMAN: {"text": "Ann"}, PERSONA: {"text": "Sam"}})
    other = ElasticsearchMemoryStore(hosts=[server.url], index_name=INDEX, embedding_model=TableEmbedding())
    calls = []

    def now_after_another_write() -> datetime:  # called between the read and the bulk
        calls.append(1)
        if len(calls) == 1:
            other.write_state({HUMAN: {"text": "Ann, by the other process"}})
        return NOW

    monkeypatch.setattr(_es_state, "utc_now", now_after_another_write)
    with other, pytest.raises(StoreConflict) as raised:
        store.write_state({PERSONA: {"text": "Sam 2"}, HUMAN: {"text": "Ann 2"}}, expected={HUMAN: 1, PERSONA: 1})
    assert raised.value.memory_ids == ("core_block/human",)
    write, undo = [r for r in server.requests_to("_bulk")][-2:]
    assert [line for line in write.body if "value" not in line] == [
        {"index": {"_id": P, "if_seq_no": 2, "if_primary_term": 1}},
        {"index": {"_id": H, "if_seq_no": 1, "if_primary_term": 1}},  # the other process wrote seq_no 3: 409
    ]
    assert undo.body == [{"index": {"_id": P, "if_seq_no": 4, "if_primary_term": 1}}, doc(PERSONA, 1, {"text": "Sam"})]
    [human, persona] = store.read_state([HUMAN, PERSONA])
    assert (human.version, human.value, persona.version, persona.value) == (
        2,
        {"text": "Ann, by the other process"},
        1,
        {"text": "Sam"},
    )


def test_a_failed_item_puts_back_what_landed(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    server.fail_items({P: ("version_conflict_engine_exception", "[p]: version conflict")}, status=409)
    with pytest.raises(StoreConflict, match="core_block/persona") as raised:
        store.write_state({HUMAN: {"text": "Ann"}, PERSONA: {"text": "Sam"}})
    assert raised.value.memory_ids == ("core_block/persona",)
    undo = last(server, "_bulk")
    assert undo.body == [{"delete": {"_id": H, "if_seq_no": 1, "if_primary_term": 1}}]  # created: deleted again
    assert store.read_state([HUMAN, PERSONA]) == []
    bulks = len(server.requests_to("_bulk"))
    with pytest.raises(StoreConflict):
        store.write_state({PERSONA: {"text": "Sam"}})
    assert len(server.requests_to("_bulk")) == bulks + 1  # nothing landed: nothing to put back

    server.fail_items({P: "something else failed"}, status=400)
    store.write_state({HUMAN: {"text": "Ann"}})
    with pytest.raises(StoreError, match="something else failed") as failed:
        store.write_state({HUMAN: {"text": "Ann 2"}, PERSONA: {"text": "Sam"}})
    assert not isinstance(failed.value, StoreConflict)
    assert [(r.version, r.value) for r in store.read_state([HUMAN])] == [(1, {"text": "Ann"})]


# ---- reads -----------------------------------------------------------------------------------------


def test_a_read_is_one_mget_of_the_current_documents(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.write_state({HUMAN: {"text": "Ann"}})
    server.clear_requests()
    assert [r.key for r in store.read_state([PERSONA, HUMAN, HUMAN])] == [HUMAN, HUMAN]
    [mget] = server.requests
    assert (mget.method, mget.path, mget.body, mget.params) == ("POST", f"{STATE}/_mget", {"ids": [P, H]}, {})


def test_a_list_is_a_search_of_the_current_documents_by_name(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.write_state({PERSONA: {"text": "Sam"}, HUMAN: {"text": "Ann"}})
    store.write_state({HUMAN: {"text": "Ann 2"}}, versioned=True)
    assert [(r.key.name, r.version) for r in store.list_state(ANN, "core_block")] == [("human", 2), ("persona", 1)]
    assert last(server, "_search").body == {
        "query": {"bool": {"filter": [*ANN_TERMS, {"term": {"kind": "core_block"}}, {"term": {"current": True}}]}},
        "sort": [{"name": "asc"}],
        "size": 10_000,
    }


def test_versions_are_one_search_of_the_record_newest_first(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    for text in ("a", "b", "c"):
        store.write_state({HUMAN: {"text": text}}, versioned=True)
    assert [(r.version, r.value["text"]) for r in store.state_versions(HUMAN, limit=2)] == [(2, "b"), (3, "c")]
    assert last(server, "_search").body == {
        "query": {"bool": {"filter": [*ANN_TERMS, {"term": {"kind": "core_block"}}, {"term": {"name": "human"}}]}},
        "sort": [{"version": "desc"}],
        "size": 3,  # one more than asked: a version may be there twice
    }
    assert store.state_versions(HUMAN, limit=0) == []


def test_iter_state_pages_every_document_by_record_then_version(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    for text in ("a", "b"):
        store.write_state({HUMAN: {"text": text}}, versioned=True)
    bob = StateKey(StateOwner("bob"), "agent_state", "state")
    store.write_state({bob: {"summary": "s"}})
    batches = list(store.iter_state(batch_size=2))
    assert [[(r.key.owner.user_name, r.version) for r in batch] for batch in batches] == [[("ann", 1), ("ann", 2)], [("bob", 1)]]
    first, second = [r.body for r in state_requests(server) if r.path.endswith("_search")]
    sort = [{"user_name": "asc"}, {"target_name": "asc"}, {"workspace": "asc"}, {"kind": "asc"}, {"name": "asc"},
            {"version": "asc"}]  # fmt: skip
    assert first == {"query": {"match_all": {}}, "sort": sort, "size": 2}
    assert second == {**first, "search_after": ["ann", "", "", "core_block", "human", 2]}
    list(store.iter_state(user_name="bob"))
    assert last(server, "_search").body["query"] == {"bool": {"filter": [{"term": {"user_name": "bob"}}]}}
    with pytest.raises(StoreError, match="batch_size"):
        list(store.iter_state(batch_size=0))


def test_a_version_kept_twice_is_read_once(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.write_state({HUMAN: {"text": "a"}})
    twin = doc(HUMAN, 1, {"text": "a"}, current=False)
    server.create_index(f"{INDEX}-state", PINNED_STATE_MAPPINGS, {H: doc(HUMAN, 1, {"text": "a"}), f"{H}.1": twin})
    assert [r.version for r in store.state_versions(HUMAN)] == [1]
    assert [r.version for batch in store.iter_state() for r in batch] == [1]


def test_a_damaged_document_is_a_store_error_naming_it(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    server.create_index(f"{INDEX}-state", PINNED_STATE_MAPPINGS, {H: {**doc(HUMAN, 1, {}), "value": "not an object"}})
    with pytest.raises(StoreError, match=f"state document '{H}' is damaged"):
        store.read_state([HUMAN])


# ---- deleting and importing ------------------------------------------------------------------------


def test_delete_counts_the_current_documents_then_deletes_every_version(
    server: FakeElasticsearch, store: ElasticsearchMemoryStore
) -> None:
    for text in ("a", "b"):
        store.write_state({HUMAN: {"text": text}}, versioned=True)
    assert store.delete_state("ann", workspace="") == 1
    count, delete = state_requests(server)[-2:]
    scope = [{"term": {"user_name": "ann"}}, {"term": {"workspace": ""}}]
    assert (count.path, count.body) == (f"{STATE}/_count", {"query": {"bool": {"filter": [*scope, {"term": {"current": True}}]}}})
    assert (delete.path, delete.params, delete.body) == (
        f"{STATE}/_delete_by_query",
        {"refresh": "true"},
        {"query": {"bool": {"filter": scope}}},
    )
    assert server.documents(f"{INDEX}-state") == {}


def test_import_keeps_each_version_and_the_highest_current(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    store.write_state({PERSONA: {"text": "stored"}})  # version 1, replaced by the import's 3: kept as `.1`
    old = NOW - timedelta(days=1)
    records = [
        StateRecord(HUMAN, {"text": "b"}, 2, old, "import", "x"),
        StateRecord(HUMAN, {"text": "a"}, 1, old, "import", "x"),
        StateRecord(PERSONA, {"text": "three"}, 3, old),
    ]
    assert store.import_state(records) == 3
    assert last(server, "_mget").body == {"ids": [H, P]}
    old_s = NOW_S - 86_400
    imported: dict[str, Any] = {"operation": "import", "run_id": "x", "updated_at": old_s}
    assert last(server, "_bulk").body == [
        {"index": {"_id": f"{H}.1"}}, doc(HUMAN, 1, {"text": "a"}, current=False, **imported),
        {"index": {"_id": H}}, doc(HUMAN, 2, {"text": "b"}, **imported),
        {"index": {"_id": P}}, doc(PERSONA, 3, {"text": "three"}, updated_at=old_s),
        {"index": {"_id": f"{P}.1"}}, doc(PERSONA, 1, {"text": "stored"}, current=False),
    ]  # fmt: skip
    assert [r.version for r in store.state_versions(PERSONA)] == [1, 3]
    assert store.read_state([HUMAN])[0].updated_at == old  # to the microsecond

    assert store.import_state([StateRecord(PERSONA, {"text": "two"}, 2, old)]) == 1  # below the current: kept beside it
    assert [(r.version, r.value["text"]) for r in store.state_versions(PERSONA)] == [(1, "stored"), (2, "two"), (3, "three")]
    with pytest.raises(StoreError, match="StateRecord"):
        store.import_state([PERSONA])  # type: ignore[list-item]


# ---- the fake, as Elasticsearch does ---------------------------------------------------------------


def test_the_fake_guards_index_and_delete_actions_of_a_bulk(server: FakeElasticsearch, store: ElasticsearchMemoryStore) -> None:
    client = store.client
    client.indices.create(index="plain", mappings={"properties": {"n": {"type": "long"}}})
    client.index(index="plain", id="a", document={"n": 1}, refresh=True)
    answer = client.bulk(
        index="plain",
        operations=[{"index": {"_id": "a", "if_seq_no": 99, "if_primary_term": 1}}, {"n": 2},
                    {"delete": {"_id": "a", "if_seq_no": 99, "if_primary_term": 1}},
                    {"index": {"_id": "b", "if_seq_no": 1, "if_primary_term": 1}}, {"n": 3}],
    )  # fmt: skip
    assert [item[next(iter(item))]["status"] for item in answer["items"]] == [409, 409, 409]
    assert server.documents("plain") == {"a": {"n": 1}}
    docs = client.mget(index="missing", ids=["a"])["docs"]
    assert docs[0]["error"]["type"] == "index_not_found_exception"
