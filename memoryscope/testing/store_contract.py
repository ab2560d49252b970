"""The behaviour every memory store must show, as one pytest suite each backend runs.

A backend's test module subclasses `StoreContract` and provides two fixtures and, optionally,
a `reopen` hook::

    class TestSqliteStore(StoreContract):
        @pytest.fixture
        def store(self, tmp_path, embedding_model):
            with SqliteMemoryStore(path=tmp_path / "m.db", embedding_model=embedding_model) as store:
                yield store

        def reopen(self, store, embedding_model):
            return SqliteMemoryStore(path=store.path, embedding_model=embedding_model)

- `embedding_model`: a real embedding model (the offline `LocalEmbedding` is fast enough); the
  suite embeds real sentences to check that the closest meaning ranks first.
- `store`: a fresh, empty store built with that model, closed after the test.
- `reopen(store, embedding_model)`: a second store over the same data built with another model
  (the suite closes it). Backends without one skip the tests that need it.
- `reopen_to_reembed(store, embedding_model)`: the same, opened with `allow_model_change=True`
  (the whole-store and re-embedding cases are in `_store_contract_whole`, metadata filters in
  `_store_contract_metadata`, state records in `_store_contract_state`).

Most tests pass precomputed vectors, so the suite stays fast; only the semantic tests embed.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from memoryscope.errors import StoreConflict, StoreError
from memoryscope.history import ChangeSource, MemoryChange
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.models.base import EmbeddingModel
from memoryscope.stores.base import MemoryFilter, MemoryStore, SearchMode, TimeRange
from memoryscope.testing._store_cases import (
    BASE_TIME,
    ENGLISH,
    FILTER_CASES,
    FilterCase,
    RenamedEmbedding,
    clustered_vectors,
    embedding_calls,
    filter_population,
    ids,
    make_node,
    unit_vectors,
)
from memoryscope.testing._store_contract_metadata import MetadataCases
from memoryscope.testing._store_contract_search import SearchCases
from memoryscope.testing._store_contract_state import StateCases
from memoryscope.testing._store_contract_whole import WholeStoreCases

__all__ = ["BASE_TIME", "RenamedEmbedding", "StoreContract", "clustered_vectors", "make_node", "unit_vectors"]


class StoreContract(SearchCases, MetadataCases, WholeStoreCases, StateCases):
    """Subclass with `store` and `embedding_model` fixtures (and optionally `reopen`, `reopen_to_reembed`)."""

    def reopen(self, store: MemoryStore, embedding_model: EmbeddingModel) -> MemoryStore:
        pytest.skip(f"{type(self).__name__} has no reopen hook")

    # ---- writing and reading back -------------------------------------------------------------

    def test_upsert_then_get_round_trips_every_field(self, store: MemoryStore) -> None:
        shanghai = timezone(timedelta(hours=8))
        node = MemoryNode(
            user_name="ann",
            target_name="bob",
            workspace="assistant-7",
            memory_type=MemoryType.INSIGHT,
            content="Ann 喜欢弹吉他 and plays on Saturdays",
            key="hobby",
            value="guitar",
            status=MemoryStatus.EXPIRED,
            superseded_by="newer-id",
            created_at=datetime(2024, 10, 26, 21, 26, 20, 123456, tzinfo=shanghai),
            updated_at=datetime(2024, 10, 27, 8, 0, 0, 999999, tzinfo=timezone.utc),
            event_time=datetime(2024, 10, 19, 0, 0, tzinfo=shanghai),
            message_time=datetime(2024, 10, 26, 13, 26, 20, 5, tzinfo=timezone.utc),
            source_message_ids=("m1", "m2"),
            reflected=True,
            updated=True,
            access_count=3,
            last_accessed_at=datetime(2024, 11, 1, 12, 0, 0, 1, tzinfo=timezone.utc),
            meta={"source": "chat", "nested": {"n": 1, "ok": True, "tags": ["a", "乙"]}, "none": None},
        )
        self.upsert_with_random_vectors(store, [node])
        [back] = store.get([node.memory_id])
        assert back == node
        assert back.score is None
        assert isinstance(back.memory_type, MemoryType) and isinstance(back.status, MemoryStatus)
        assert isinstance(back.source_message_ids, tuple)
        for name in ("created_at", "updated_at", "event_time", "message_time", "last_accessed_at"):
            assert getattr(back, name).utcoffset() is not None, name

    def test_upsert_skips_nodes_whose_required_memories_are_gone(self, store: MemoryStore) -> None:
        """A background run writes back what it loaded only while it still exists: a delete in
        between sticks (the check is part of the write)."""
        kept = make_node("message kept", memory_id="m-kept")
        gone = make_node("message deleted meanwhile", memory_id="m-gone")
        self.upsert_with_random_vectors(store, [kept, gone])
        store.delete(["m-gone"])
        written = [
            kept.replace(reflected=True),
            gone.replace(reflected=True),
            make_node("fact from the kept message", memory_id="o-kept", source_message_ids=("m-kept",)),
            make_node("fact from the deleted message", memory_id="o-gone", source_message_ids=("m-gone",)),
            make_node("fact without requirements", memory_id="o-free"),
        ]
        requires = {"m-kept": ("m-kept",), "m-gone": ("m-gone",), "o-kept": ("m-kept",), "o-gone": ("m-gone",)}
        dropped = store.upsert(written, unit_vectors(len(written), store.dimension), requires=requires)
        assert sorted(dropped) == ["m-gone", "o-gone"]
        assert sorted(ids(store.scan(self.ann))) == ["m-kept", "o-free", "o-kept"]
        [back] = store.get(["m-kept"])
        assert back.reflected is True
        assert store.upsert([make_node("plain", memory_id="p")], unit_vectors(1, store.dimension)) == []

    # ---- history: every change kept, deletions forgotten ----------------------------------------

    def test_history_keeps_every_change_with_its_source(self, store: MemoryStore) -> None:
        node = make_node("likes coffee", memory_id="h1")
        run = ChangeSource("consolidate_memory", "run-1")
        self.upsert_with_random_vectors(store, [node], change=run)
        self.upsert_with_random_vectors(store, [node.replace(updated_at=BASE_TIME + timedelta(days=1))])  # no real change
        self.upsert_with_random_vectors(store, [node.replace(content="likes tea")], change=ChangeSource("update", "run-2"))
        expired = node.replace(content="likes tea", status=MemoryStatus.EXPIRED, superseded_by="h2")
        self.upsert_with_random_vectors(store, [expired], change=ChangeSource("reflect_and_reconsolidate", "run-3"))
        changes = store.history(memory_id="h1")
        assert [(c.action, c.operation, c.run_id) for c in changes] == [
            ("created", "consolidate_memory", "run-1"),
            ("updated", "update", "run-2"),
            ("expired", "reflect_and_reconsolidate", "run-3"),
        ]
        assert changes[0].before is None and changes[0].after is not None and changes[0].after["content"] == "likes coffee"
        assert changes[1].before is not None and changes[1].before["content"] == "likes coffee"
        assert [c.seq for c in changes] == sorted(c.seq for c in changes)
        assert [c.memory_id for c in store.history(run_id="run-2")] == ["h1"]
        store.update("h1", change=ChangeSource("pin_memory", "run-4"), meta={"pinned": True})
        [pinned] = store.history(memory_id="h1")[3:]
        assert pinned.action == "updated" and pinned.after is not None and pinned.after["meta"] == {"pinned": True}
        assert (pinned.operation, pinned.run_id) == ("pin_memory", "run-4")  # an update is kept under its run
        assert len(store.history(user_name="ann")) == 4 and store.history(user_name="bob") == []
        newest = store.history(user_name="ann", limit=2, newest_first=True)
        assert [c.run_id for c in newest] == ["run-4", "run-3"]  # the latest two, newest first

    def test_an_expected_write_is_a_compare_and_set(self, store: MemoryStore) -> None:
        """`expected` writes a node only as it was read: a stale `updated_at`, or a node expected
        absent that exists, writes nothing of the batch (StoreConflict naming the ids)."""
        first = make_node("one", memory_id="cas")
        self.upsert_with_random_vectors(store, [first], expected={"cas": None})  # created: none was there
        [read] = store.get(["cas"])
        later = read.replace(content="two", updated_at=read.updated_at + timedelta(seconds=1))
        self.upsert_with_random_vectors(store, [later], expected={"cas": read.updated_at})
        stale = read.replace(content="three", updated_at=read.updated_at + timedelta(seconds=2))
        other = make_node("beside", memory_id="cas-other")
        with pytest.raises(StoreConflict) as raised:
            self.upsert_with_random_vectors(store, [stale, other], expected={"cas": read.updated_at, "cas-other": None})
        assert raised.value.memory_ids == ("cas",)
        assert [n.content for n in store.get(["cas"])] == ["two"] and store.get(["cas-other"]) == []
        with pytest.raises(StoreConflict):
            self.upsert_with_random_vectors(store, [first], expected={"cas": None})  # it exists now

    def test_recorded_history_keeps_its_times_and_sources(self, store: MemoryStore) -> None:
        brought = MemoryChange("m9", "ann", "created", BASE_TIME, "consolidate_memory", "run-old", after={"content": "x"})
        store.record_history([brought])
        [back] = store.history(memory_id="m9")
        assert (back.action, back.at, back.operation, back.run_id, back.after) == (
            "created", BASE_TIME, "consolidate_memory", "run-old", {"content": "x"}
        )  # fmt: skip

    def test_a_deleted_memory_leaves_its_deletion_in_history_not_its_content(self, store: MemoryStore) -> None:
        self.upsert_with_random_vectors(store, [make_node("my secret", memory_id="s1"), make_node("other", memory_id="s2")])
        assert store.delete(["s1"], change=ChangeSource("delete_memory", "run-9")) == 1
        changes = store.history(memory_id="s1")
        assert [(c.action, c.operation) for c in changes] == [("created", ""), ("deleted", "delete_memory")]
        assert all(c.before is None and c.after is None for c in changes)  # deletion means deletion
        store.delete_by_filter(self.ann, change=ChangeSource("delete_all"))
        assert [c.action for c in store.history(memory_id="s2")] == ["created", "deleted"]

    # ---- integrity: what `memoryscope doctor` reads ------------------------------------------

    def test_a_sound_store_checks_clean(self, store: MemoryStore) -> None:
        self.upsert_with_random_vectors(store, [make_node("fact one", memory_id="c1"), make_node("fact two", memory_id="c2")])
        problems = store.check()
        assert problems and all(found == [] for found in problems.values()), problems

    # ---- leases: one backend run per user across processes ------------------------------------

    def test_a_lease_is_held_by_one_holder_until_released_or_expired(self, store: MemoryStore) -> None:
        assert store.acquire_lease("backend:ann", "process-a", ttl_s=60)
        assert not store.acquire_lease("backend:ann", "process-b", ttl_s=60)
        assert store.acquire_lease("backend:bob", "process-b", ttl_s=60)  # another user's lease is another lease
        assert store.acquire_lease("backend:ann", "process-a", ttl_s=60)  # the holder renews
        store.release_lease("backend:ann", "process-b")  # not the holder: nothing happens
        assert not store.acquire_lease("backend:ann", "process-b", ttl_s=60)
        store.release_lease("backend:ann", "process-a")
        assert store.acquire_lease("backend:ann", "process-b", ttl_s=60)

    def test_an_expired_lease_can_be_taken_over(self, store: MemoryStore) -> None:
        assert store.acquire_lease("backend:ann", "killed-process", ttl_s=0.05)
        time.sleep(0.1)  # the holder was killed: it never renews
        assert store.acquire_lease("backend:ann", "process-b", ttl_s=60)
        assert not store.acquire_lease("backend:ann", "killed-process", ttl_s=60)

    def test_a_lease_names_its_holder_until_it_ends(self, store: MemoryStore) -> None:
        assert store.lease_holder("backend:ann") is None
        assert store.acquire_lease("backend:ann", "process-a", ttl_s=60)
        held = store.lease_holder("backend:ann")
        assert held is not None and held[0] == "process-a" and 50 < held[1] - time.time() <= 60
        store.release_lease("backend:ann", "process-a")
        assert store.lease_holder("backend:ann") is None

    def test_a_lease_whose_holder_is_gone_is_taken_over_at_once(self, store: MemoryStore) -> None:
        assert store.acquire_lease("backend:ann", "killed-process", ttl_s=300)
        assert not store.acquire_lease("backend:ann", "process-b", ttl_s=60, stale=lambda holder: False)
        assert store.acquire_lease("backend:ann", "process-b", ttl_s=60, stale=lambda holder: holder == "killed-process")
        assert not store.acquire_lease("backend:ann", "killed-process", ttl_s=60)

    def test_get_keeps_asked_order_and_skips_missing(self, store: MemoryStore) -> None:
        nodes = [make_node(f"fact {index}", memory_id=f"id-{index}") for index in range(3)]
        self.upsert_with_random_vectors(store, nodes)
        assert ids(store.get(["id-2", "missing", "id-0"])) == ["id-2", "id-0"]
        assert store.get([]) == []

    def test_upsert_replaces_a_node_with_the_same_id(self, store: MemoryStore) -> None:
        node = make_node("likes coffee", memory_id="same")
        self.upsert_with_random_vectors(store, [node])
        self.upsert_with_random_vectors(store, [node.replace(content="likes tea", access_count=5)], seed=1)
        assert store.count(self.ann) == 1
        [back] = store.get(["same"])
        assert (back.content, back.access_count) == ("likes tea", 5)

    def test_upsert_embeds_missing_vectors_in_one_batch(self, store: MemoryStore, embedding_model: EmbeddingModel) -> None:
        before = embedding_calls(embedding_model)
        nodes = self.upsert_sentences(store, ENGLISH)
        assert embedding_calls(embedding_model) - before == 1
        passage = embedding_model.embed_passages([ENGLISH["kyoto"]])[0]
        [best] = store.search(self.ann, vector=passage, mode=SearchMode.DENSE, top_k=1)
        assert best.memory_id == nodes["kyoto"].memory_id
        assert best.score == pytest.approx(1.0, abs=1e-4)

    def test_upsert_with_vectors_does_not_embed(self, store: MemoryStore, embedding_model: EmbeddingModel) -> None:
        before = embedding_calls(embedding_model)
        self.upsert_with_random_vectors(store, [make_node("a"), make_node("b")])
        assert embedding_calls(embedding_model) == before

    def test_upsert_keeps_the_stored_vector_when_content_is_unchanged(
        self, store: MemoryStore, embedding_model: EmbeddingModel
    ) -> None:
        node = make_node("likes coffee")
        [vector] = self.upsert_with_random_vectors(store, [node], seed=7)
        before = embedding_calls(embedding_model)
        store.upsert([node.replace(meta={"seen": 2}, reflected=True)])
        assert embedding_calls(embedding_model) == before
        [best] = store.search(self.ann, vector=vector, mode=SearchMode.DENSE, top_k=1)
        assert best.memory_id == node.memory_id and best.score == pytest.approx(1.0, abs=1e-4)
        assert best.meta == {"seen": 2}

    def test_upsert_reembeds_changed_content(self, store: MemoryStore, embedding_model: EmbeddingModel) -> None:
        node = make_node("likes coffee")
        self.upsert_with_random_vectors(store, [node])
        store.upsert([node.replace(content=ENGLISH["pasta"])])
        passage = embedding_model.embed_passages([ENGLISH["pasta"]])[0]
        [best] = store.search(self.ann, vector=passage, mode=SearchMode.DENSE, top_k=1)
        assert best.score == pytest.approx(1.0, abs=1e-4)

    def test_batch_with_wrong_vectors_writes_nothing(self, store: MemoryStore) -> None:
        existing = make_node("old content", memory_id="existing")
        self.upsert_with_random_vectors(store, [existing])
        batch = [existing.replace(content="new content"), make_node("a"), make_node("b")]
        dimension = self.dimension
        with pytest.raises(StoreError):
            store.upsert(batch, vectors=unit_vectors(3, dimension + 1))
        with pytest.raises(StoreError):
            store.upsert(batch, vectors=unit_vectors(2, dimension))
        assert store.count(self.ann) == 1
        assert store.get(["existing"])[0].content == "old content"

    def test_batch_with_an_unstorable_node_writes_nothing(self, store: MemoryStore) -> None:
        existing = make_node("old content", memory_id="existing")
        self.upsert_with_random_vectors(store, [existing])
        batch = [existing.replace(content="new content"), make_node("a"), make_node("b", meta={"bad": object()})]
        with pytest.raises(StoreError):
            self.upsert_with_random_vectors(store, batch)
        assert store.count(self.ann) == 1
        assert store.get(["existing"])[0].content == "old content"

    def test_upsert_of_nothing_is_a_no_op(self, store: MemoryStore) -> None:
        store.upsert([])
        assert store.count(self.ann) == 0

    # ---- update and delete ----------------------------------------------------------------------

    def test_update_changes_fields_and_bumps_updated_at(self, store: MemoryStore) -> None:
        node = make_node("likes coffee")
        self.upsert_with_random_vectors(store, [node])
        changed = store.update(node.memory_id, status=MemoryStatus.EXPIRED, superseded_by="x", reflected=True)
        assert (changed.status, changed.superseded_by, changed.reflected) == (MemoryStatus.EXPIRED, "x", True)
        assert changed.updated_at > node.updated_at
        assert store.get([node.memory_id]) == [changed]

    def test_update_keeps_an_explicit_updated_at(self, store: MemoryStore) -> None:
        node = make_node("likes coffee")
        self.upsert_with_random_vectors(store, [node])
        moment = BASE_TIME + timedelta(days=1)
        assert store.update(node.memory_id, updated_at=moment).updated_at == moment

    def test_update_of_content_reembeds(self, store: MemoryStore, embedding_model: EmbeddingModel) -> None:
        node = make_node("likes coffee")
        self.upsert_with_random_vectors(store, [node])
        store.update(node.memory_id, content=ENGLISH["cat"])
        passage = embedding_model.embed_passages([ENGLISH["cat"]])[0]
        [best] = store.search(self.ann, vector=passage, mode=SearchMode.DENSE, top_k=1)
        assert best.content == ENGLISH["cat"] and best.score == pytest.approx(1.0, abs=1e-4)
        assert ids(store.search(self.ann, query="Zorblax", mode=SearchMode.KEYWORD)) == [node.memory_id]

    def test_update_refuses_unknown_fields_scores_and_missing_nodes(self, store: MemoryStore) -> None:
        node = make_node("likes coffee")
        self.upsert_with_random_vectors(store, [node])
        with pytest.raises(StoreError, match="colour"):
            store.update(node.memory_id, colour="red")
        with pytest.raises(StoreError, match="score"):
            store.update(node.memory_id, score=0.5)  # scores belong to search results, not to stored memories
        with pytest.raises(StoreError, match="no-such-id"):
            store.update("no-such-id", reflected=True)
        assert store.get([node.memory_id]) == [node]

    def test_delete_returns_how_many_existed(self, store: MemoryStore) -> None:
        nodes = [make_node(f"fact {index}") for index in range(3)]
        self.upsert_with_random_vectors(store, nodes)
        assert store.delete([nodes[0].memory_id, "missing", nodes[1].memory_id]) == 2
        assert ids(store.scan(self.ann)) == [nodes[2].memory_id]
        assert store.delete([]) == 0

    def test_deleted_nodes_leave_every_search(self, store: MemoryStore) -> None:
        nodes = [make_node(f"memo {index}") for index in range(3)]
        vectors = self.upsert_with_random_vectors(store, nodes)
        assert len(store.search(self.ann, vector=vectors[0], mode=SearchMode.DENSE)) == 3  # warms any cache
        store.delete([nodes[0].memory_id])
        for mode in SearchMode:
            found = ids(store.search(self.ann, query="memo", vector=vectors[0], mode=mode))
            assert nodes[0].memory_id not in found and len(found) == 2, mode

    # ---- scan, count and filters -----------------------------------------------------------------

    def test_scan_pages_are_complete_and_stable(self, store: MemoryStore) -> None:
        # groups of three share a creation time, so paging must break ties by id
        nodes = [
            make_node(
                f"fact {index}", memory_id=f"id-{(index * 7) % 23:02d}", created_at=BASE_TIME + timedelta(seconds=index // 3)
            )
            for index in range(23)
        ]
        self.upsert_with_random_vectors(store, nodes)
        for newest_first in (True, False):
            expected = sorted(nodes, key=lambda node: (node.created_at, node.memory_id), reverse=newest_first)
            pages = [store.scan(self.ann, limit=5, offset=offset, newest_first=newest_first) for offset in range(0, 25, 5)]
            assert [len(page) for page in pages] == [5, 5, 5, 5, 3]
            assert [node.memory_id for page in pages for node in page] == ids(expected)
        assert store.scan(self.ann, limit=5, offset=30) == []

    @pytest.mark.parametrize("case", FILTER_CASES, ids=[case.name for case in FILTER_CASES])
    def test_every_filter_field_is_honoured(self, store: MemoryStore, case: FilterCase) -> None:
        nodes = filter_population(BASE_TIME)
        vectors = self.upsert_with_random_vectors(store, nodes)
        expected = {node.memory_id for node in nodes if case.matches(node)}
        assert expected or case.name == "no_types", "a case should select something"
        assert {node.memory_id for node in store.scan(case.memory_filter, limit=1000)} == expected
        assert store.count(case.memory_filter) == len(expected)
        for mode in SearchMode:
            found = store.search(case.memory_filter, query="memo", vector=vectors[0], mode=mode, top_k=100)
            assert {node.memory_id for node in found} == expected, mode

    @pytest.mark.parametrize("case", FILTER_CASES, ids=[case.name for case in FILTER_CASES])
    def test_delete_by_filter_deletes_exactly_the_matches(self, store: MemoryStore, case: FilterCase) -> None:
        nodes = filter_population(BASE_TIME)
        self.upsert_with_random_vectors(store, nodes)
        expected = {node.memory_id for node in nodes if case.matches(node)}
        assert store.delete_by_filter(case.memory_filter) == len(expected)
        remaining = {node.memory_id for user in ("ann", "bob") for node in store.scan(MemoryFilter(user), limit=1000)}
        assert remaining == {node.memory_id for node in nodes} - expected

    def test_filters_refuse_unknown_time_fields_and_naive_times(self, store: MemoryStore) -> None:
        with pytest.raises(StoreError, match="when"):
            store.scan(MemoryFilter("ann", time_range=TimeRange(field="when")))
        with pytest.raises(StoreError, match="timezone"):
            store.count(MemoryFilter("ann", time_range=TimeRange(start=datetime(2024, 1, 1))))  # naive on purpose

    # ---- isolation -----------------------------------------------------------------------------

    def test_users_targets_and_workspaces_never_mix(self, store: MemoryStore) -> None:
        scopes = [("ann", "", ""), ("bob", "", ""), ("ann", "carol", ""), ("ann", "", "w2")]
        nodes = [
            make_node(f"memo about guitars number {index}", user_name=user, target_name=target, workspace=workspace)
            for user, target, workspace in scopes
            for index in range(3)
        ]
        vectors = self.upsert_with_random_vectors(store, nodes)
        for user, target, workspace in scopes:
            memory_filter = MemoryFilter(user, target_name=target, workspace=workspace)
            expected = {n.memory_id for n in nodes if (n.user_name, n.target_name, n.workspace) == (user, target, workspace)}
            assert {n.memory_id for n in store.scan(memory_filter)} == expected
            assert store.count(memory_filter) == 3
            for mode in SearchMode:
                found = store.search(memory_filter, query="guitars memo", vector=vectors[0], mode=mode, top_k=50)
                assert {n.memory_id for n in found} == expected, (mode, user, target, workspace)
        assert store.delete_by_filter(MemoryFilter("bob")) == 3
        assert store.count(self.ann) == 9
        assert store.search(MemoryFilter("bob"), query="guitars", vector=vectors[0]) == []
        assert store.search(MemoryFilter("nobody"), query="guitars", vector=vectors[0]) == []

    # ---- the embedding model the vectors were made with ------------------------------------------

    def test_reopen_with_the_same_model_keeps_everything(self, store: MemoryStore, embedding_model: EmbeddingModel) -> None:
        nodes = self.upsert_sentences(store, ENGLISH)
        with self.reopen(store, embedding_model) as reopened:
            assert reopened.get(ids(list(nodes.values()))) == list(nodes.values())
            [best] = reopened.search(self.ann, query="pet animal", mode=SearchMode.DENSE, top_k=1)
            assert best.memory_id == nodes["cat"].memory_id

    @pytest.mark.parametrize("change", ["name", "dimension"])
    def test_another_embedding_model_is_refused(self, store: MemoryStore, embedding_model: EmbeddingModel, change: str) -> None:
        self.upsert_with_random_vectors(store, [make_node("memo")])
        if change == "name":
            other = RenamedEmbedding(embedding_model, "another-model")
        else:
            other = RenamedEmbedding(embedding_model, embedding_model.model_name, dimension=embedding_model.dimension // 2)
        with pytest.raises(StoreError) as caught:
            self.reopen(store, other).close()
        message = str(caught.value)
        assert embedding_model.model_name in message and other.model_name in message
        assert str(embedding_model.dimension) in message and str(other.dimension) in message
        assert "memoryscope reembed" in message
