"""update_insight: relevant observations per subject, values from one batched LLM call, insight nodes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.models.rank.fusion_rank import FusionRank
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.workers._insight import insight_id
from memoryscope.workers.update_insight import parse_values

pytestmark = pytest.mark.slow  # reflection runs through the fake model; `-m "not slow"` leaves it out

SHANGHAI = ZoneInfo("Asia/Shanghai")
Make = Callable[..., MemoryNode]

OBSERVATIONS_EN = (
    "user lives in Beijing near the Summer Palace",
    "user plays the guitar every evening",
    "user works as a nurse at Ruijin Hospital",
    "user has a cat named Mimi",
    "user is vegetarian and cooks tofu a lot",
    "user moved to Hangzhou last month",
)
OBSERVATIONS_ZH = (
    "用户住在北京颐和园附近",
    "用户每天晚上弹吉他",
    "用户在瑞金医院当护士",
    "用户养了一只叫咪咪的猫",
    "用户吃素，经常做豆腐",
    "用户上个月搬到了杭州",
)
# What a model reads from facts like these: per attribute, (word in an observation, value).
VALUES_EN = {
    "hobby": [("guitar", "playing the guitar")],
    "job": [("nurse", "nurse at Ruijin Hospital")],
    "pet": [("cat", "a cat named Mimi")],
    "diet": [("vegetarian", "vegetarian")],
    "home city": [("Beijing", "Beijing"), ("Hangzhou", "Hangzhou")],
}
VALUES_ZH = {
    "爱好": [("吉他", "弹吉他")],
    "职业": [("护士", "瑞金医院护士")],
    "宠物": [("猫", "一只叫咪咪的猫")],
    "饮食偏好": [("吃素", "素食")],
    "居住城市": [("北京", "北京"), ("杭州", "杭州")],
}
SUBJECT_LINE = re.compile(r"^(\d+)\. (.+?) ?[(（](?:current value|当前值)[:：] ?(.*?)[;；] ?(?:see|参见) (.*?)[)）]$")
OBSERVATION_LINE = re.compile(r"^(O\d+)\. (.*)$")


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default_reply="Sorry, I cannot help with that request.") as fake:
        yield fake


@pytest.fixture
def llm(server: FakeOpenAIServer) -> OpenAILikeGeneration:
    return OpenAILikeGeneration(
        OpenAILikeGeneration.Params(model_name="Qwen/Qwen2.5-7B-Instruct", api_base=server.base_url, max_retries=0, timeout=5)
    )


def user_prompt(body: dict[str, Any]) -> str:
    return str(body["messages"][1]["content"])  # the prompt, also when the last message is a repair request


def attributes(body: dict[str, Any]) -> dict[int, tuple[str, list[str]]]:
    """The prompt's attributes: number → (key, labels of the observations named for it, best first)."""
    found = {}
    for line in user_prompt(body).splitlines():
        match = SUBJECT_LINE.match(line.strip())
        if match:
            found[int(match.group(1))] = (match.group(2), match.group(4).split(", "))
    return found


def observation_texts(body: dict[str, Any]) -> dict[str, str]:
    return {match.group(1): match.group(2) for line in user_prompt(body).splitlines() if (match := OBSERVATION_LINE.match(line))}


def valuer(table: dict[str, list[tuple[str, str]]], chatter: str = "") -> Callable[[dict[str, Any]], str]:
    """A model that reads every observation and gives each attribute the value the newest
    matching one tells (observations are listed oldest first), else unknown."""

    def reply(body: dict[str, Any]) -> str:
        texts = list(observation_texts(body).values())
        answer = {}
        for number, (key, _) in attributes(body).items():
            value = "unknown"
            for text in texts:
                for word, told in table.get(key, []):
                    if word in text:
                        value = told
            answer[str(number)] = value
        return f"{chatter}```json\n{json.dumps(answer, ensure_ascii=False)}\n```"

    return reply


