"""Part of the store contract: reads over the whole store (`iter_all`, `user_counts`,
`get_vectors`) and re-embedding after a model change. Mixed into `StoreContract`.

Re-embedding needs the backend's `reopen_to_reembed(store, embedding_model)` hook: the same data
opened with another model and `allow_model_change=True`. Backends without it skip those tests.
"""

from __future__ import annotations

import numpy as np
import pytest

from memoryscope.errors import StoreError
from memoryscope.memory import MemoryNode
from memoryscope.models.base import EmbeddingModel
from memoryscope.stores.base import MemoryFilter, MemoryStore, SearchMode
from memoryscope.testing._store_cases import ENGLISH, RenamedEmbedding, make_node, unit_vectors

__all__ = ["WholeStoreCases"]


def _population() -> list[MemoryNode]:
    """Three users, ids that do not sort in insertion or user order."""
    return [
        make_node(f"{user} fact {index}", user_name=user, memory_id=f"{'qcmxhaztk'[(index * 4 + len(user)) % 9]}-{user}-{index}")
        for user in ("ann", "bob", "cy")
        for index in range(4 if user != "cy" else 1)
    ]


class WholeStoreCases:
    """Whole-store reads and re-embedding; `StoreContract` provides the fixtures."""

    def reopen(self, store: MemoryStore, embedding_model: EmbeddingModel) -> MemoryStore:
        pytest.skip(f"{type(self).__name__} has no reopen hook")

    def reopen_to_reembed(self, store: MemoryStore, embedding_model: EmbeddingModel) -> MemoryStore:
        """The data of `store` opened with `embedding_model` and `allow_model_change=True`."""
        pytest.skip(f"{type(self).__name__} has no reopen_to_reembed hook")

    def test_iter_all_walks_every_user_in_id_order_and_in_batches(self, store: MemoryStore) -> None:
        assert list(store.iter_all()) == []
        nodes = _population()
        store.upsert(nodes, vectors=unit_vectors(len(nodes), int(store.dimension)))
        batches = list(store.iter_all(batch_size=4))
        assert [len(batch) for batch in batches] == [4, 4, 1]
        walked = [node for batch in batches for node in batch]
        assert [node.memory_id for node in walked] == sorted(node.memory_id for node in nodes)
        assert sorted(walked, key=lambda node: node.memory_id) == sorted(nodes, key=lambda node: node.memory_id)

    def test_iter_all_for_one_user_and_after_an_id(self, store: MemoryStore) -> None:
        nodes = _population()
        store.upsert(nodes, vectors=unit_vectors(len(nodes), int(store.dimension)))
        bob = sorted(node.memory_id for node in nodes if node.user_name == "bob")
        assert [node.memory_id for batch in store.iter_all(batch_size=3, user_name="bob") for node in batch] == bob
        everyone = sorted(node.memory_id for node in nodes)
        after = [node.memory_id for batch in store.iter_all(batch_size=2, after_id=everyone[4]) for node in batch]
        assert after == everyone[5:]
        assert list(store.iter_all(user_name="nobody")) == []
        with pytest.raises(StoreError, match="batch_size"):
            next(store.iter_all(batch_size=0))

    def test_user_counts_count_every_user(self, store: MemoryStore) -> None:
        assert store.user_counts() == {}
        nodes = _population()
        store.upsert(nodes, vectors=unit_vectors(len(nodes), int(store.dimension)))
        assert store.user_counts() == {"ann": 4, "bob": 4, "cy": 1}
        store.delete([nodes[0].memory_id])
        assert store.user_counts()["ann"] == 3

    def test_get_vectors_gives_the_stored_unit_vectors(self, store: MemoryStore) -> None:
        nodes = [make_node(f"fact {index}", memory_id=f"v-{index}") for index in range(3)]
        vectors = unit_vectors(3, int(store.dimension), seed=7)
        store.upsert(nodes, vectors=vectors * 3.0)  # stored normalised
        found = store.get_vectors(["v-2", "missing", "v-0"])
        assert set(found) == {"v-0", "v-2"}
        assert found["v-0"].dtype == np.float32
        np.testing.assert_allclose(found["v-0"], vectors[0], atol=1e-6)
        np.testing.assert_allclose(found["v-2"], vectors[2], atol=1e-6)
        assert store.get_vectors([]) == {}

    def test_reembed_moves_the_store_to_the_new_model(self, store: MemoryStore, embedding_model: EmbeddingModel) -> None:
        old = (embedding_model.model_name, int(embedding_model.dimension))
        nodes = [make_node(text, memory_id=f"ann-{name}") for name, text in ENGLISH.items()]
        store.upsert(nodes)
        new_model = RenamedEmbedding(embedding_model, "renamed-e5-128", dimension=128)
        with self.reopen_to_reembed(store, new_model) as reopened:
            assert reopened.recorded_embedding == old
            # reads work; writes and searches wait for the re-embedding
            assert reopened.count(MemoryFilter("ann")) == len(nodes)
            assert len(reopened.get_vectors(["ann-kyoto"])["ann-kyoto"]) == old[1]
            with pytest.raises(StoreError, match="reembed"):
                reopened.upsert([make_node("new")])
            with pytest.raises(StoreError, match="reembed"):
                reopened.search(MemoryFilter("ann"), query="travel", mode=SearchMode.DENSE)
            assert reopened.reembed(batch_size=2) == len(nodes)
            assert reopened.recorded_embedding == ("renamed-e5-128", 128)
            [best] = reopened.search(
                MemoryFilter("ann"), query="Which city in Japan did we visit?", mode=SearchMode.DENSE, top_k=1
            )
            assert best.memory_id == "ann-kyoto"
            assert len(reopened.get_vectors(["ann-kyoto"])["ann-kyoto"]) == 128
            assert sorted(reopened.get([node.memory_id for node in nodes]), key=lambda node: node.memory_id) == sorted(
                nodes, key=lambda node: node.memory_id
            )
        with self.reopen(store, new_model) as plain:
            assert plain.count(MemoryFilter("ann")) == len(nodes)
        with pytest.raises(StoreError, match="reembed"):
            self.reopen(store, embedding_model).close()
