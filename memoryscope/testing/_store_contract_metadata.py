"""Part of the store contract: filters on a memory's metadata (`MemoryFilter.metadata`). Mixed
into `StoreContract`.

Every read a filter scopes must honour the conditions exactly as `memoryscope.stores.metadata`
means them (`matches`): scan, count, search in each mode (keyword first, before a dense search
loads anything into memory, then again after), and delete by filter; after an update, a
replacement and a delete, old values stop matching. The cases are in `_store_metadata_cases`.
"""

from __future__ import annotations

import numpy as np
import pytest

from memoryscope.errors import StoreError
from memoryscope.memory import MemoryNode
from memoryscope.stores.base import MemoryFilter, MemoryStore, SearchMode
from memoryscope.stores.metadata import MetadataCondition, matches, metadata_conditions
from memoryscope.testing._store_cases import ContractHelpers, make_node
from memoryscope.testing._store_metadata_cases import METADATA_CASES, MetadataCase, metadata_population

__all__ = ["MetadataCases"]

# keyword first: with nothing loaded yet a store may take another path than after a dense search
_MODES = (SearchMode.KEYWORD, SearchMode.DENSE, SearchMode.KEYWORD, SearchMode.HYBRID)


def _ids(nodes: list[MemoryNode]) -> set[str]:
    return {node.memory_id for node in nodes}


