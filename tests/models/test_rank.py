"""Rank backends: `bge_rank` and `dashscope_rank` against the fake server, `fusion_rank` locally."""

from __future__ import annotations

import asyncio
import math
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from memoryscope.errors import ModelError
from memoryscope.memory import MemoryNode
from memoryscope.models.base import RANK_BACKENDS
from memoryscope.models.rank.bge_rank import BgeRank
from memoryscope.models.rank.dashscope_rank import DashScopeRank
from memoryscope.models.rank.fusion_rank import FusionRank, bm25_scores, min_max
from memoryscope.testing.fake_openai import DASHSCOPE_RERANK_PATH, FakeOpenAIServer

NOW = datetime(2024, 10, 26, 21, 0, tzinfo=timezone.utc)
CONTENTS = ["user drinks green tea", "user plays the guitar in a band", "user plays chess", "user lives in Kyoto"]


def node(content: str, score: float | None = None, days_ago: float = 0.0) -> MemoryNode:
    said = NOW - timedelta(days=days_ago)
    return MemoryNode(user_name="ann", content=content, score=score, created_at=said, message_time=said)


def bge(server: FakeOpenAIServer, fast_retry: dict[str, Any], **params: Any) -> BgeRank:
    return BgeRank(BgeRank.Params(api_base=server.base_url, **{**fast_retry, **params}))


def test_bge_request_body_is_pinned(server: FakeOpenAIServer, fast_retry: dict[str, Any], api_key: str) -> None:
    model = bge(server, fast_retry, api_key_env="MEMORYSCOPE_TEST_KEY", top_n=500)
    model.score("plays guitar", [node(text) for text in CONTENTS])
    (record,) = server.requests
    assert record.path == "/v1/rerank" and record.api_key_suffix == "9xyz"
    assert record.body == {"model": "BAAI/bge-reranker-v2-m3", "query": "plays guitar", "documents": CONTENTS, "top_n": 4}


