"""Part of the store contract: state records beside the memories (`memoryscope.stores.state`):
versions, compare-and-set, kept versions, isolation per owner, export and import. Mixed into
`StoreContract`."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memoryscope.errors import StoreConflict, StoreError
from memoryscope.history import ChangeSource
from memoryscope.memory import MemoryType
from memoryscope.stores.base import MemoryFilter, MemoryStore
from memoryscope.stores.state import StateKey, StateOwner, StateRecord
from memoryscope.testing._store_cases import BASE_TIME

__all__ = ["StateCases"]

ANN = StateOwner("ann")
HUMAN = StateKey(ANN, "core_block", "human")
PERSONA = StateKey(ANN, "core_block", "persona")


class StateCases:
    """State records; `StoreContract` provides the fixtures."""

    def test_a_state_write_gives_the_next_version_and_reads_back(self, store: MemoryStore) -> None:
        assert store.read_state([HUMAN]) == [] and store.list_state(ANN, "core_block") == []
        [first] = store.write_state({HUMAN: {"text": "Ann", "limit": 100}}, change=ChangeSource("core_memory_create", "r1"))
        assert (first.key, first.version, first.value, first.operation, first.run_id) == (
            HUMAN, 1, {"text": "Ann", "limit": 100}, "core_memory_create", "r1"
        )  # fmt: skip
        assert first.updated_at.tzinfo is not None
        store.write_state({HUMAN: {"text": "Ann plays the guitar", "limit": 100}, PERSONA: {"text": "I am Sam"}})
        [human, persona] = store.read_state([HUMAN, PERSONA])
        assert (human.version, human.value["text"], persona.version) == (2, "Ann plays the guitar", 1)
        assert [record.key.name for record in store.list_state(ANN, "core_block")] == ["human", "persona"]
        nested = {"queue": [{"role": "user", "content": "héllo 你好", "n": 1.5}], "none": None, "ok": True}
        store.write_state({StateKey(ANN, "agent_state", "state"): nested})
        assert store.read_state([StateKey(ANN, "agent_state", "state")])[0].value == nested

    def test_state_is_apart_from_memories_and_per_owner(self, store: MemoryStore) -> None:
        store.write_state({HUMAN: {"text": "Ann"}})
        bob, work = StateOwner("bob"), StateOwner("ann", workspace="work")
        assert store.read_state([StateKey(bob, "core_block", "human"), StateKey(work, "core_block", "human")]) == []
        assert store.list_state(bob, "core_block") == [] and store.list_state(ANN, "agent_state") == []
        assert store.count(MemoryFilter("ann")) == 0 and store.user_counts() == {}  # no memory, none listed
        store.write_state({StateKey(work, "core_block", "human"): {"text": "Ann at work"}})
        assert store.delete_state("ann", workspace="work") == 1
        assert [r.value["text"] for r in store.read_state([HUMAN])] == ["Ann"]
        assert store.delete_state("ann") == 1 and store.read_state([HUMAN]) == []
        assert store.delete_state("ann") == 0

    def test_a_state_write_with_expected_versions_is_a_compare_and_set(self, store: MemoryStore) -> None:
        store.write_state({HUMAN: {"text": "one"}}, expected={HUMAN: 0})  # created: none was there
        with pytest.raises(StoreConflict):
            store.write_state({HUMAN: {"text": "again"}}, expected={HUMAN: 0})  # it exists now
        store.write_state({HUMAN: {"text": "two"}}, expected={HUMAN: 1})
        with pytest.raises(StoreConflict):  # a stale version: nothing of the batch lands
            store.write_state({HUMAN: {"text": "stale"}, PERSONA: {"text": "new"}}, expected={HUMAN: 1, PERSONA: 0})
        assert [r.value["text"] for r in store.read_state([HUMAN])] == ["two"] and store.read_state([PERSONA]) == []

    def test_versioned_writes_keep_every_version_others_only_the_latest(self, store: MemoryStore) -> None:
        for text in ("a", "b", "c"):
            store.write_state({HUMAN: {"text": text}}, versioned=True, change=ChangeSource("core_memory_append"))
        versions = store.state_versions(HUMAN)
        assert [(r.version, r.value["text"]) for r in versions] == [(1, "a"), (2, "b"), (3, "c")]
        assert versions[0].updated_at <= versions[-1].updated_at
        assert [r.value["text"] for r in store.state_versions(HUMAN, limit=2)] == ["b", "c"]
        queue = StateKey(ANN, "agent_state", "state")
        for step in range(3):
            store.write_state({queue: {"step": step}})
        assert [(r.version, r.value) for r in store.state_versions(queue)] == [(3, {"step": 2})]
        assert store.state_versions(StateKey(ANN, "agent_state", "missing")) == []

    def test_a_value_that_is_not_json_is_refused_and_nothing_written(self, store: MemoryStore) -> None:
        for bad in ({"n": float("nan")}, {"s": "\ud800"}, {"o": object()}, ["not", "an", "object"]):
            with pytest.raises(StoreError):
                store.write_state({HUMAN: {"text": "fine"}, PERSONA: bad})  # type: ignore[dict-item]
        assert store.read_state([HUMAN, PERSONA]) == []

    def test_state_exports_every_version_and_imports_as_it_was(self, store: MemoryStore) -> None:
        for text in ("a", "b"):
            store.write_state({HUMAN: {"text": text}}, versioned=True)
        store.write_state({StateKey(StateOwner("bob"), "agent_state", "state"): {"summary": "s"}})
        exported = [record for batch in store.iter_state() for record in batch]
        assert sorted((r.key.owner.user_name, r.key.name, r.version) for r in exported) == [
            ("ann", "human", 1), ("ann", "human", 2), ("bob", "state", 1)
        ]  # fmt: skip
        assert [r.version for batch in store.iter_state(user_name="bob") for r in batch] == [1]
        assert store.delete_state("ann") == 1 and store.delete_state("bob") == 1
        old = StateRecord(PERSONA, {"text": "older"}, 4, BASE_TIME, "import", "run-x")
        assert store.import_state([*exported, old]) == 4
        assert [(r.version, r.value["text"]) for r in store.state_versions(HUMAN)] == [(1, "a"), (2, "b")]
        [persona] = store.read_state([PERSONA])
        assert (persona.version, persona.updated_at, persona.operation, persona.run_id) == (4, BASE_TIME, "import", "run-x")
        store.write_state({PERSONA: {"text": "newer"}}, expected={PERSONA: 4})
        assert store.read_state([PERSONA])[0].version == 5
        assert StateRecord.from_dict(persona.to_dict()) == persona

    def test_state_outlives_deleting_the_owners_memories(self, store: MemoryStore) -> None:
        store.write_state({HUMAN: {"text": "Ann"}})
        store.delete_by_filter(MemoryFilter("ann", memory_types=tuple(MemoryType)))
        assert [r.value for r in store.read_state([HUMAN])] == [{"text": "Ann"}]
        assert store.read_state([HUMAN])[0].updated_at > BASE_TIME - timedelta(days=1)