class MetadataCases(ContractHelpers):
    """Metadata filters in every read; `StoreContract` provides the fixtures."""

    def assert_selects(self, store: MemoryStore, memory_filter: MemoryFilter, expected: set[str], vector: np.ndarray) -> None:
        """scan, count and every search mode return exactly `expected`."""
        assert _ids(store.scan(memory_filter, limit=1000)) == expected
        assert store.count(memory_filter) == len(expected)
        for mode in _MODES:
            found = store.search(memory_filter, query="memo", vector=vector, mode=mode, top_k=100)
            assert _ids(found) == expected, mode

    @pytest.mark.parametrize("case", METADATA_CASES, ids=[case.name for case in METADATA_CASES])
    def test_metadata_filters_select_exactly_their_memories(self, store: MemoryStore, case: MetadataCase) -> None:
        nodes = metadata_population()
        vectors = self.upsert_with_random_vectors(store, nodes)
        memory_filter = case.memory_filter
        # the reference meaning agrees with the case, written out by hand (other fields narrow it further)
        reference = {n.memory_id for n in nodes if n.user_name == "ann" and matches(n.meta, memory_filter.metadata)}
        assert case.expected <= reference if case.fields else case.expected == reference
        self.assert_selects(store, memory_filter, set(case.expected), vectors[0])

    @pytest.mark.parametrize("case", METADATA_CASES[::3], ids=[case.name for case in METADATA_CASES[::3]])
    def test_delete_by_metadata_filter_deletes_exactly_the_matches(self, store: MemoryStore, case: MetadataCase) -> None:
        nodes = metadata_population()
        self.upsert_with_random_vectors(store, nodes)
        assert store.delete_by_filter(case.memory_filter) == len(case.expected)
        remaining = _ids(store.scan(MemoryFilter("ann"), limit=1000)) | _ids(store.scan(MemoryFilter("bob"), limit=1000))
        assert remaining == {node.memory_id for node in nodes} - case.expected

    def test_changed_metadata_is_found_by_its_new_values_only(self, store: MemoryStore) -> None:
        first, other = make_node("memo one", memory_id="x1", meta={"category": "music", "rating": 2}), make_node("memo two")
        vectors = self.upsert_with_random_vectors(store, [first, other])
        music = MemoryFilter("ann", metadata=metadata_conditions({"category": "music"}))
        sport = MemoryFilter("ann", metadata=metadata_conditions({"category": "sport", "rating": {"gte": 4}}))
        self.assert_selects(store, music, {"x1"}, vectors[0])  # also loads whatever a store keeps in memory
        store.update("x1", meta={"category": "sport", "rating": 4.5})
        self.assert_selects(store, music, set(), vectors[0])
        self.assert_selects(store, sport, {"x1"}, vectors[0])
        store.upsert([first.replace(meta={"rating": 5})], vectors=vectors[:1])  # replaced whole: `category` gone
        self.assert_selects(store, sport, set(), vectors[0])
        rated = MemoryFilter("ann", metadata=metadata_conditions({"rating": {"gt": 4}}))
        self.assert_selects(store, rated, {"x1"}, vectors[0])
        store.update("x1", content="memo one, reworded")  # meta unchanged: still found by it
        self.assert_selects(store, rated, {"x1"}, vectors[0])

    def test_metadata_follows_a_memory_to_another_user(self, store: MemoryStore) -> None:
        node = make_node("memo moving", memory_id="mv", meta={"category": "music"})
        vectors = self.upsert_with_random_vectors(store, [node])
        conditions = metadata_conditions({"category": "music"})
        self.assert_selects(store, MemoryFilter("ann", metadata=conditions), {"mv"}, vectors[0])
        store.upsert([node.replace(user_name="bob")], vectors=vectors)
        self.assert_selects(store, MemoryFilter("ann", metadata=conditions), set(), vectors[0])
        self.assert_selects(store, MemoryFilter("bob", metadata=conditions), {"mv"}, vectors[0])

    def test_a_deleted_memory_leaves_metadata_filters(self, store: MemoryStore) -> None:
        nodes = [make_node(f"memo {index}", memory_id=f"d{index}", meta={"tags": ["a", "b"], "n": index}) for index in range(3)]
        vectors = self.upsert_with_random_vectors(store, nodes)
        tagged = MemoryFilter("ann", metadata=metadata_conditions({"tags": "a"}))
        self.assert_selects(store, tagged, {"d0", "d1", "d2"}, vectors[0])
        store.delete(["d0"])
        self.assert_selects(store, tagged, {"d1", "d2"}, vectors[0])
        assert store.delete_by_filter(MemoryFilter("ann", metadata=metadata_conditions({"n": {"gte": 2}}))) == 1
        self.assert_selects(store, tagged, {"d1"}, vectors[0])
        store.upsert([make_node("memo again", memory_id="d0")], vectors=vectors[:1])  # the id back, without meta
        self.assert_selects(store, tagged, {"d1"}, vectors[0])

    def test_an_empty_metadata_filter_keeps_every_memory(self, store: MemoryStore) -> None:
        vectors = self.upsert_with_random_vectors(store, [make_node("memo a", meta={"k": 1}), make_node("memo b")])
        nodes = store.scan(self.ann)
        self.assert_selects(store, MemoryFilter("ann", metadata=metadata_conditions({})), _ids(nodes), vectors[0])

    @pytest.mark.parametrize(
        "metadata",
        [
            {"category": "music"},  # a mapping where conditions belong: metadata_conditions makes them
            (MetadataCondition("category", "like", "mus"),),
            (MetadataCondition("rating", "gt", "high"),),
            ("category",),
        ],
        ids=["mapping", "unknown_operator", "range_of_a_text", "not_a_condition"],
    )
    def test_bad_metadata_filters_are_store_errors(self, store: MemoryStore, metadata: object) -> None:
        vectors = self.upsert_with_random_vectors(store, [make_node("memo", meta={"category": "music"})])
        memory_filter = MemoryFilter("ann", metadata=metadata)  # type: ignore[arg-type]  # wrong on purpose
        for read in (
            lambda: store.scan(memory_filter),
            lambda: store.count(memory_filter),
            lambda: store.delete_by_filter(memory_filter),
            *(lambda mode=mode: store.search(memory_filter, query="memo", vector=vectors[0], mode=mode) for mode in SearchMode),
        ):
            with pytest.raises(StoreError):
                read()
        assert store.count(self.ann) == 1
