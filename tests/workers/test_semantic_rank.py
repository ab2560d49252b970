"""semantic_rank: the rank model re-scores `retrieved`; without it retrieval scores pass through."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

import pytest

from memoryscope.context import MemoryContext
from memoryscope.errors import ConfigError
from memoryscope.memory import MemoryNode
from memoryscope.models.base import RankModel
from memoryscope.testing.builders import build_worker, make_env

Make = Callable[..., MemoryNode]


class OverlapRank(RankModel):
    """Share of query words found in the memory; records its calls (a stand-in, not under test)."""

    backend = "overlap"

    def __init__(self) -> None:
        super().__init__("overlap")
        self.calls: list[str] = []

    def score(self, query: str, memories: Sequence[MemoryNode], query_time: datetime | None = None) -> list[float]:
        self.calls.append(query)
        words = set(query.lower().split())
        return [len(words & set(m.content.lower().split())) / len(words) for m in memories]


def candidates(make_node: Make) -> tuple[MemoryNode, ...]:
    # Retrieval liked tea best; the words of the query are about the guitar.
    return (
        make_node("user likes green tea", score=0.030),
        make_node("user plays the guitar", score=0.015),
        make_node("user went hiking", score=0.010),
    )


def test_rank_model_reorders_retrieved(make_node: Make) -> None:
    ranker = OverlapRank()
    worker = build_worker("semantic_rank", {}, make_env(models={"rank_model": ranker}))
    ctx = MemoryContext(user_name="ann", query="plays the guitar", retrieved=candidates(make_node))
    worker.run(ctx)
    assert [m.content for m in ctx.ranked] == ["user plays the guitar", "user likes green tea", "user went hiking"]
    assert [m.score for m in ctx.ranked] == pytest.approx([1.0, 0.0, 0.0])
    assert ranker.calls == ["plays the guitar"]


def test_without_ranker_retrieval_scores_are_scaled_best_first_and_cut(make_node: Make) -> None:
    worker = build_worker("semantic_rank", {"top_k": 2}, make_env(enable_ranker=False))
    ctx = MemoryContext(user_name="ann", query="plays the guitar", retrieved=candidates(make_node))
    worker.run(ctx)
    assert [m.content for m in ctx.ranked] == ["user likes green tea", "user plays the guitar"]
    assert [m.score for m in ctx.ranked] == pytest.approx([1.0, 0.5])


def test_empty_query_skips_the_model_and_unscored_memories_count_as_one(make_node: Make) -> None:
    ranker = OverlapRank()
    worker = build_worker("semantic_rank", {"rank_model": "ranker"}, make_env(models={"ranker": ranker}))
    listed = (make_node("user plays the guitar"), make_node("user likes green tea"))
    ctx = MemoryContext(user_name="ann", query="", retrieved=listed)
    worker.run(ctx)
    assert ranker.calls == []
    assert [(m.content, m.score) for m in ctx.ranked] == [("user plays the guitar", 1.0), ("user likes green tea", 1.0)]


def test_missing_rank_model_is_a_config_error_with_its_path() -> None:
    with pytest.raises(ConfigError, match=r"worker\.rank\.rank_model: .*'rank_modle'"):
        build_worker("semantic_rank", {"rank_model": "rank_modle"}, make_env(models={"rank_model": OverlapRank()}), name="rank")
    build_worker("semantic_rank", {"rank_model": "rank_modle"}, make_env(enable_ranker=False))  # not needed: fine


def test_unknown_param_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"worker\.semantic_rank\.topk"):
        build_worker("semantic_rank", {"topk": 3}, make_env(enable_ranker=False))


def test_fusion_rank_puts_the_guitar_first_among_retrieved(store: Any, make_node: Make) -> None:
    from memoryscope.models.rank.fusion_rank import FusionRank

    store.upsert(
        [
            make_node("user likes green tea"),
            make_node("user plays the guitar"),
            make_node("user works as a nurse"),
            make_node("user went hiking last weekend"),
        ]
    )
    env = make_env(store=store, models={"rank_model": FusionRank()})
    ctx = MemoryContext(user_name="ann", query="what instrument do I play", query_time=datetime.now(timezone.utc))
    build_worker("retrieve_memory", {}, env).run(ctx)
    build_worker("semantic_rank", {"top_k": 3}, env).run(ctx)
    assert ctx.ranked[0].content == "user plays the guitar"
    assert len(ctx.ranked) == 3
    assert all(0.0 <= (m.score or 0.0) <= 1.0 for m in ctx.ranked)