def observations(make_node: Make, texts: tuple[str, ...], start_day: int = 1) -> tuple[MemoryNode, ...]:
    start = datetime(2024, 10, start_day, 20, 0, tzinfo=SHANGHAI)
    return tuple(
        make_node(text, message_time=start + timedelta(days=index), source_message_ids=(f"m{start_day}-{index}",))
        for index, text in enumerate(texts)
    )


def environment(llm: OpenAILikeGeneration, store: Any, **settings: Any) -> Env:
    settings.setdefault("timezone", "Asia/Shanghai")
    return make_env(store=store, models={"generation_model": llm, "rank_model": FusionRank()}, **settings)


def chats(server: FakeOpenAIServer) -> list[Any]:
    return [record for record in server.requests if record.path == "/v1/chat/completions"]


def by_key(nodes: tuple[MemoryNode, ...]) -> dict[str, MemoryNode]:
    return {node.key: node for node in nodes}


def test_new_and_changed_insights_from_one_call(
    make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Attributes of user", valuer(VALUES_EN, "Here are the values.\n"))
    worker = build_worker("update_insight", {}, environment(llm, store))
    home = make_node(
        "user's home city: Beijing",
        memory_type="insight",
        key="home city",
        value="Beijing",
        source_message_ids=("m0",),
        meta={"observation_ids": ["old-observation"]},
    )
    ctx = MemoryContext(
        user_name="user",
        unreflected_observations=observations(make_node, OBSERVATIONS_EN),
        insights=(home,),
        insight_subjects=("hobby", "job", "pet"),
    )
    worker.run(ctx)
    assert len(chats(server)) == 1
    found = by_key(ctx.updated_insights)
    assert sorted(found) == ["hobby", "home city", "job", "pet"]
    hobby = found["hobby"]
    assert (hobby.memory_type, hobby.value, hobby.content) == (
        MemoryType.INSIGHT,
        "playing the guitar",
        "user's hobby: playing the guitar",
    )
    assert hobby.memory_id == insight_id("user", "", "", "hobby") and not hobby.updated
    assert "m1-1" in hobby.source_message_ids
    assert found["job"].content == "user's job: nurse at Ruijin Hospital"
    assert found["pet"].value == "a cat named Mimi"
    moved = found["home city"]
    assert (moved.memory_id, moved.value, moved.updated) == (home.memory_id, "Hangzhou", True)
    assert moved.content == "user's home city: Hangzhou"
    assert moved.source_message_ids[0] == "m0" and "m1-5" in moved.source_message_ids
    assert moved.meta["observation_ids"][0] == "old-observation" and len(moved.meta["observation_ids"]) > 1
    assert sorted(ctx.details["update_insight"]["created"]) == ["hobby", "job", "pet"]
    assert ctx.details["update_insight"]["updated"] == ["home city"]


def test_chinese_prompt_and_insights(make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.add_rule("用户的属性", valuer(VALUES_ZH, "好的，结果如下：\n"))
    worker = build_worker("update_insight", {}, environment(llm, store, language="zh"))
    home = make_node("用户的居住城市：北京", memory_type="insight", key="居住城市", value="北京")
    ctx = MemoryContext(
        user_name="用户",
        unreflected_observations=observations(make_node, OBSERVATIONS_ZH),
        insights=(home,),
        insight_subjects=("爱好", "宠物"),
    )
    worker.run(ctx)
    found = by_key(ctx.updated_insights)
    assert found["爱好"].content == "用户的爱好：弹吉他"
    assert found["宠物"].content == "用户的宠物：一只叫咪咪的猫"
    assert (found["居住城市"].memory_id, found["居住城市"].content) == (home.memory_id, "用户的居住城市：杭州")
    sent = str(chats(server)[0].body["messages"][-1]["content"])
    assert "（当前值：北京；参见 O" in sent and "（当前值：暂无；参见 O" in sent and "周" in sent


def test_unknown_and_unchanged_values_make_no_insight(
    make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Attributes of user", valuer(VALUES_EN))
    worker = build_worker("update_insight", {}, environment(llm, store))
    diet = make_node("user's diet: Vegetarian", memory_type="insight", key="diet", value="Vegetarian")
    ctx = MemoryContext(
        user_name="user",
        unreflected_observations=observations(make_node, OBSERVATIONS_EN[1:5]),
        insights=(diet,),
        insight_subjects=("favorite sport",),
    )
    worker.run(ctx)
    assert ctx.updated_insights == ()
    details = ctx.details["update_insight"]
    assert (details["unknown"], details["unchanged"]) == (["favorite sport"], ["diet"])


def test_each_attribute_names_its_most_relevant_observations_first(
    make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Attributes of user", valuer(VALUES_EN))
    for enable_ranker in (True, False):
        server.clear_requests()
        worker = build_worker("update_insight", {}, environment(llm, store, enable_ranker=enable_ranker))
        home = make_node("user's home city: Beijing", memory_type="insight", key="home city", value="Beijing")
        ctx = MemoryContext(
            user_name="user",
            unreflected_observations=observations(make_node, OBSERVATIONS_EN),
            insights=(home,),
            insight_subjects=("hobby", "job", "pet", "diet"),
        )
        worker.run(ctx)
        body = chats(server)[0].body
        texts = observation_texts(body)
        best = {key: texts[labels[0]] for key, labels in attributes(body).values()}
        assert best == {
            "hobby": "[2024-10-02 20:00:00 Wed] user plays the guitar every evening",
            "job": "[2024-10-03 20:00:00 Thu] user works as a nurse at Ruijin Hospital",
            "pet": "[2024-10-04 20:00:00 Fri] user has a cat named Mimi",
            "diet": "[2024-10-05 20:00:00 Sat] user is vegetarian and cooks tofu a lot",
            "home city": "[2024-10-01 20:00:00 Tue] user lives in Beijing near the Summer Palace",
        }, f"enable_ranker={enable_ranker}"
        home_labels = next(labels for key, labels in attributes(body).values() if key == "home city")
        assert "moved to Hangzhou" in " ".join(texts[label] for label in home_labels)


@pytest.mark.parametrize("count", [6, 30])
def test_one_call_however_many_observations(
    count: int, make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Attributes of user", valuer(VALUES_EN))
    worker = build_worker("update_insight", {}, environment(llm, store))
    texts = tuple(OBSERVATIONS_EN[index % len(OBSERVATIONS_EN)] + f" (note {index})" for index in range(count))
    ctx = MemoryContext(
        user_name="user",
        unreflected_observations=observations(make_node, texts),
        insight_subjects=("hobby", "job", "pet", "diet", "home city"),
    )
    worker.run(ctx)
    assert len(chats(server)) == 1
    assert by_key(ctx.updated_insights)["job"].value == "nurse at Ruijin Hospital"


def test_subjects_beyond_the_budget_go_to_another_call(
    make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Attributes of user", valuer(VALUES_EN))
    worker = build_worker("update_insight", {"max_prompt_tokens": 450}, environment(llm, store))
    ctx = MemoryContext(
        user_name="user",
        unreflected_observations=observations(make_node, OBSERVATIONS_EN),
        insight_subjects=("hobby", "job", "pet", "diet", "home city"),
    )
    worker.run(ctx)
    calls = len(chats(server))
    assert calls in range(2, 5)
    assert ctx.details["update_insight"]["calls"] == calls
    assert sorted(by_key(ctx.updated_insights)) == ["diet", "hobby", "home city", "job", "pet"]


def test_garbage_is_repaired_once(make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.add_rule("could not be read", valuer(VALUES_EN))  # the repair request; the first answer is garbage
    worker = build_worker("update_insight", {}, environment(llm, store))
    ctx = MemoryContext(
        user_name="user",
        unreflected_observations=observations(make_node, OBSERVATIONS_EN),
        insight_subjects=("hobby", "favorite sport"),
    )
    worker.run(ctx)
    assert len(chats(server)) == 2
    assert [(node.key, node.value) for node in ctx.updated_insights] == [("hobby", "playing the guitar")]


def test_garbage_twice_skips_the_subjects_and_reports_them(
    make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    worker = build_worker("update_insight", {}, environment(llm, store))
    ctx = MemoryContext(
        user_name="user",
        unreflected_observations=observations(make_node, OBSERVATIONS_EN),
        insight_subjects=("hobby", "job"),
    )
    worker.run(ctx)
    assert len(chats(server)) == 2
    assert ctx.updated_insights == ()
    assert sorted(ctx.details["update_insight"]["skipped"]) == ["hobby", "job"]


def test_a_subject_left_out_of_the_answer_is_skipped(
    make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Attributes of user", 'Values: {"hobby": "playing the guitar"}')
    worker = build_worker("update_insight", {}, environment(llm, store))
    ctx = MemoryContext(
        user_name="user", unreflected_observations=observations(make_node, OBSERVATIONS_EN), insight_subjects=("hobby", "job")
    )
    worker.run(ctx)
    assert [node.key for node in ctx.updated_insights] == ["hobby"]
    assert ctx.details["update_insight"]["skipped"] == ["job"]
    assert len(chats(server)) == 1


def test_without_the_ranker_embedding_and_keywords_pick_the_evidence(
    make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Attributes of user", valuer(VALUES_EN))
    worker = build_worker("update_insight", {"update_insight_obs_top_k": 2}, environment(llm, store, enable_ranker=False))
    ctx = MemoryContext(
        user_name="user",
        unreflected_observations=observations(make_node, OBSERVATIONS_EN),
        insight_subjects=("hobby", "pet"),
    )
    worker.run(ctx)
    assert {node.key: node.value for node in ctx.updated_insights} == {"hobby": "playing the guitar", "pet": "a cat named Mimi"}
    shown = attributes(chats(server)[0].body)
    assert all(len(labels) <= 2 for _, labels in shown.values())


def test_new_insight_id_is_stable_across_key_spellings_and_scoped() -> None:
    assert insight_id("ann", "", "", "Home City ") == insight_id("ann", "", "", "home city")
    assert insight_id("ann", "", "", "hobby") != insight_id("bob", "", "", "hobby")
    assert insight_id("ann", "", "w1", "hobby") != insight_id("ann", "", "w2", "hobby")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"1": "guitar", "2": "unknown"}', {1: "guitar", 2: "unknown"}),
        ('```json\n{"hobby": {"value": "guitar"}, "job": null}\n```', {1: "guitar", 2: ""}),
        ('[{"key": "job", "value": "nurse"}, {"number": 1, "value": "guitar"}]', {1: "guitar", 2: "nurse"}),
        ('["guitar", "nurse"]', {1: "guitar", 2: "nurse"}),
        ("1. guitar\n2. nurse\n7. out of range", {1: "guitar", 2: "nurse"}),
        ('{"values": {"2": "nurse"}}', {2: "nurse"}),
        ("I am not able to tell.", None),
    ],
)
def test_parse_values(reply: str, expected: dict[int, str] | None) -> None:
    assert parse_values(reply, ["hobby", "job"]) == expected


def test_with_neither_embedding_nor_ranker_keywords_decide_and_the_rest_is_shared(
    make_node: Make, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Attributes of user", valuer(VALUES_EN))
    env = make_env(models={"generation_model": llm}, enable_ranker=False, timezone="Asia/Shanghai")  # no store, no embedding
    worker = build_worker("update_insight", {"rank_model": None}, env)
    home = make_node("user's home city: Beijing", memory_type="insight", key="home city", value="Beijing")
    ctx = MemoryContext(
        user_name="user",
        unreflected_observations=observations(make_node, OBSERVATIONS_EN),
        insights=(home,),
        insight_subjects=("hobby",),
    )
    worker.run(ctx)
    body = chats(server)[0].body
    texts = observation_texts(body)
    shown = {key: [texts[label] for label in labels] for key, labels in attributes(body).values()}
    assert "Beijing" in shown["home city"][0]
    assert len(shown["hobby"]) == len(OBSERVATIONS_EN) - 1  # all but the one that is about the home city
    assert {node.key: node.value for node in ctx.updated_insights} == {"hobby": "playing the guitar", "home city": "Hangzhou"}
