"""retrieve_memory: scoped, per-kind searches over a real SQLite store, the query embedded once."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.context import MemoryContext, SearchFilter
from memoryscope.errors import ConfigError
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.stores.base import TimeRange
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.workers.retrieve_memory import _best_first, _score, _unique

Make = Callable[..., MemoryNode]
SHANGHAI = ZoneInfo("Asia/Shanghai")


def day(d: int, hour: int = 12) -> datetime:
    return datetime(2024, 10, d, hour, tzinfo=SHANGHAI)


@pytest.fixture
def seeded(store: Any, make_node: Make) -> Any:
    store.upsert(
        [
            make_node("user plays the guitar", created_at=day(20), event_time=day(19, 10)),
            make_node("user likes green tea", created_at=day(21)),
            make_node("user works as a nurse", created_at=day(22)),
            make_node("user wants to learn the drums", memory_type=MemoryType.OBS_CUSTOMIZED, created_at=day(23)),
            make_node("user is a musician", memory_type=MemoryType.INSIGHT, created_at=day(24)),
            make_node("I practise guitar every evening", memory_type=MemoryType.CONVERSATION, created_at=day(25)),
            make_node("user plays the violin", status=MemoryStatus.EXPIRED, created_at=day(18)),
            # the same user elsewhere, and other users: never seen from ann's default scope
            make_node("user plays the piano", workspace="other-assistant", created_at=day(26)),
            make_node("user plays the cello", target_name="ann's sister", created_at=day(26)),
            make_node("user plays the guitar", user_name="bob", created_at=day(26)),
            make_node("user plays the trumpet", user_name="bob", created_at=day(26)),
        ]
    )
    return store


def retrieve(store: Any, params: dict[str, Any], **context: Any) -> MemoryContext:
    worker = build_worker("retrieve_memory", params, make_env(store=store, timezone="Asia/Shanghai"))
    ctx = MemoryContext(user_name="ann", **context)
    worker.run(ctx)
    return ctx


def test_finds_the_users_guitar_first_and_never_another_scope(seeded: Any) -> None:
    ctx = retrieve(seeded, {"retrieve_ins_top_k": 0, "retrieve_conversation_top_k": 0}, query="what instrument do I play")
    assert ctx.retrieved[0].content == "user plays the guitar"
    assert {(m.user_name, m.target_name, m.workspace) for m in ctx.retrieved} == {("ann", "", "")}
    assert "user plays the piano" not in {m.content for m in ctx.retrieved}
    assert all(m.score is not None for m in ctx.retrieved)
    assert ctx.memories == ctx.retrieved


@pytest.mark.parametrize(
    ("widening", "scopes"),
    [
        ({"any_target": True}, {("", ""), ("ann's sister", "")}),
        ({"any_workspace": True}, {("", ""), ("", "other-assistant")}),
        ({"any_target": True, "any_workspace": True}, {("", ""), ("ann's sister", ""), ("", "other-assistant")}),
    ],
)
def test_a_search_filter_of_any_target_or_workspace_searches_them_all_never_another_user(
    seeded: Any, widening: dict[str, bool], scopes: set[tuple[str, str]]
) -> None:
    params = {"retrieve_ins_top_k": 0, "retrieve_conversation_top_k": 0}
    ctx = retrieve(seeded, params, query="what instrument do I play", search_filter=SearchFilter(**widening))
    assert {(m.target_name, m.workspace) for m in ctx.retrieved} == scopes
    assert {m.user_name for m in ctx.retrieved} == {"ann"}


def test_each_kind_is_cut_at_its_own_top_k_and_expired_only_when_asked(seeded: Any) -> None:
    params = {"retrieve_obs_top_k": 2, "retrieve_ins_top_k": 1, "retrieve_conversation_top_k": 1}
    ctx = retrieve(seeded, params, query="guitar")
    kinds = [m.memory_type for m in ctx.retrieved]
    assert kinds.count(MemoryType.INSIGHT) == 1 and kinds.count(MemoryType.CONVERSATION) == 1
    assert kinds.count(MemoryType.OBSERVATION) + kinds.count(MemoryType.OBS_CUSTOMIZED) == 2
    assert all(m.status is MemoryStatus.VALID for m in ctx.retrieved)

    with_expired = retrieve(seeded, {**params, "retrieve_expired_top_k": 5}, query="guitar")
    assert [m.content for m in with_expired.retrieved if m.status is MemoryStatus.EXPIRED] == ["user plays the violin"]


def test_empty_query_lists_the_newest_memories(seeded: Any) -> None:
    ctx = retrieve(seeded, {"retrieve_obs_top_k": 2, "retrieve_ins_top_k": 1, "retrieve_conversation_top_k": 1}, query="")
    assert [m.content for m in ctx.retrieved] == [
        "I practise guitar every evening",
        "user is a musician",
        "user wants to learn the drums",
        "user works as a nurse",
    ]
    assert all(m.score is None for m in ctx.retrieved)


def test_query_embedded_once_or_not_at_all_when_the_caller_has_a_vector(seeded: Any, embedding: Any) -> None:
    params = {"search_mode": "dense", "retrieve_expired_top_k": 3}  # four searches
    before = embedding.usage.snapshot()["calls"]
    retrieve(seeded, params, query="what instrument do I play")
    assert embedding.usage.snapshot()["calls"] - before == 1

    tea = embedding.embed_query("which drink do I like")
    before = embedding.usage.snapshot()["calls"]
    ctx = retrieve(seeded, {**params, "retrieve_ins_top_k": 0, "retrieve_conversation_top_k": 0}, query="x", query_vector=tea)
    assert embedding.usage.snapshot()["calls"] == before
    assert ctx.retrieved[0].content == "user likes green tea"


def test_keyword_mode_needs_no_embedding(seeded: Any, embedding: Any) -> None:
    before = embedding.usage.snapshot()["calls"]
    ctx = retrieve(seeded, {"search_mode": "keyword", "retrieve_ins_top_k": 0, "retrieve_conversation_top_k": 0}, query="nurse")
    assert embedding.usage.snapshot()["calls"] == before
    assert [m.content for m in ctx.retrieved] == ["user works as a nurse"]


def test_narrow_searches_the_time_range_and_widens_when_too_few(seeded: Any) -> None:
    saturday = TimeRange(start=day(19, 0), end=day(20, 0))
    params = {"time_filter": "narrow", "narrow_min_hits": 1, "retrieve_ins_top_k": 0, "retrieve_conversation_top_k": 0}
    ctx = retrieve(seeded, params, query="what did I do", time_range=saturday)
    assert [m.content for m in ctx.retrieved] == ["user plays the guitar"]

    wide = retrieve(seeded, {**params, "narrow_min_hits": 2}, query="what did I do", time_range=saturday)
    assert len(wide.retrieved) > 1 and "user plays the guitar" in {m.content for m in wide.retrieved}


def test_include_adds_the_memories_of_the_asked_time_to_the_best_of_all_times(seeded: Any) -> None:
    saturday = TimeRange(start=day(19, 0), end=day(20, 0))
    params = {"retrieve_obs_top_k": 1, "retrieve_ins_top_k": 0, "retrieve_conversation_top_k": 0}
    alone = retrieve(seeded, params, query="what is my job", time_range=saturday)
    assert [m.content for m in alone.retrieved] == ["user works as a nurse"]  # boost: the range is not searched

    both = retrieve(seeded, {**params, "time_filter": "include"}, query="what is my job", time_range=saturday)
    assert {m.content for m in both.retrieved} == {"user works as a nurse", "user plays the guitar"}
    assert len({m.memory_id for m in both.retrieved}) == len(both.retrieved)

    no_time = retrieve(seeded, {**params, "time_filter": "include"}, query="what is my job")
    assert [m.content for m in no_time.retrieved] == ["user works as a nurse"]


def test_boost_mode_ignores_the_time_range(seeded: Any) -> None:
    saturday = TimeRange(start=day(19, 0), end=day(20, 0))
    params = {"retrieve_ins_top_k": 0, "retrieve_conversation_top_k": 0}
    ctx = retrieve(seeded, params, query="what did I do", time_range=saturday)
    assert len(ctx.retrieved) == 4


def test_memoryscope_0_1_params_load_and_bad_ones_are_named(store: Any) -> None:
    env = make_env(store=store)
    build_worker("retrieve_memory", {"retrieve_obs_top_k": 1000, "retrieve_ins_top_k": 1000, "retrieve_expired_top_k": 1000}, env)
    with pytest.raises(ConfigError, match=r"worker\.retrieve_obs_ins\.retrieve_obs_topk"):
        build_worker("retrieve_memory", {"retrieve_obs_topk": 10}, env, name="retrieve_obs_ins")
    with pytest.raises(ConfigError, match="nothing would be retrieved"):
        build_worker(
            "retrieve_memory",
            {"retrieve_obs_top_k": 0, "retrieve_ins_top_k": 0, "retrieve_conversation_top_k": 0},
            env,
        )
    with pytest.raises(ConfigError, match=r"worker\.retrieve_memory\.search_mode"):
        build_worker("retrieve_memory", {"search_mode": "fuzzy"}, env)


@pytest.mark.parametrize(
    ("scores", "ids", "kept"),
    [
        ([0.9, 0.5, 0.5, 0.1], "abcd", True),  # ties keep their order, as a stable sort would
        ([0.9, 0.95, 0.1], "abc", False),  # a score rises
        ([0.9, 0.5], "aa", False),  # the same memory twice
        ([0.9, None], "ab", False),  # listed, not searched
        ([0.9, float("nan"), 0.1], "abc", False),
        ([], "", True),
    ],
)
def test_hits_already_distinct_and_best_first_are_not_sorted_again(scores: list[float | None], ids: str, kept: bool) -> None:
    """One search's hits come distinct and best first: the worker keeps them as they are, which is
    what sorting them would give; anything else is sorted (and made distinct) as before."""
    nodes = [MemoryNode("ann", f"memory {i}", memory_id=i, score=s) for i, s in zip(ids, scores, strict=True)]
    assert _best_first(nodes) is kept
    if kept:
        assert sorted(_unique(nodes), key=_score, reverse=True) == nodes


def test_two_searches_come_out_distinct_and_best_first(seeded: Any) -> None:
    """Valid and expired memories are two searches: their hits are merged, best first."""
    ctx = retrieve(seeded, {"retrieve_expired_top_k": 5}, query="what instrument do I play")
    scores = [m.score for m in ctx.retrieved]
    assert "user plays the violin" in {m.content for m in ctx.retrieved}  # the expired one
    assert scores == sorted(scores, reverse=True) and len({m.memory_id for m in ctx.retrieved}) == len(scores)