def test_bge_scores_come_back_in_input_order(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    scores = bge(server, fast_retry).score("plays guitar", [node(text) for text in CONTENTS])
    assert scores == [0.0, 1.0, 0.5, 0.0]  # the fake scores the share of query words present


def test_bge_memories_beyond_top_n_score_minus_infinity(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    scores = bge(server, fast_retry, top_n=2).score("plays guitar", [node(text) for text in CONTENTS])
    assert server.requests[0].body["top_n"] == 2
    assert scores[1:3] == [1.0, 0.5] and scores[0] == scores[3] == -math.inf


def test_bge_rerank_is_best_first_and_async_agrees(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    model = bge(server, fast_retry)
    assert model.rerank("plays guitar", CONTENTS, top_n=2) == [(1, 1.0), (2, 0.5)]
    assert asyncio.run(model.arerank("plays guitar", CONTENTS, top_n=2)) == [(1, 1.0), (2, 0.5)]
    assert asyncio.run(model.ascore("plays guitar", [node(text) for text in CONTENTS])) == [0.0, 1.0, 0.5, 0.0]
    assert model.usage.snapshot()["calls"] == 3


def test_bge_no_memories_no_call(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    assert bge(server, fast_retry).score("anything", []) == []
    assert server.requests == []


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ({"data": []}, "expected field 'results'"),
        ({"results": [{"index": 9, "relevance_score": 0.5}]}, r"results\[0\].index"),
        ({"results": [{"index": 0, "relevance_score": "high"}]}, r"results\[0\].relevance_score to be a number"),
        ({"results": [{"index": 0, "relevance_score": 1}, {"index": 0, "relevance_score": 1}]}, "distinct"),
    ],
)
def test_bge_malformed_replies_say_what_was_expected(
    server: FakeOpenAIServer, fast_retry: dict[str, Any], reply: dict[str, Any], message: str
) -> None:
    server.override("/v1/rerank", lambda body: reply)
    with pytest.raises(ModelError, match=message):
        bge(server, fast_retry).rerank("tea", ["green tea", "black tea"])


def test_postprocessor_reorders_llama_index_nodes(server: FakeOpenAIServer, fast_retry: dict[str, Any]) -> None:
    from llama_index.core.schema import NodeWithScore, TextNode

    from memoryscope.models.rank.bge_rank import BgeRerankPostprocessor

    nodes = [NodeWithScore(node=TextNode(text=text), score=0.1) for text in CONTENTS]
    postprocessor = BgeRerankPostprocessor(ranker=bge(server, fast_retry), top_n=2)
    ranked = postprocessor.postprocess_nodes(nodes, query_str="plays guitar")
    assert [(item.node.get_content(), item.score) for item in ranked] == [(CONTENTS[1], 1.0), (CONTENTS[2], 0.5)]
    assert server.requests[0].body["documents"] == CONTENTS
    again = asyncio.run(bge(server, fast_retry).as_postprocessor().apostprocess_nodes(nodes, query_str="plays guitar"))
    assert [item.node.get_content() for item in again][:2] == CONTENTS[1:3] and len(again) == 4
    with pytest.raises(ValueError, match="needs the query"):
        postprocessor.postprocess_nodes(nodes)


def test_dashscope_request_body_is_pinned(server: FakeOpenAIServer, fast_retry: dict[str, Any], api_key: str) -> None:
    params = DashScopeRank.Params(api_base=f"{server.root_url}/api/v1", api_key_env="MEMORYSCOPE_TEST_KEY", top_n=3, **fast_retry)
    scores = DashScopeRank(params).score("plays guitar", [node(text) for text in CONTENTS])
    (record,) = server.requests
    assert record.path == DASHSCOPE_RERANK_PATH and record.api_key_suffix == "9xyz"
    assert record.body == {
        "model": "gte-rerank",
        "input": {"query": "plays guitar", "documents": CONTENTS},
        "parameters": {"return_documents": False, "top_n": 3},
    }
    assert scores[1:3] == [1.0, 0.5] and -math.inf in scores


def test_dashscope_defaults_and_registration() -> None:
    params = DashScopeRank.Params()
    assert (params.api_base, params.api_key_env) == ("https://dashscope.aliyuncs.com/api/v1", "DASHSCOPE_API_KEY")
    assert {"bge_rank", "dashscope_rank", "fusion_rank"} <= set(RANK_BACKENDS.names())


def test_fusion_keyword_overlap_alone() -> None:
    ranker = FusionRank(FusionRank.Params(vector_weight=0, keyword_weight=1, recency_weight=0))
    scores = ranker.score("which band does she play guitar in?", [node(text) for text in CONTENTS])
    assert max(range(4), key=scores.__getitem__) == 1
    assert scores[1] == 1.0 and scores[0] == scores[3] == 0.0
    assert ranker.usage.snapshot()["calls"] == 1


def test_fusion_keyword_overlap_in_chinese() -> None:
    ranker = FusionRank(FusionRank.Params(vector_weight=0, keyword_weight=1, recency_weight=0))
    scores = ranker.score("用户弹吉他吗", [node("用户喜欢喝绿茶"), node("用户每天晚上弹吉他")])
    assert scores[1] > scores[0]


def test_fusion_recency_alone_prefers_newer() -> None:
    ranker = FusionRank(FusionRank.Params(vector_weight=0, keyword_weight=0, recency_weight=1, recency_half_life_days=7))
    memories = [node("a", days_ago=30), node("b", days_ago=1), node("c", days_ago=7)]
    scores = ranker.score("anything", memories, query_time=NOW)
    assert scores[1] > scores[2] > scores[0]


def test_fusion_vector_score_alone_and_missing_scores_rank_last() -> None:
    ranker = FusionRank(FusionRank.Params(vector_weight=1, keyword_weight=0, recency_weight=0))
    scores = ranker.score("q", [node("a", score=0.2), node("b", score=None), node("c", score=0.9)])
    assert scores == [0.0, 0.0, 1.0]


def test_fusion_mixes_signals_by_weight() -> None:
    memories = [node("user plays the guitar", score=0.2, days_ago=100), node("user drinks tea", score=0.9, days_ago=0)]
    keyword_heavy = FusionRank(FusionRank.Params(vector_weight=0.1, keyword_weight=0.8, recency_weight=0.1))
    vector_heavy = FusionRank(FusionRank.Params(vector_weight=0.8, keyword_weight=0.1, recency_weight=0.1))
    keyword_scores = keyword_heavy.score("guitar", memories, query_time=NOW)
    vector_scores = vector_heavy.score("guitar", memories, query_time=NOW)
    assert keyword_scores[0] > keyword_scores[1]
    assert vector_scores[1] > vector_scores[0]
    assert all(0.0 <= value <= 1.0 for value in keyword_scores + vector_scores)


def test_fusion_defaults_work_without_params_and_empty_input() -> None:
    ranker = FusionRank()
    assert ranker.score("q", []) == []
    assert len(ranker.score("guitar", [node("guitar", score=0.5), node("tea")])) == 2


def test_fusion_refuses_all_zero_weights_and_naive_times() -> None:
    with pytest.raises(ValidationError, match="at least one of"):
        FusionRank.Params(vector_weight=0, keyword_weight=0, recency_weight=0)
    with pytest.raises(ValueError, match="timezone-aware"):
        FusionRank().score("q", [node("a")], query_time=datetime(2024, 1, 1))


def test_bm25_prefers_rare_terms_and_min_max_scales() -> None:
    scores = bm25_scores("guitar user", [("user guitar", ""), ("user tea", ""), ("user chess", "")])
    assert scores[0] > scores[1] == scores[2] > 0  # "user" is everywhere, so it weighs little
    assert min_max([2.0, 4.0, -math.inf]) == [0.0, 1.0, 0.0]
    assert min_max([3.0, 3.0]) == [0.0, 0.0]


def test_words_around_a_message_count_around_weight() -> None:
    documents = [("user plays guitar", ""), ("user plays", "guitar"), ("user drinks tea", "")]
    half = bm25_scores("guitar", documents, around_weight=0.5)
    full = bm25_scores("guitar", documents, around_weight=1.0)
    assert half[0] > half[1] > half[2] == 0
    assert full[0] == pytest.approx(full[1])  # same count, same length
    assert bm25_scores("guitar", documents, around_weight=0.0)[1] == 0


def test_fusion_keyword_sees_speaker_and_context_and_folds_inflections() -> None:
    """A chat message matches on who said it and what it answered, and "hobbies" meets "hobby"."""
    ranker = FusionRank(FusionRank.Params(vector_weight=0, keyword_weight=1, recency_weight=0))
    reply = MemoryNode(user_name="ann", content="Mostly pottery.", meta={"speaker": "Jon", "context": "Any new hobby?"})
    others = [node("Jon went to Paris"), node("user plays chess")]
    scores = ranker.score("What are Jon's hobbies?", [*others, reply])
    assert max(range(3), key=scores.__getitem__) == 2


def test_bm25_scores_are_the_textbook_formula() -> None:
    """Okapi BM25 (k1 1.2, b 0.75) with statistics over the documents given, words around
    counting `around_weight`: the same numbers as the formula written out term by term."""
    documents = [("guitar band guitar", ""), ("band", "guitar practice"), ("tea", ""), ("guitar", "band band")]
    counts = [
        {"guitar": 2.0, "band": 1.0},
        {"band": 1.0, "guitar": 0.5, "practic": 0.5},
        {"tea": 1.0},
        {"guitar": 1.0, "band": 1.0},
    ]
    lengths = [sum(count.values()) for count in counts]
    average = sum(lengths) / len(lengths)
    expected = []
    for count, length in zip(counts, lengths, strict=True):
        total = 0.0
        for term in ("guitar", "band"):
            held_by = sum(term in other for other in counts)
            idf = math.log(1.0 + (len(counts) - held_by + 0.5) / (held_by + 0.5))
            frequency = count.get(term, 0.0)
            total += idf * frequency * 2.2 / (frequency + 1.2 * (0.25 + 0.75 * length / average))
        expected.append(total)
    assert bm25_scores("guitar band", documents, around_weight=0.5) == pytest.approx(expected, rel=1e-12)
    assert bm25_scores("violin", documents) == [0.0, 0.0, 0.0, 0.0]


def test_fusion_recency_is_the_same_from_any_zone() -> None:
    """Ages are differences of instants: a query time in another zone changes no score."""
    ranker = FusionRank(FusionRank.Params(vector_weight=0, keyword_weight=0, recency_weight=1, recency_half_life_days=7))
    memories = [node("a", days_ago=30), node("b", days_ago=1), node("c", days_ago=-2), node("d", days_ago=7)]
    in_utc = ranker.score("anything", memories, query_time=NOW)
    elsewhere = ranker.score("anything", memories, query_time=NOW.astimezone(timezone(timedelta(hours=-7, minutes=-30))))
    assert elsewhere == in_utc
    assert in_utc[2] == 1.0 and in_utc[0] == 0.0  # the future counts as now; the oldest is the lowest
    oldest = 0.5 ** (30 / 7)
    assert in_utc[3] == pytest.approx((0.5 - oldest) / (1.0 - oldest))  # a week: half, then scaled
