"""get_observation / get_observation_with_time: one batched call each, facts as observation nodes.

Messages with a time expression (or a vague time word) go to get_observation_with_time, whose
facts get an event time from the rule parser (the LLM's date only as a fallback); the others go
to get_observation. The model is the real `openai_like` backend on the fake server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.context import MemoryContext
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.worker import Worker
from memoryscope.workers.get_observation_with_time import parse_llm_date

SHANGHAI = ZoneInfo("Asia/Shanghai")
SAID = datetime(2024, 10, 26, 21, 26, 20, tzinfo=SHANGHAI)  # a Saturday


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=SHANGHAI)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def script(server: FakeOpenAIServer) -> ConsolidationScript:
    script = ConsolidationScript(user="ann")
    script.say("I play the guitar every evening", 3, [("ann plays the guitar every evening", "guitar, music")])
    script.say("My sister Lily is a nurse and I'm vegetarian", 3, [("ann's sister Lily is a nurse", "sister, Lily, nurse"),
                                                                   ("ann is vegetarian", "vegetarian, diet")])  # fmt: skip
    script.say("I went hiking last Saturday", 3, [("ann went hiking", "hiking", "2024-10-20")])  # the model is a day off
    script.install(server)
    return script


def worker(server: FakeOpenAIServer, name: str, language: str = "en", **params: Any) -> Worker:
    model = OpenAILikeGeneration(
        OpenAILikeGeneration.Params(model_name="qwen", api_base=server.base_url, max_retries=0, timeout=5.0)
    )
    env = make_env(models={"generation_model": model}, timezone="Asia/Shanghai", language=language)
    return build_worker(name, params, env)


def message(text: str, said: datetime = SAID, user: str = "ann") -> MemoryNode:
    return MemoryNode(
        user_name=user, content=text, memory_type=MemoryType.CONVERSATION, message_time=said,
        memory_id=f"msg-{abs(hash(text)) % 10**8}", meta={"role": "user"},
    )  # fmt: skip


def run(worker: Worker, *messages: MemoryNode, user: str = "ann") -> MemoryContext:
    ctx = MemoryContext(user_name=user, informative_messages=messages)
    worker.run(ctx)
    return ctx


def chats(server: FakeOpenAIServer) -> list[Any]:
    return [request for request in server.requests if request.path.endswith("/chat/completions")]


MESSAGES = (
    message("I play the guitar every evening"),
    message("I went hiking last Saturday"),
    message("My sister Lily is a nurse and I'm vegetarian"),
)


def test_messages_without_time_become_observations_in_one_call(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    ctx = run(worker(server, "get_observation"), *MESSAGES)
    assert [(node.content, node.value) for node in ctx.observations] == [
        ("ann plays the guitar every evening", "guitar, music"),
        ("ann's sister Lily is a nurse", "sister, Lily, nurse"),
        ("ann is vegetarian", "vegetarian, diet"),
    ]
    (request,) = chats(server)
    assert request.body["messages"][-1]["content"] == (
        "Messages:\n1 ann: I play the guitar every evening\n2 ann: My sister Lily is a nurse and I'm vegetarian\nAnswer:\n"
    )
    guitar, lily, _ = ctx.observations
    assert guitar.memory_type is MemoryType.OBSERVATION and guitar.user_name == "ann"
    assert guitar.message_time == SAID and guitar.event_time is None and not guitar.reflected
    assert guitar.source_message_ids == (MESSAGES[0].memory_id,) and lily.source_message_ids == (MESSAGES[2].memory_id,)
    assert ctx.timed_observations == ()


def test_memory_ids_are_the_same_on_a_redo(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    first = run(worker(server, "get_observation"), *MESSAGES).observations
    again = run(worker(server, "get_observation"), *MESSAGES).observations
    assert [node.memory_id for node in first] == [node.memory_id for node in again]
    assert len({node.memory_id for node in first}) == 3
    other_user = run(worker(server, "get_observation"), *(node.replace(user_name="bob") for node in MESSAGES), user="bob")
    assert not {node.memory_id for node in other_user.observations} & {node.memory_id for node in first}


def test_messages_with_time_get_the_rule_parsers_event_time(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    ctx = run(worker(server, "get_observation_with_time"), *MESSAGES)
    (hiking,) = ctx.timed_observations
    assert hiking.content == "ann went hiking"
    assert hiking.event_time == day("2024-10-19")  # the rules win over the model's 2024-10-20
    assert hiking.meta["time_source"] == "rules" and hiking.meta["time_text"] == "last Saturday"
    assert hiking.message_time == SAID
    prompt = chats(server)[0].body["messages"][-1]["content"]
    assert "1 [2024-10-26 21:26:20 Sat] ann: I went hiking last Saturday" in prompt
    assert "guitar" not in prompt


def test_message_time_is_read_in_the_configured_zone(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    """Said at 17:00 UTC on the 26th = 01:00 on the 27th in Shanghai: "yesterday" is the 26th there."""
    script.say("I bought a bike yesterday", 3, [("ann bought a bike", "bike", "")])
    said = datetime(2024, 10, 26, 17, 0, tzinfo=ZoneInfo("UTC"))
    ctx = run(worker(server, "get_observation_with_time"), message("I bought a bike yesterday", said))
    assert ctx.timed_observations[0].event_time == day("2024-10-26")


def test_the_models_date_is_only_a_fallback_for_vague_time_words(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    script.say("Recently I started learning Japanese", 3, [("ann is learning Japanese", "Japanese", "2024-10-01")])
    vague = message("Recently I started learning Japanese")
    ctx = run(worker(server, "get_observation_with_time"), vague)
    (japanese,) = ctx.timed_observations
    assert japanese.event_time == day("2024-10-01") and japanese.meta["time_source"] == "llm"
    off = run(worker(server, "get_observation_with_time", use_llm_time_fallback=False), vague)
    assert off.timed_observations[0].event_time is None
    assert run(worker(server, "get_observation"), vague).observations == ()  # not get_observation's message


def test_the_models_date_picks_between_several_time_expressions(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    text = "I moved to Paris in 2019 and started a new job last week"
    script.say(text, 3, [("ann moved to Paris", "Paris", "2019-06-01"), ("ann started a new job", "job", "2024-10-15")])
    moved, job = run(worker(server, "get_observation_with_time"), message(text)).timed_observations
    assert moved.event_time == day("2019-01-01") and moved.meta["time_text"] == "in 2019"
    assert job.event_time == day("2024-10-14") and job.meta["time_text"] == "last week"


def test_garbage_items_are_skipped_and_reported(server: FakeOpenAIServer) -> None:
    items = [
        {"message": 1, "content": "ann plays the guitar", "keywords": ["guitar", "music"]},
        {"message": 7, "content": "ann has a cat", "keywords": "cat"},
        {"message": 1, "content": "", "keywords": "x"},
        {"message": 1, "content": "None", "keywords": ""},
        {"message": 1, "content": {"nested": "object"}},
        {"content": "no message number"},
        {"message": "2", "content": "ann is vegetarian", "keywords": "none"},
        {"message": 2, "content": "ann is vegetarian", "keywords": "diet"},  # the same fact twice: one node
    ]
    server.add_rule("Messages:", "Sure! Here you go:\n" + json.dumps(items) + "\nHope this helps.")
    ctx = run(worker(server, "get_observation"), message("I play the guitar"), message("I'm vegetarian"))
    assert [(node.content, node.value) for node in ctx.observations] == [
        ("ann plays the guitar", "guitar, music"),
        ("ann is vegetarian", ""),
    ]
    reasons = [entry["reason"] for entry in ctx.details["get_observation"]["skipped"]]
    assert reasons == ["no such message", "no usable content", "no usable content", "no usable content", "no such message"]


def test_too_many_facts_from_one_message_are_cut(server: FakeOpenAIServer) -> None:
    items = [{"message": 1, "content": f"ann fact number {i}", "keywords": ""} for i in range(8)]
    server.add_rule("Messages:", json.dumps(items))
    ctx = run(worker(server, "get_observation", max_observations_per_message=3), message("I tell you many things"))
    assert len(ctx.observations) == 3 and len(ctx.details["get_observation"]["skipped"]) == 5


def test_an_answer_repaired_after_one_retry_is_used(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    script.garbage("get_observation", 1)
    ctx = run(worker(server, "get_observation"), *MESSAGES)
    assert len(ctx.observations) == 3 and len(chats(server)) == 2


def test_an_answer_unreadable_twice_skips_its_messages_without_crashing(
    server: FakeOpenAIServer, script: ConsolidationScript
) -> None:
    script.garbage("get_observation", 2)
    ctx = run(worker(server, "get_observation"), *MESSAGES)
    assert ctx.observations == ()
    assert ctx.unreadable_message_ids == (MESSAGES[0].memory_id, MESSAGES[2].memory_id)


def test_an_empty_array_means_no_facts(server: FakeOpenAIServer) -> None:
    server.add_rule("Messages:", "[]")
    ctx = run(worker(server, "get_observation"), message("I play the guitar"))
    assert ctx.observations == () and len(chats(server)) == 1  # [] is an answer: no repair request


def test_one_call_however_many_messages(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    texts = [f"I like fruit number {i}" for i in range(25)]
    for i, text in enumerate(texts):
        script.say(text, 3, [(f"ann likes fruit number {i}", "fruit")])
    ctx = run(worker(server, "get_observation"), *(message(text, SAID + timedelta(seconds=i)) for i, text in enumerate(texts)))
    assert len(ctx.observations) == 25 and len(chats(server)) == 1


def test_no_messages_no_call(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    ctx = run(worker(server, "get_observation_with_time"), message("I play the guitar every evening"))
    assert ctx.timed_observations == () and chats(server) == []


def test_chinese_messages_and_prompts(server: FakeOpenAIServer) -> None:
    script = ConsolidationScript(user="小王", language="zh")
    script.say("我上周六去爬山了", 3, [("小王去爬山", "爬山", "2024-10-19")])
    script.say("我每天晚上都弹吉他", 3, [("小王每天晚上弹吉他", "吉他, 爱好")])
    script.install(server)
    messages = (message("我上周六去爬山了", user="小王"), message("我每天晚上都弹吉他", user="小王"))
    timed = run(worker(server, "get_observation_with_time", language="zh"), *messages, user="小王").timed_observations
    plain = run(worker(server, "get_observation", language="zh"), *messages, user="小王").observations
    assert [(node.content, node.event_time) for node in timed] == [("小王去爬山", day("2024-10-19"))]
    assert [(node.content, node.value) for node in plain] == [("小王每天晚上弹吉他", "吉他, 爱好")]
    prompts = [request.body["messages"] for request in chats(server)]
    assert any("1 [2024-10-26 21:26:20 周六] 小王：我上周六去爬山了" in prompt[-1]["content"] for prompt in prompts)
    assert all("事实" in prompt[0]["content"] for prompt in prompts)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-10-19", date(2024, 10, 19)),
        ("around 2024/10/19", date(2024, 10, 19)),
        ("2024年10月19日", date(2024, 10, 19)),
        ("2024-10", date(2024, 10, 1)),
        ("2024-02-30", None),
        ("", None),
        ("unknown", None),
    ],
)
def test_parse_llm_date(text: str, expected: date | None) -> None:
    assert parse_llm_date(text) == expected
