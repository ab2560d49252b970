"""Part of the store contract: dense, keyword and hybrid search. Mixed into `StoreContract`.

Dense cases embed real sentences (`ENGLISH`, `CHINESE`) and check the closest meaning ranks
first; keyword cases check exact words and BM25-like ordering; hybrid must equal the reciprocal
rank fusion of the other two.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import numpy as np
import pytest

from memoryscope.errors import StoreError
from memoryscope.memory import MemoryType
from memoryscope.models.base import EmbeddingModel
from memoryscope.stores.base import MemoryFilter, MemoryStore, SearchMode, TimeRange
from memoryscope.stores.fusion import reciprocal_rank_fusion
from memoryscope.testing._store_cases import (
    BASE_TIME,
    CHINESE,
    ENGLISH,
    ContractHelpers,
    embedding_calls,
    ids,
    make_node,
)

__all__ = ["SearchCases"]


class SearchCases(ContractHelpers):
    """Search in every mode; `StoreContract` provides the fixtures."""

    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            ("playing a musical instrument", "guitar"),
            ("cooking Italian food", "pasta"),
            ("a trip to Japan", "kyoto"),
            ("pet animal", "cat"),
        ],
    )
    def test_dense_search_ranks_the_closest_meaning_first(self, store: MemoryStore, query: str, expected: str) -> None:
        nodes = self.upsert_sentences(store, ENGLISH)
        found = store.search(self.ann, query=query, mode=SearchMode.DENSE, top_k=5)
        assert found[0].memory_id == nodes[expected].memory_id
        self.assert_best_first(found, 5)
        assert all(-1.0 <= node.score <= 1.0 + 1e-6 for node in found if node.score is not None)

    @pytest.mark.parametrize(("query", "expected"), [("乐器", "guitar"), ("吃什么", "hotpot"), ("运动锻炼", "running")])
    def test_dense_search_in_chinese(self, store: MemoryStore, query: str, expected: str) -> None:
        nodes = self.upsert_sentences(store, CHINESE)
        assert store.search(self.ann, query=query, mode=SearchMode.DENSE, top_k=1)[0].memory_id == nodes[expected].memory_id

    def test_keyword_search_finds_exact_words(self, store: MemoryStore) -> None:
        nodes = self.upsert_sentences(store, ENGLISH)
        found = store.search(self.ann, query="Zorblax", mode=SearchMode.KEYWORD)
        assert ids(found) == [nodes["cat"].memory_id]
        assert found[0].score is not None and found[0].score > 0
        assert store.search(self.ann, query="violin", mode=SearchMode.KEYWORD) == []
        both = store.search(self.ann, query="the guitar and Kyoto", mode=SearchMode.KEYWORD)
        assert set(ids(both)) == {nodes["guitar"].memory_id, nodes["kyoto"].memory_id}
        self.assert_best_first(both, 2)

    def test_keyword_search_in_chinese(self, store: MemoryStore) -> None:
        nodes = self.upsert_sentences(store, CHINESE)
        assert ids(store.search(self.ann, query="吉他", mode=SearchMode.KEYWORD)) == [nodes["guitar"].memory_id]
        found = store.search(self.ann, query="用户喜欢弹吉他吗", mode=SearchMode.KEYWORD)
        assert found[0].memory_id == nodes["guitar"].memory_id

    def test_keyword_search_sees_a_message_speaker_context_reply_and_inflections(self, store: MemoryStore) -> None:
        """A chat message is found by who said it, what it answered and what answered it
        (`searchable_text`), and by other inflections of its words (`memoryscope.text.stem`)."""
        message = make_node(
            "I have been painting landscapes",
            memory_id="message",
            memory_type=MemoryType.CONVERSATION,
            meta={"speaker": "Caroline", "context": "Melanie: Any new hobby lately?", "reply": "Melanie: Lovely, send a photo"},
        )
        other = make_node("Went camping with the kids", memory_id="other", meta={"speaker": "Melanie"})
        self.upsert_with_random_vectors(store, [message, other])
        expected = {
            "Caroline": ["message"],  # the speaker
            "hobbies": ["message"],  # the context says "hobby"
            "photos": ["message"],  # the reply says "photo"
            "painted": ["message"],  # the content says "painting"
            "camp": ["other"],
            "Melanie": ["message", "other"],
        }
        for query, found_ids in expected.items():
            found = store.search(self.ann, query=query, mode=SearchMode.KEYWORD)
            assert sorted(ids(found)) == found_ids, query
        [back] = store.search(self.ann, query="Caroline", mode=SearchMode.KEYWORD)
        assert back.replace(score=None) == message  # the indexed words are not part of what comes back

    def test_keyword_scores_rank_rarer_and_repeated_words_higher(self, store: MemoryStore) -> None:
        nodes = [
            make_node("tea tea tea and cake", memory_id="many"),
            make_node("tea and a long list of other things to do today", memory_id="once"),
            make_node("cake only", memory_id="cake"),
        ]
        self.upsert_with_random_vectors(store, nodes)
        assert ids(store.search(self.ann, query="tea", mode=SearchMode.KEYWORD)) == ["many", "once"]

    def test_hybrid_is_the_rank_fusion_of_dense_and_keyword(self, store: MemoryStore) -> None:
        nodes = self.upsert_sentences(store, ENGLISH)
        query = "Zorblax and the guitar"
        dense = ids(store.search(self.ann, query=query, mode=SearchMode.DENSE, top_k=5))
        keyword = ids(store.search(self.ann, query=query, mode=SearchMode.KEYWORD, top_k=5))
        hybrid = store.search(self.ann, query=query, mode=SearchMode.HYBRID, top_k=5)
        fused = reciprocal_rank_fusion([dense, keyword], k=60)
        assert ids(hybrid) == [item for item, _ in fused]
        assert [node.score for node in hybrid] == pytest.approx([score for _, score in fused])
        assert set(ids(hybrid[:2])) == {nodes["cat"].memory_id, nodes["guitar"].memory_id}

    def test_search_with_a_precomputed_vector_does_not_embed(self, store: MemoryStore, embedding_model: EmbeddingModel) -> None:
        nodes = self.upsert_sentences(store, ENGLISH)
        vector = embedding_model.embed_query("cooking Italian food")
        before = embedding_calls(embedding_model)
        for mode in (SearchMode.DENSE, SearchMode.HYBRID):
            found = store.search(self.ann, query="cooking Italian food", vector=vector, mode=mode, top_k=3)
            assert found[0].memory_id == nodes["pasta"].memory_id
        assert ids(store.search(self.ann, vector=vector, mode=SearchMode.HYBRID, top_k=1)) == [nodes["pasta"].memory_id]
        assert embedding_calls(embedding_model) == before

    def test_search_time_range_excludes_other_and_unknown_times(self, store: MemoryStore) -> None:
        days = [-10, -5, -1, None]
        nodes = [
            make_node(f"memo {index}", event_time=None if day is None else BASE_TIME + timedelta(days=day))
            for index, day in enumerate(days)
        ]
        vectors = self.upsert_with_random_vectors(store, nodes)
        recent = MemoryFilter("ann", time_range=TimeRange("event_time", BASE_TIME - timedelta(days=6), BASE_TIME))
        for mode in SearchMode:
            found = store.search(recent, query="memo", vector=vectors[3], mode=mode)
            assert set(ids(found)) == {nodes[1].memory_id, nodes[2].memory_id}, mode

    def test_search_respects_top_k(self, store: MemoryStore) -> None:
        nodes = [make_node(f"memo {index}") for index in range(8)]
        vectors = self.upsert_with_random_vectors(store, nodes)
        for mode in SearchMode:
            found = store.search(self.ann, query="memo", vector=vectors[0], mode=mode, top_k=3)
            assert len(found) == 3, mode
            self.assert_best_first(found, 3)

    def test_search_refuses_what_it_cannot_do(self, store: MemoryStore) -> None:
        self.upsert_with_random_vectors(store, [make_node("memo")])
        dimension = self.dimension
        refusals: list[Callable[[], object]] = [
            lambda: store.search(self.ann, mode=SearchMode.DENSE),
            lambda: store.search(self.ann, vector=np.ones(dimension), mode=SearchMode.KEYWORD),
            lambda: store.search(self.ann, vector=np.ones(dimension + 1), mode=SearchMode.DENSE),
            lambda: store.search(self.ann, query="memo", top_k=0),
        ]
        for refusal in refusals:
            with pytest.raises(StoreError):
                refusal()
