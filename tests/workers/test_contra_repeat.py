"""contra_repeat: one call compares new observations with each other and today's memories.

The model is the real `openai_like` backend on the fake server, answering from a script that
finds the facts it knows among the numbered lines of the prompt.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.context import MemoryContext
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.worker import Worker
from memoryscope.workers.contra_repeat import Decision, parse_decisions

SHANGHAI = ZoneInfo("Asia/Shanghai")
MORNING = datetime(2024, 10, 26, 9, 0, tzinfo=SHANGHAI)
EVENING = datetime(2024, 10, 26, 21, 0, tzinfo=SHANGHAI)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def script(server: FakeOpenAIServer) -> ConsolidationScript:
    script = ConsolidationScript(user="ann")
    script.verdict("ann does not drink coffee any more", "contradict", "ann likes coffee")
    script.verdict("ann lives in Hangzhou, China", "repeat", "ann lives in Hangzhou")
    script.install(server)
    return script


def worker(server: FakeOpenAIServer, language: str = "en", enabled: bool = True, **params: Any) -> Worker:
    model = OpenAILikeGeneration(
        OpenAILikeGeneration.Params(model_name="qwen", api_base=server.base_url, max_retries=0, timeout=5.0)
    )
    env = make_env(
        models={"generation_model": model}, timezone="Asia/Shanghai", language=language, enable_today_contra_repeat=enabled
    )
    return build_worker("contra_repeat", params, env)


def fact(content: str, said: datetime = EVENING, source: str = "", **fields: Any) -> MemoryNode:
    return MemoryNode(
        user_name="ann", content=content, memory_type=MemoryType.OBSERVATION, message_time=said,
        memory_id=f"id-{content}", source_message_ids=(source or f"msg-{content}",), **fields,
    )  # fmt: skip


def run(
    worker: Worker, new: tuple[MemoryNode, ...], today: tuple[MemoryNode, ...] = (), timed: tuple[MemoryNode, ...] = ()
) -> MemoryContext:
    ctx = MemoryContext(user_name="ann", observations=new, timed_observations=timed, today_memories=today)
    worker.run(ctx)
    return ctx


def chats(server: FakeOpenAIServer) -> list[Any]:
    return [request for request in server.requests if request.path.endswith("/chat/completions")]


def contents(nodes: tuple[MemoryNode, ...]) -> list[str]:
    return [node.content for node in nodes]


def test_a_contradicted_memory_from_today_expires_and_points_at_the_new_fact(
    server: FakeOpenAIServer, script: ConsolidationScript
) -> None:
    coffee = fact("ann likes coffee", MORNING)
    new = (fact("ann does not drink coffee any more"), fact("ann plays the guitar"))
    ctx = run(worker(server), new, today=(coffee, fact("ann lives in Hangzhou", MORNING)))
    assert contents(ctx.new_observations) == ["ann does not drink coffee any more", "ann plays the guitar"]
    (expired,) = ctx.expired_memories
    assert expired.memory_id == coffee.memory_id and expired.status is MemoryStatus.EXPIRED
    assert expired.superseded_by == "id-ann does not drink coffee any more"
    (request,) = chats(server)
    assert request.body["messages"][-1]["content"] == (
        "Known facts:\n1 [2024-10-26 09:00:00 Sat] ann likes coffee\n2 [2024-10-26 09:00:00 Sat] ann lives in Hangzhou\n"
        "New facts:\n3 [2024-10-26 21:00:00 Sat] ann does not drink coffee any more\n"
        "4 [2024-10-26 21:00:00 Sat] ann plays the guitar\nAnswer:\n"
    )
    assert ctx.details["contra_repeat"]["contradictions"] == [
        {"expired": "id-ann likes coffee", "superseded_by": "id-ann does not drink coffee any more"}
    ]


def test_a_repeat_of_a_memory_from_today_is_dropped(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    ctx = run(
        worker(server),
        (fact("ann lives in Hangzhou, China"), fact("ann plays the guitar")),
        today=(fact("ann lives in Hangzhou", MORNING),),
    )
    assert contents(ctx.new_observations) == ["ann plays the guitar"] and ctx.expired_memories == ()
    assert ctx.details["contra_repeat"]["repeats"] == [
        {"dropped": "id-ann lives in Hangzhou, China", "of": "id-ann lives in Hangzhou"}
    ]


def test_a_repeat_among_the_new_facts_joins_its_sources_to_the_other(
    server: FakeOpenAIServer, script: ConsolidationScript
) -> None:
    first = fact("ann lives in Hangzhou", EVENING, source="m1")
    second = fact("ann lives in Hangzhou, China", EVENING + timedelta(minutes=1), source="m2")
    ctx = run(worker(server), (first,), timed=(second,))
    (kept,) = ctx.new_observations
    assert kept.memory_id == first.memory_id and kept.source_message_ids == ("m1", "m2")


def test_in_a_contradiction_between_new_facts_the_later_one_wins(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    # said later, but the model names the older fact as the one that contradicts
    script.verdict("ann likes coffee", "contradict", "ann does not drink coffee any more")
    older = fact("ann likes coffee", EVENING)
    newer = fact("ann does not drink coffee any more", EVENING + timedelta(minutes=5))
    ctx = run(worker(server), (newer, older))
    assert contents(ctx.new_observations) == ["ann does not drink coffee any more"]
    (expired,) = ctx.expired_memories
    assert expired.content == "ann likes coffee" and expired.superseded_by == newer.memory_id
    assert expired.status is MemoryStatus.EXPIRED


def test_exact_duplicates_go_before_the_model_is_asked(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    ctx = run(
        worker(server),
        (fact("Ann plays the guitar.", source="m1"), fact("ann plays the guitar", EVENING + timedelta(seconds=1), source="m2")),
        timed=(fact("ann likes tea!", EVENING),),
        today=(fact("Ann likes tea", MORNING),),
    )
    (kept,) = ctx.new_observations
    assert kept.content == "Ann plays the guitar." and kept.source_message_ids == ("m1", "m2")
    new_part = chats(server)[0].body["messages"][-1]["content"].split("New facts:")[1]
    assert "Ann plays the guitar." in new_part and "tea" not in new_part and "ann plays" not in new_part
    assert len(ctx.details["contra_repeat"]["duplicates"]) == 2
    # with nothing left to compare, there is no call at all
    server.clear_requests()
    ctx = run(worker(server), (fact("Ann likes tea."),), today=(fact("ann likes tea", MORNING),))
    assert ctx.new_observations == () and chats(server) == []


def test_switched_off_everything_passes_through(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    new = (fact("ann does not drink coffee any more"), fact("ann does not drink coffee any more!"))
    ctx = run(worker(server, enabled=False), new, today=(fact("ann likes coffee", MORNING),))
    assert contents(ctx.new_observations) == contents(new) and ctx.expired_memories == ()
    assert chats(server) == []


def test_the_comparison_is_bounded_to_the_most_similar_memories(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    today = tuple(fact(f"ann visited museum number {i}", MORNING + timedelta(minutes=i)) for i in range(80))
    today += (fact("ann likes coffee", MORNING),)
    ctx = run(worker(server, contra_repeat_max_count=5), (fact("ann does not drink coffee any more"),), today=today)
    prompt = chats(server)[0].body["messages"][-1]["content"]
    known = prompt.split("New facts:")[0].strip().splitlines()[1:]
    assert len(known) == 5 and any(line.endswith("ann likes coffee") for line in known)
    assert contents(ctx.expired_memories) == ["ann likes coffee"]


def test_an_answer_unreadable_twice_keeps_every_new_fact(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    script.garbage("contra_repeat", 2)
    new = (fact("ann does not drink coffee any more"), fact("ann plays the guitar"))
    ctx = run(worker(server), new, today=(fact("ann likes coffee", MORNING),))
    assert contents(ctx.new_observations) == contents(new) and ctx.expired_memories == ()
    assert ctx.details["contra_repeat"]["unreadable"] is True and len(chats(server)) == 2


def test_verdicts_pointing_nowhere_are_ignored(server: FakeOpenAIServer) -> None:
    server.add_rule("Known facts:", "2: contradict 9\n3: repeat 3\n")
    new = (fact("ann plays the guitar"), fact("ann plays the piano"))
    ctx = run(worker(server), new, today=(fact("ann likes coffee", MORNING),))
    assert contents(ctx.new_observations) == contents(new) and ctx.expired_memories == ()
    assert len(ctx.details["contra_repeat"]["ignored"]) == 2


def test_nothing_new_means_no_call(server: FakeOpenAIServer, script: ConsolidationScript) -> None:
    ctx = run(worker(server), (), today=(fact("ann likes coffee", MORNING),))
    assert ctx.new_observations == () and ctx.expired_memories == () and chats(server) == []


def test_chinese_prompts_and_verdicts(server: FakeOpenAIServer) -> None:
    script = ConsolidationScript(user="小王", language="zh")
    script.verdict("小王不再喝咖啡了", "contradict", "小王喜欢喝咖啡")
    script.verdict("小王住在杭州市", "repeat", "小王住在杭州")
    script.install(server)
    today = (fact("小王喜欢喝咖啡", MORNING), fact("小王住在杭州", MORNING))
    ctx = run(
        worker(server, language="zh"), (fact("小王不再喝咖啡了"), fact("小王住在杭州市"), fact("小王会弹吉他")), today=today
    )
    assert contents(ctx.new_observations) == ["小王不再喝咖啡了", "小王会弹吉他"]
    assert [(node.content, node.superseded_by) for node in ctx.expired_memories] == [("小王喜欢喝咖啡", "id-小王不再喝咖啡了")]
    messages = chats(server)[0].body["messages"]
    assert "1 [2024-10-26 09:00:00 周六] 小王喜欢喝咖啡" in messages[-1]["content"] and "矛盾" in messages[0]["content"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("3: contradict 1\n4: repeat 2\n5: keep", {3: Decision("contradict", 1), 4: Decision("repeat", 2), 5: Decision("keep")}),
        ("[3] Contradicts <1>\n- 4. repeat of fact 2", {3: Decision("contradict", 1), 4: Decision("repeat", 2)}),
        ("3：矛盾 1\n4：重复 2\n5：保留", {3: Decision("contradict", 1), 4: Decision("repeat", 2), 5: Decision("keep")}),
        ('[{"fact": 3, "decision": "repeat", "other": 1}]', {3: Decision("repeat", 1)}),
        ("3: repeat", {}),  # a repeat of what?
        ("Everything looks fine to me.", {}),
    ],
)
def test_parse_decisions(reply: str, expected: dict[int, Decision]) -> None:
    assert parse_decisions(reply) == expected
