"""get_reflection_subject: one LLM call names new profile attributes; the threshold stops the run."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.context import MemoryContext
from memoryscope.errors import ConfigError
from memoryscope.memory import MemoryNode
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.workers.get_reflection_subject import parse_subjects

SHANGHAI = ZoneInfo("Asia/Shanghai")
Make = Callable[..., MemoryNode]

OBSERVATIONS_EN = (
    "user plays the guitar every evening",
    "user works as a nurse at Ruijin Hospital",
    "user has a cat named Mimi",
    "user is vegetarian",
    "user moved to Hangzhou last month",
    "user practises guitar solos on weekends",
)
OBSERVATIONS_ZH = (
    "用户每天晚上弹吉他",
    "用户在瑞金医院当护士",
    "用户养了一只叫咪咪的猫",
    "用户吃素",
    "用户上个月搬到了杭州",
    "用户周末练吉他独奏",
)
# What a model would name for facts like these, by the words it sees.
SUBJECTS_EN = {"guitar": "Hobby", "nurse": "job", "cat": "pet", "vegetarian": "diet", "Hangzhou": "home city"}
SUBJECTS_ZH = {"吉他": "爱好", "护士": "职业", "猫": "宠物", "吃素": "饮食偏好", "杭州": "居住城市"}


@pytest.fixture
def server(fake_openai: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    fake = fake_openai
    fake.default_reply = "I am not sure what you would like me to do."
    yield fake


@pytest.fixture
def llm(server: FakeOpenAIServer) -> OpenAILikeGeneration:
    return OpenAILikeGeneration(
        OpenAILikeGeneration.Params(model_name="Qwen/Qwen2.5-7B-Instruct", api_base=server.base_url, max_retries=0, timeout=5)
    )


def prompt(body: dict[str, Any]) -> str:
    return "\n".join(str(message["content"]) for message in body["messages"])


def proposer(subjects: dict[str, str], chatter: str) -> Callable[[dict[str, Any]], str]:
    """A model that names an attribute for each kind of fact it reads, in a fenced JSON array."""

    def reply(body: dict[str, Any]) -> str:
        text = prompt(body).split("\n", 1)[1]  # the observations, not the system prompt's examples
        named = [subject for word, subject in subjects.items() if word in text]
        return f"{chatter}\n```json\n{json.dumps(named, ensure_ascii=False)}\n```"

    return reply


def observations(make_node: Make, texts: tuple[str, ...]) -> tuple[MemoryNode, ...]:
    start = datetime(2024, 10, 20, 9, 0, tzinfo=SHANGHAI)
    return tuple(make_node(text, message_time=start + timedelta(hours=index)) for index, text in enumerate(texts))


def chats(server: FakeOpenAIServer) -> list[Any]:
    return [record for record in server.requests if record.path == "/v1/chat/completions"]


def test_too_few_observations_stop_the_workflow_without_a_call(
    make_node: Make, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    worker = build_worker("get_reflection_subject", {"reflect_obs_cnt_threshold": 6}, make_env(models={"generation_model": llm}))
    ctx = MemoryContext(user_name="user", unreflected_observations=observations(make_node, OBSERVATIONS_EN[:4]))
    worker.run(ctx)
    assert ctx.stop_reason == "only 4 new observations; reflecting at 6"
    assert ctx.insight_subjects == ()
    assert chats(server) == []


def test_a_run_asked_for_now_reflects_below_the_threshold(
    make_node: Make, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    """The threshold gates automatic runs only: `/reflect_and_reconsolidate` on demand always runs."""
    server.add_rule("New observations", proposer(SUBJECTS_EN, "Here:"))
    worker = build_worker("get_reflection_subject", {"reflect_obs_cnt_threshold": 6}, make_env(models={"generation_model": llm}))
    ctx = MemoryContext(user_name="user", unreflected_observations=observations(make_node, OBSERVATIONS_EN[:2]), on_demand=True)
    worker.run(ctx)
    assert ctx.stop_reason == "" and ctx.insight_subjects and len(chats(server)) == 1
    empty = MemoryContext(user_name="user", on_demand=True)
    worker.run(empty)
    assert empty.stop_reason == "only 0 new observations; reflecting at 1"  # nothing to reflect on, still no call


def test_names_new_subjects_once_each_and_drops_known_ones(
    make_node: Make, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("New observations", proposer(SUBJECTS_EN, "Sure! Based on the observations:"))
    env = make_env(models={"generation_model": llm}, timezone="Asia/Shanghai")
    worker = build_worker("get_reflection_subject", {"reflect_obs_cnt_threshold": 6, "max_subjects": 3}, env)
    known = (make_node("user's hobby: guitar", memory_type="insight", key="hobby ", value="guitar"),)
    ctx = MemoryContext(user_name="user", unreflected_observations=observations(make_node, OBSERVATIONS_EN), insights=known)
    worker.run(ctx)
    # "Hobby" is known as "hobby " (case and spaces do not matter); the cut is at max_subjects.
    assert ctx.insight_subjects == ("job", "pet", "diet")
    assert ctx.stop_reason == ""
    (request,) = chats(server)
    sent = prompt(request.body)
    assert "Existing attributes of user: hobby" in sent
    assert "1. [2024-10-20 09:00:00 Sun] user plays the guitar every evening" in sent
    assert "At most 3 attributes" in sent
    assert ctx.details["get_reflection_subject"]["observations"] == 6


def test_chinese_prompt_and_subjects(make_node: Make, llm: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.add_rule("新观察", proposer(SUBJECTS_ZH, "根据这些观察，新属性如下："))
    env = make_env(models={"generation_model": llm}, language="zh", timezone="Asia/Shanghai")
    worker = build_worker("get_reflection_subject", {"reflect_obs_cnt_threshold": 6}, env)
    known = (make_node("用户的职业：护士", memory_type="insight", key="职业", value="护士"),)
    ctx = MemoryContext(user_name="用户", unreflected_observations=observations(make_node, OBSERVATIONS_ZH), insights=known)
    worker.run(ctx)
    assert ctx.insight_subjects == ("爱好", "宠物", "饮食偏好", "居住城市")
    sent = prompt(chats(server)[0].body)
    assert "用户已有的属性：职业" in sent and "[2024-10-20 09:00:00 周日] 用户每天晚上弹吉他" in sent


def test_unreadable_answer_is_repaired_once(make_node: Make, llm: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.add_rule("could not be read", '["pet", "diet"]')  # the repair request
    env = make_env(models={"generation_model": llm})
    worker = build_worker("get_reflection_subject", {"reflect_obs_cnt_threshold": 2}, env)
    ctx = MemoryContext(user_name="user", unreflected_observations=observations(make_node, OBSERVATIONS_EN))
    worker.run(ctx)
    assert ctx.insight_subjects == ("pet", "diet")
    assert len(chats(server)) == 2


def test_unreadable_twice_gives_no_subjects_and_says_so(
    make_node: Make, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    worker = build_worker("get_reflection_subject", {"reflect_obs_cnt_threshold": 2}, make_env(models={"generation_model": llm}))
    ctx = MemoryContext(user_name="user", unreflected_observations=observations(make_node, OBSERVATIONS_EN))
    worker.run(ctx)
    assert ctx.insight_subjects == () and ctx.stop_reason == ""
    assert ctx.details["get_reflection_subject"]["unreadable"] is True
    assert len(chats(server)) == 2


def test_only_the_newest_observations_that_fit_the_budget_are_sent(
    make_node: Make, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("New observations", "[]")
    texts = tuple(f"user visited museum number {index} and wrote a long review about its paintings" for index in range(60))
    worker = build_worker(
        "get_reflection_subject",
        {"reflect_obs_cnt_threshold": 2, "max_prompt_tokens": 200},
        make_env(models={"generation_model": llm}),
    )
    ctx = MemoryContext(user_name="user", unreflected_observations=observations(make_node, texts))
    worker.run(ctx)
    sent = prompt(chats(server)[0].body)
    assert "museum number 59 " in sent and "museum number 0 " not in sent
    assert 0 < ctx.details["get_reflection_subject"]["shown"] < 60
    assert ctx.insight_subjects == ()


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('["hobby", "pet"]', ["hobby", "pet"]),
        ('Here you go:\n```json\n{"subjects": ["job", "home city"]}\n```', ["job", "home city"]),
        ('[{"subject": "diet"}, "  <pet>  ", ""]', ["diet", "pet"]),
        ("[]", []),
        ("None", []),
        ("无", []),
        ("I could not find anything useful, sorry", None),
    ],
)
def test_parse_subjects(reply: str, expected: list[str] | None) -> None:
    assert parse_subjects(reply) == expected


def test_params_keep_the_01_names_and_reject_unknown_keys() -> None:
    env = make_env()
    params = {"generation_model": "generation_model", "reflect_obs_cnt_threshold": 10}
    worker = build_worker("get_reflection_subject", params, env)
    assert worker.params.reflect_obs_cnt_threshold == 10  # type: ignore[attr-defined]  # the worker's own Params
    with pytest.raises(ConfigError, match=r"worker\.get_reflection_subject\.reflect_threshold"):
        build_worker("get_reflection_subject", {"reflect_threshold": 3}, env)
