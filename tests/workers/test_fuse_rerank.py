"""fuse_rerank: rank score × type ratio × time ratio, thresholded, cut, best first."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.context import CALLER_FIELDS, MemoryContext
from memoryscope.errors import ConfigError
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.stores.base import TimeRange
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.worker import WORKERS
from memoryscope.workers.fuse_rerank import named_speaker
from memoryscope.workflow import WorkflowRunner, check_plan, parse_workflow

SHANGHAI = ZoneInfo("Asia/Shanghai")
Make = Callable[..., MemoryNode]


def run(
    params: dict[str, object],
    ranked: tuple[MemoryNode, ...],
    time_range: TimeRange | None = None,
    query: str = "",
    **settings: object,
) -> MemoryContext:
    worker = build_worker("fuse_rerank", params, make_env(timezone="Asia/Shanghai", **settings))
    ctx = MemoryContext(user_name="ann", query=query, ranked=ranked, time_range=time_range)
    worker.run(ctx)
    return ctx


def test_insight_ranks_above_equally_scored_observation(make_node: Make) -> None:
    observation = make_node("user plays the guitar", score=0.8)
    insight = make_node("user is a musician", memory_type=MemoryType.INSIGHT, score=0.8)
    conversation = make_node("I play every evening", memory_type=MemoryType.CONVERSATION, score=0.8)
    ctx = run({}, (conversation, observation, insight))
    assert [m.content for m in ctx.memories] == ["user is a musician", "user plays the guitar", "I play every evening"]
    assert [m.score for m in ctx.memories] == pytest.approx([1.6, 0.8, 0.4])


def test_configured_ratios_override_only_the_types_given(make_node: Make) -> None:
    observation = make_node("user plays the guitar", score=0.5)
    insight = make_node("user is a musician", memory_type=MemoryType.INSIGHT, score=0.5)
    ctx = run({"fuse_ratio_dict": {"observation": 5}}, (insight, observation))
    assert [m.score for m in ctx.memories] == pytest.approx([2.5, 1.0])


def test_memory_in_query_time_range_is_boosted_by_event_or_message_time(make_node: Make) -> None:
    saturday = TimeRange(start=datetime(2024, 10, 19, tzinfo=SHANGHAI), end=datetime(2024, 10, 20, tzinfo=SHANGHAI))
    happened = make_node("user went hiking", score=0.4, event_time=datetime(2024, 10, 19, 10, tzinfo=SHANGHAI))
    said = make_node("user cooked noodles", score=0.3, message_time=datetime(2024, 10, 19, 20, tzinfo=SHANGHAI))
    other_day = make_node("user went swimming", score=0.5, event_time=datetime(2024, 10, 20, 0, tzinfo=SHANGHAI))
    ctx = run({"fuse_time_ratio": 2.0}, (other_day, happened, said), time_range=saturday)
    assert [m.content for m in ctx.memories] == ["user went hiking", "user cooked noodles", "user went swimming"]
    assert [m.score for m in ctx.memories] == pytest.approx([0.8, 0.6, 0.5])


def said_by(make_node: Make, speaker: str, content: str, score: float) -> MemoryNode:
    return make_node(content, memory_type=MemoryType.CONVERSATION, score=score, meta={"role": "user", "speaker": speaker})


def test_message_of_the_one_speaker_the_query_names_is_boosted(make_node: Make) -> None:
    gina = said_by(make_node, "Gina", "Jon opened his dance studio today!", 0.8)
    jon = said_by(make_node, "Jon", "I lost my job, so I'm starting my own business", 0.6)
    ctx = run({"fuse_speaker_ratio": 2.0}, (gina, jon), query="What did jon do after losing his job?")
    assert [m.content for m in ctx.memories] == [jon.content, gina.content]
    assert [m.score for m in ctx.memories] == pytest.approx([0.6, 0.4])


def test_no_speaker_boost_when_the_query_names_both_speakers_or_by_default(make_node: Make) -> None:
    gina = said_by(make_node, "Gina", "I love dancing", 0.8)
    jon = said_by(make_node, "Jon", "Dancing is my passion", 0.6)
    both = run({"fuse_speaker_ratio": 2.0}, (gina, jon), query="What do Jon and Gina both like?")
    assert [m.score for m in both.memories] == pytest.approx([0.4, 0.3])
    default = run({}, (gina, jon), query="What does Jon like?")
    assert [m.content for m in default.memories] == [gina.content, jon.content]


def test_a_speaker_is_named_only_as_a_whole_word_or_in_chinese_as_written(make_node: Make) -> None:
    tim = said_by(make_node, "Tim", "I read fantasy books", 0.5)
    assert named_speaker("What time is it?", [tim]) is None
    assert named_speaker("What does TIM read?", [tim]) == "Tim"
    wang = said_by(make_node, "小王", "我喜欢弹吉他", 0.5)
    assert named_speaker("小王喜欢什么乐器？", [wang, tim]) == "小王"
    assert named_speaker("What does Tim read?", [make_node("user reads books", score=0.5)]) is None


def test_no_time_range_means_no_boost(make_node: Make) -> None:
    happened = make_node("user went hiking", score=0.4, event_time=datetime(2024, 10, 19, 10, tzinfo=SHANGHAI))
    ctx = run({}, (happened,), time_range=None)
    assert ctx.memories[0].score == pytest.approx(0.4)


def test_threshold_drops_low_rank_scores_before_weighting(make_node: Make) -> None:
    weak_insight = make_node("user likes jazz", memory_type=MemoryType.INSIGHT, score=0.05)
    strong = make_node("user plays the guitar", score=0.6)
    ctx = run({"fuse_score_threshold": 0.1}, (weak_insight, strong))
    assert [m.content for m in ctx.memories] == ["user plays the guitar"]


def test_keeps_output_memory_max_count_unless_fuse_rerank_top_k(make_node: Make) -> None:
    ranked = tuple(make_node(f"fact {i}", score=1 - i / 10) for i in range(5))
    assert [m.content for m in run({}, ranked, output_memory_max_count=2).memories] == ["fact 0", "fact 1"]
    assert len(run({"fuse_rerank_top_k": 3}, ranked, output_memory_max_count=2).memories) == 3


def test_same_text_is_shown_once_with_its_best_score(make_node: Make) -> None:
    said = make_node("I play the guitar", memory_type=MemoryType.CONVERSATION, score=0.9)
    added = make_node("I play the guitar", memory_type=MemoryType.OBS_CUSTOMIZED, score=0.9)
    ctx = run({}, (said, added))
    assert [(m.memory_type, m.score) for m in ctx.memories] == [(MemoryType.OBS_CUSTOMIZED, pytest.approx(1.08))]


def test_memoryscope_0_1_params_load_and_unknown_type_is_rejected() -> None:
    legacy = {
        "fuse_score_threshold": 0.01,
        "fuse_ratio_dict": {"conversation": 0.5, "observation": 1, "obs_customized": 1.2, "insight": 2.0},
        "fuse_time_ratio": 2.0,
    }
    build_worker("fuse_rerank", legacy, make_env())
    with pytest.raises(ConfigError, match=r"worker\.fuse_rerank\.fuse_ratio_dict\.obsevation"):
        build_worker("fuse_rerank", {"fuse_ratio_dict": {"obsevation": 1.0}}, make_env())
    with pytest.raises(ConfigError, match=r"worker\.fuse_rerank\.fuse_top_k"):
        build_worker("fuse_rerank", {"fuse_top_k": 3}, make_env())


class _ExtractTimeSpec:
    """What the check needs of `extract_time` (another module): its declared fields."""

    reads = ("query", "query_time")
    writes = ("time_range",)


def test_retrieve_workflow_of_memoryscope_0_1_checks() -> None:
    """extract_time runs beside retrieval, so only fuse_rerank (after the merge) may use time_range."""
    workers: dict[str, Any] = {name: WORKERS.get(name) for name in ("set_query", "semantic_rank", "fuse_rerank")}
    workers["retrieve_obs_ins"] = WORKERS.get("retrieve_memory")
    workers["extract_time"] = _ExtractTimeSpec()
    workflow = "set_query,[extract_time|retrieve_obs_ins,semantic_rank],fuse_rerank"
    plan = parse_workflow(workflow, where="retrieve_memory")
    assert check_plan(plan, workers, given=CALLER_FIELDS, where="retrieve_memory") == []
    without_time = parse_workflow("set_query,retrieve_obs_ins,semantic_rank,fuse_rerank", where="retrieve_memory")
    assert check_plan(without_time, workers, given=CALLER_FIELDS, where="retrieve_memory") == []


def test_retrieve_workflow_runs_end_to_end_on_a_store(store: Any, make_node: Make) -> None:
    store.upsert(
        [
            make_node("user plays the guitar"),
            make_node("user likes green tea"),
            make_node("user is a musician", memory_type=MemoryType.INSIGHT),
            make_node("user plays the piano", user_name="bob"),
        ]
    )
    env = make_env(store=store, timezone="Asia/Shanghai", enable_ranker=False, output_memory_max_count=2)
    names = ("set_query", "retrieve_memory", "semantic_rank", "fuse_rerank")
    workers = {name: build_worker(name, {}, env) for name in names}
    runner = WorkflowRunner("retrieve_memory", parse_workflow(",".join(names), where="test"), workers)
    result = runner.run(MemoryContext(user_name="ann", query=" what instrument do I play? "))
    memories = result.context.memories
    assert [m.user_name for m in memories] == ["ann", "ann"]
    assert "user plays the guitar" in [m.content for m in memories]
    scores = [m.score for m in memories]
    assert None not in scores and scores == sorted(scores, key=float, reverse=True)


def run_for(user_name: str, params: dict[str, object], ranked: tuple[MemoryNode, ...], query: str) -> MemoryContext:
    worker = build_worker("fuse_rerank", params, make_env(timezone="Asia/Shanghai"))
    ctx = MemoryContext(user_name=user_name, query=query, ranked=ranked)
    worker.run(ctx)
    return ctx


def test_naming_the_user_does_not_lift_their_unrelated_messages_above_the_fact(make_node: Make) -> None:
    """ "What does Lin drink?" asked of Lin's own memories: every message of Lin's is Lin's, so the
    speaker boost would lift an unrelated one (its word "Lin" matched in the speaker) above the fact."""
    fact = make_node("lin drinks oolong tea every morning", score=0.5)
    chatter = said_by(make_node, "lin", "My laptop keeps crashing", 0.6)
    ctx = run_for("lin", {"fuse_speaker_ratio": 2.0}, (chatter, fact), query="What does Lin drink?")
    assert [m.content for m in ctx.memories] == [fact.content, chatter.content]
    assert [m.score for m in ctx.memories] == pytest.approx([0.5, 0.3])


def test_another_speaker_of_the_users_conversations_is_still_boosted(make_node: Make) -> None:
    lin = said_by(make_node, "Lin", "Mei opened her tea shop today!", 0.8)
    mei = said_by(make_node, "Mei", "I quit my job to open a tea shop", 0.6)
    ctx = run_for("lin", {"fuse_speaker_ratio": 2.0}, (lin, mei), query="What did Mei do after quitting?")
    assert [m.content for m in ctx.memories] == [mei.content, lin.content]
    assert [m.score for m in ctx.memories] == pytest.approx([0.6, 0.4])
