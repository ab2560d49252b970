"""Model answers whose meaning is plain parse; unrelated ones still parse as nothing and are repaired.

Each defect a user reported has parser cases and at least one real worker run (the real
`openai_like` backend over HTTP to the fake server, which records every request): a plain answer
is used at once, with no repair request; "I cannot help with that." is asked again once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.context import MemoryContext, Message
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.models.rank.fusion_rank import FusionRank
from memoryscope.stores.base import TimeRange
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.timeparse.model_dates import read_model_date
from memoryscope.worker import Worker
from memoryscope.workers.contra_repeat import Decision, parse_decisions
from memoryscope.workers.extract_time import parse_date_range
from memoryscope.workers.get_observation import parse_observations
from memoryscope.workers.get_observation_with_time import parse_llm_date
from memoryscope.workers.get_reflection_subject import parse_subjects
from memoryscope.workers.info_filter import parse_scores
from memoryscope.workers.long_contra_repeat import parse_judgments
from memoryscope.workers.rewrite_query import parse_rewrite
from memoryscope.workers.update_insight import parse_values

pytestmark = pytest.mark.slow  # every answer form of every prompt; `-m "not slow"` leaves it out

SHANGHAI = ZoneInfo("Asia/Shanghai")
SAID = datetime(2024, 10, 26, 21, 26, 20, tzinfo=SHANGHAI)  # a Saturday
LAST_YEAR = datetime(2023, 5, 1, 20, 0, tzinfo=SHANGHAI)
REFUSAL = "I cannot help with that."
Make = Callable[..., MemoryNode]

CONTRADICT_WORDS = ["contradict", "Contradicts", "CONTRADICTION", "contradicted", "contradictory", "conflict", "矛盾", "冲突"]
REPEAT_WORDS = ["repeat", "Repeated", "duplicate", "contained", "contain", "contains", "included", "重复", "包含", "被包含"]
KEEP_WORDS = ["none", "None", "no relation", "keep", "保留", "无"]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default_reply=REFUSAL) as fake:
        yield fake


@pytest.fixture
def llm(server: FakeOpenAIServer) -> OpenAILikeGeneration:
    return OpenAILikeGeneration(
        OpenAILikeGeneration.Params(model_name="qwen", api_base=server.base_url, max_retries=0, timeout=5)
    )


def worker(llm: OpenAILikeGeneration, name: str, store: Any = None, language: str = "en", **params: Any) -> Worker:
    models = {"generation_model": llm, "rank_model": FusionRank()}
    env = make_env(store=store, models=models, timezone="Asia/Shanghai", language=language)
    return build_worker(name, params, env)


def chats(server: FakeOpenAIServer) -> list[Any]:
    return [request for request in server.requests if request.path.endswith("/chat/completions")]


def repaired(server: FakeOpenAIServer) -> bool:
    return any("could not be read" in str(request.body["messages"][-1]["content"]) for request in chats(server))


# -- 1. every verb and label the prompts teach, any case, inflected --


@pytest.mark.parametrize("word", CONTRADICT_WORDS)
def test_judgments_read_every_contradiction_word(word: str) -> None:
    assert parse_judgments(f'[{{"old": 1, "new": 2, "judgment": "{word}"}}]', 2, 2) == [(1, 2, "contradiction")]
    assert parse_decisions(f"3: {word} 1") == {3: Decision("contradict", 1)}


@pytest.mark.parametrize("word", REPEAT_WORDS)
def test_judgments_read_every_repeat_word(word: str) -> None:
    assert parse_judgments(f'[{{"old": 2, "new": 1, "judgment": "{word}"}}]', 2, 2) == [(2, 1, "repeat")]
    assert parse_decisions(f"4: {word} 2") == {4: Decision("repeat", 2)}


@pytest.mark.parametrize("word", KEEP_WORDS)
def test_a_memory_that_stays_is_a_readable_answer(word: str) -> None:
    assert parse_judgments(f'[{{"old": 1, "new": 1, "judgment": "{word}"}}]', 2, 2) == []
    assert parse_decisions(f"5: {word}") == {5: Decision("keep")}


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("3: Contradiction with 1\n4: Duplicate of 2\n5: No relation",
         {3: Decision("contradict", 1), 4: Decision("repeat", 2), 5: Decision("keep")}),
        ("3: contradicted by fact 1\n4: CONTAINED IN 2", {3: Decision("contradict", 1), 4: Decision("repeat", 2)}),
        ("**3**: contradict **1**\n- **4**: repeat 2", {3: Decision("contradict", 1), 4: Decision("repeat", 2)}),
        ("| fact | decision | other |\n|---|---|---|\n| 3 | contradict | 1 |\n| 4 | repeat | 2 |\n| 5 | keep | |",
         {3: Decision("contradict", 1), 4: Decision("repeat", 2), 5: Decision("keep")}),
        ("[{'fact': 3, 'decision': 'contradiction', 'other': 1},]", {3: Decision("contradict", 1)}),
        ('[{"new": 3, "verdict": "contradicts 1"}]', {3: Decision("contradict", 1)}),
        ("3：矛盾 1\n4：被包含 2", {3: Decision("contradict", 1), 4: Decision("repeat", 2)}),
        (REFUSAL, {}),
        ("Fact 3 is about coffee.", {}),
    ],
)  # fmt: skip
def test_parse_decisions_tolerates_plain_forms(reply: str, expected: dict[int, Decision]) -> None:
    assert parse_decisions(reply) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("| old | new | judgment |\n|---|---|---|\n| 1 | N2 | contradict |\n| 2 | N1 | none |", [(1, 2, "contradiction")]),
        ("| Old memory | New fact | Judgment |\n| :-- | :-- | :-- |\n| **2** | **N1** | **Repeated** |", [(2, 1, "repeat")]),
        ("[{'old': 1, 'new': 2, 'judgment': 'contradict'},]", [(1, 2, "contradiction")]),
        ('```json\n[{"old": 1, "new": 2, "judgment": "contradicts"},]\n```', [(1, 2, "contradiction")]),
        ("- old 1, new N2: contradict", [(1, 2, "contradiction")]),
        ('[{"old": 1, "new": 1, "judgment": "maybe"}]', None),  # a label no prompt teaches: ask again
        (REFUSAL, None),
    ],
)
def test_parse_judgments_tolerates_plain_forms(reply: str, expected: list[tuple[int, int, str]] | None) -> None:
    assert parse_judgments(reply, old_count=2, new_count=2) == expected


def seed_and_facts(store: Any, make_node: Make) -> tuple[MemoryNode, MemoryNode]:
    old = make_node("user lives in Beijing", user_name="user", message_time=LAST_YEAR, reflected=True)
    fresh = make_node("user moved to Hangzhou last month", user_name="user", message_time=SAID)
    store.upsert([old, fresh])
    return old, fresh


@pytest.mark.parametrize(
    "reply",
    [
        '[{"old": 1, "new": "N1", "judgment": "contradict"}]',
        "| old | new | judgment |\n|---|---|---|\n| 1 | N1 | contradicts |",
        "[{'old': 1, 'new': 1, 'judgment': 'Contradiction'},]",
    ],
)
def test_long_contra_repeat_expires_on_contradict_without_a_repair(
    reply: str, make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Older memories", reply)
    old, fresh = seed_and_facts(store, make_node)
    ctx = MemoryContext(user_name="user", unreflected_observations=(fresh,))
    worker(llm, "long_contra_repeat", store).run(ctx)
    assert [(node.memory_id, node.status, node.superseded_by) for node in ctx.expired_memories] == [
        (old.memory_id, MemoryStatus.EXPIRED, fresh.memory_id)
    ]
    assert len(chats(server)) == 1 and not repaired(server)


def test_long_contra_repeat_asks_again_after_a_refusal(
    make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    _, fresh = seed_and_facts(store, make_node)
    ctx = MemoryContext(user_name="user", unreflected_observations=(fresh,))
    worker(llm, "long_contra_repeat", store).run(ctx)
    assert ctx.expired_memories == () and ctx.details["long_contra_repeat"]["unreadable"] is True
    assert len(chats(server)) == 2 and repaired(server)


def fact(content: str, said: datetime) -> MemoryNode:
    return MemoryNode(
        user_name="ann", content=content, memory_type=MemoryType.OBSERVATION, message_time=said,
        memory_id=f"id-{content}", source_message_ids=(f"msg-{content}",),
    )  # fmt: skip


@pytest.mark.parametrize(
    "reply",
    [
        "3: Contradiction with 1\n4: Duplicate of 2\n5: No relation",
        "| fact | decision | other |\n|---|---|---|\n| 3 | CONTRADICTS | 1 |\n| 4 | contained | 2 |\n| 5 | none | |",
    ],
)
def test_contra_repeat_reads_inflected_verdicts_without_a_repair(
    reply: str, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Known facts:", reply)
    morning = SAID - timedelta(hours=12)
    today = (fact("ann likes coffee", morning), fact("ann lives in Hangzhou", morning))
    new = (fact("ann does not drink coffee any more", SAID), fact("ann lives in Hangzhou, China", SAID),
           fact("ann plays the guitar", SAID))  # fmt: skip
    ctx = MemoryContext(user_name="ann", observations=new, today_memories=today)
    worker(llm, "contra_repeat").run(ctx)
    assert [node.content for node in ctx.new_observations] == ["ann does not drink coffee any more", "ann plays the guitar"]
    assert [node.content for node in ctx.expired_memories] == ["ann likes coffee"]
    assert len(chats(server)) == 1 and not repaired(server)


def test_contra_repeat_asks_again_after_a_refusal(llm: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    ctx = MemoryContext(user_name="ann", observations=(fact("ann plays the guitar", SAID),),
                        today_memories=(fact("ann likes coffee", SAID - timedelta(hours=1)),))  # fmt: skip
    worker(llm, "contra_repeat").run(ctx)
    assert ctx.details["contra_repeat"]["unreadable"] is True and len(chats(server)) == 2 and repaired(server)


# -- 2, 3, 4, 5. scores: bold indices, markdown tables, prose, Python-style and sloppy JSON --


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("**1**: 3\n**2**: 0", {1: 3, 2: 0}),
        ("- **1**: **3**\n- **2**: 0", {1: 3, 2: 0}),
        ("| Sentence | Score |\n|---|---|\n| 1 | 3 |\n| 2 | 0 |", {1: 3, 2: 0}),
        ("| # | score |\n| --- | :---: |\n| **1** | 3 |\n| 2 | 0 |", {1: 3, 2: 0}),
        ("| id | rating |\n|----|----|\n| 2 | 1 |", {2: 1}),
        ("Sentence 1 gets a score of 3\nSentence 2: score 0\n3. 2 points", {1: 3, 2: 0, 3: 2}),
        ("Sentence 1 is scored 3.\nMessage 2 receives 1 point.", {1: 3, 2: 1}),
        ("第1句：3分\n句子2得分0", {1: 3, 2: 0}),
        ("{'1': 3, '2': 0}", {1: 3, 2: 0}),
        ("[{'message': 1, 'score': 3}, {'message': 2, 'score': 0},]", {1: 3, 2: 0}),
        ('```json\n{"1": 3, "2": 0,}\n```', {1: 3, 2: 0}),
        (REFUSAL, {}),
        ("Sentence 1 is about music.", {}),
        ("I have 3 cats and 2 dogs.", {}),
        ("| a | b |\n|---|---|\n| x | y |", {}),
    ],
)
def test_parse_scores_tolerates_plain_forms(reply: str, expected: dict[int, int]) -> None:
    assert parse_scores(reply) == expected


def remember(store: Any, *texts: str) -> None:
    messages = tuple(Message("user", text, SAID + timedelta(minutes=index)) for index, text in enumerate(texts))
    build_worker("read_message", {}, make_env(store=store, timezone="Asia/Shanghai")).run(
        MemoryContext(user_name="ann", messages=messages)
    )


@pytest.mark.parametrize(
    "reply",
    [
        "**1**: 3\n**2**: 0",  # 2
        "| Sentence | Score |\n|---|---|\n| 1 | 3 |\n| 2 | 0 |",  # 3
        "Sentence 1 gets a score of 3\nSentence 2: score 0",  # 4
        "{'1': 3, '2': 0}",  # 5
    ],
)
def test_info_filter_uses_plain_scores_without_a_repair(
    reply: str, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Sentences:", reply)
    remember(store, "I play the guitar every evening", "What is the capital of France?")
    ctx = MemoryContext(user_name="ann")
    worker(llm, "info_filter", store).run(ctx)
    assert [node.content for node in ctx.informative_messages] == ["I play the guitar every evening"]
    assert ctx.details["info_filter"]["failed_message_ids"] == []
    assert len(chats(server)) == 1 and not repaired(server)


def test_info_filter_asks_again_after_a_refusal(store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    remember(store, "I play the guitar every evening")
    ctx = MemoryContext(user_name="ann")
    worker(llm, "info_filter", store).run(ctx)
    assert ctx.informative_messages == () and len(ctx.details["info_filter"]["failed_message_ids"]) == 1
    assert len(chats(server)) == 2 and repaired(server)


# -- 5. observations written as Python literals, with trailing commas, in fences or tables --


@pytest.mark.parametrize(
    "reply",
    [
        "[{'content': 'ann plays the guitar', 'keywords': 'guitar', 'message': 1}]",
        '```json\n[{"message": 1, "content": "ann plays the guitar", "keywords": "guitar",},]\n```',
        "| message | content | keywords |\n|---|---|---|\n| 1 | ann plays the guitar | guitar |",
    ],
)
def test_parse_observations_tolerates_plain_forms(reply: str) -> None:
    (item,) = parse_observations(reply) or []
    assert {key: str(value) for key, value in item.items()} == {
        "message": "1", "content": "ann plays the guitar", "keywords": "guitar",
    }  # fmt: skip


@pytest.mark.parametrize("reply", [REFUSAL, "{'content': __import__('os').getcwd()}", "[1, 2, 3]"])
def test_parse_observations_still_refuses_what_holds_no_items(reply: str) -> None:
    assert parse_observations(reply) is None


def message(text: str) -> MemoryNode:
    return MemoryNode(user_name="ann", content=text, memory_type=MemoryType.CONVERSATION, message_time=SAID,
                      memory_id=f"msg-{len(text)}", meta={"role": "user"})  # fmt: skip


@pytest.mark.parametrize(
    "reply",
    [
        "[{'message': 1, 'content': 'ann plays the guitar', 'keywords': 'guitar'}]",
        "Here:\n| message | content | keywords |\n|---|---|---|\n| 1 | ann plays the guitar | guitar |",
    ],
)
def test_get_observation_uses_python_style_items_without_a_repair(
    reply: str, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Messages:", reply)
    ctx = MemoryContext(user_name="ann", informative_messages=(message("I play the guitar every evening"),))
    worker(llm, "get_observation").run(ctx)
    assert [(node.content, node.value) for node in ctx.observations] == [("ann plays the guitar", "guitar")]
    assert len(chats(server)) == 1 and not repaired(server)


def test_get_observation_asks_again_after_a_refusal(llm: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    ctx = MemoryContext(user_name="ann", informative_messages=(message("I play the guitar every evening"),))
    worker(llm, "get_observation").run(ctx)
    assert ctx.observations == () and len(ctx.unreadable_message_ids) == 1
    assert len(chats(server)) == 2 and repaired(server)


# -- 6. attribute lists: bullets, numbering, bold keys --

KEYS = ["hobby", "job", "home city", "name"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("- hobby: guitar\n- job: nurse", {1: "guitar", 2: "nurse"}),
        ("* home city: Beijing", {3: "Beijing"}),
        ("1. name: Lin", {4: "Lin"}),
        ("1) job - nurse", {2: "nurse"}),
        ("**hobby**: guitar\n**Home City**：杭州", {1: "guitar", 3: "杭州"}),
        ("1. **hobby**: guitar\n2. **job**: nurse", {1: "guitar", 2: "nurse"}),
        ("Values:\n- user's hobby: guitar", {1: "guitar"}),
        ("1. guitar\n2. nurse", {1: "guitar", 2: "nurse"}),
        ("{'1': 'guitar', '2': None}", {1: "guitar", 2: ""}),
        ("| attribute | value |\n|---|---|\n| hobby | guitar |\n| job | nurse |", {1: "guitar", 2: "nurse"}),
        (REFUSAL, None),
        ("Note: nothing to say here.\n- favourite food: noodles", None),
    ],
)
def test_parse_values_tolerates_plain_forms(reply: str, expected: dict[int, str] | None) -> None:
    assert parse_values(reply, KEYS) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("- hobby\n- home city", ["hobby", "home city"]),
        ("New attributes:\n1. hobby\n2. pet", ["hobby", "pet"]),
        ("- hobby: guitar\n* **pet**: a cat\n1) job - nurse", ["hobby", "pet", "job"]),
        ("['hobby', 'pet']", ["hobby", "pet"]),
        ('["hobby", "pet",]', ["hobby", "pet"]),
        ("| attribute |\n|---|\n| hobby |\n| pet |", ["hobby", "pet"]),
        (REFUSAL, None),
        ("1. I cannot help with that request, sorry.", None),
    ],
)
def test_parse_subjects_tolerates_plain_forms(reply: str, expected: list[str] | None) -> None:
    assert parse_subjects(reply) == expected


def observations(make_node: Make, *texts: str) -> tuple[MemoryNode, ...]:
    return tuple(
        make_node(text, user_name="user", message_time=SAID + timedelta(hours=index), source_message_ids=(f"m{index}",))
        for index, text in enumerate(texts)
    )


def test_get_reflection_subject_uses_a_bullet_list_without_a_repair(
    make_node: Make, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("New observations", "Here are the new attributes:\n- **hobby**\n- job: nurse\n")
    ctx = MemoryContext(user_name="user", unreflected_observations=observations(make_node, "user plays the guitar"),
                        on_demand=True)  # fmt: skip
    worker(llm, "get_reflection_subject").run(ctx)
    assert ctx.insight_subjects == ("hobby", "job")
    assert len(chats(server)) == 1 and not repaired(server)


def test_get_reflection_subject_asks_again_after_a_refusal(
    make_node: Make, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    ctx = MemoryContext(user_name="user", unreflected_observations=observations(make_node, "user plays the guitar"),
                        on_demand=True)  # fmt: skip
    worker(llm, "get_reflection_subject").run(ctx)
    assert ctx.insight_subjects == () and ctx.details["get_reflection_subject"]["unreadable"] is True
    assert len(chats(server)) == 2 and repaired(server)


@pytest.mark.parametrize(
    "reply",
    [
        "- hobby: playing the guitar\n- job: nurse",
        "1. **hobby**: playing the guitar\n2) job - nurse",
    ],
)
def test_update_insight_uses_an_attribute_list_without_a_repair(
    reply: str, make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Attributes of user", reply)
    facts = observations(make_node, "user plays the guitar every evening", "user works as a nurse")
    ctx = MemoryContext(user_name="user", unreflected_observations=facts, insight_subjects=("hobby", "job"))
    worker(llm, "update_insight", store).run(ctx)
    assert {node.key: node.value for node in ctx.updated_insights} == {"hobby": "playing the guitar", "job": "nurse"}
    assert len(chats(server)) == 1 and not repaired(server)


def test_update_insight_asks_again_after_a_refusal(
    make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    facts = observations(make_node, "user plays the guitar every evening")
    ctx = MemoryContext(user_name="user", unreflected_observations=facts, insight_subjects=("hobby",))
    worker(llm, "update_insight", store).run(ctx)
    assert ctx.updated_insights == () and ctx.details["update_insight"]["skipped"] == ["hobby"]
    assert len(chats(server)) == 2 and repaired(server)


# -- 7. dates: slashes, dots, Chinese; day-first or month-first only when unambiguous --


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024/10/01", date(2024, 10, 1)),
        ("2024.10.1", date(2024, 10, 1)),
        ("2024年10月1日", date(2024, 10, 1)),
        ("19/10/2024", date(2024, 10, 19)),  # day first: 19 is no month
        ("10/19/2024", date(2024, 10, 19)),  # month first: 19 is no month
        ("10.10.2024", date(2024, 10, 10)),  # either way the same day
        ("10/01/2024", None),  # 1 October or 10 January: not guessed
        ("31/02/2024", None),
    ],
)
def test_model_dates_in_common_unambiguous_forms(text: str, expected: date | None) -> None:
    assert parse_llm_date(text) == expected


def test_an_ambiguous_model_date_says_why_it_is_none() -> None:
    assert "ambiguous" in read_model_date("10/01/2024").problem
    assert read_model_date("on 3/4").problem == ""  # no year: no date at all


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("{'start': '2024.10.01', 'end': '2024.10.15'}", ("2024-10-01", "2024-10-16")),
        ("start: 2024/10/01, end: 2024/10/15", ("2024-10-01", "2024-10-16")),
        ("start：2024年10月1日，end：2024年10月15日", ("2024-10-01", "2024-10-16")),
        ("| start | end |\n|---|---|\n| 2024/10/01 | 2024/10/15 |", ("2024-10-01", "2024-10-16")),
        ('{"start": "01/10/2024", "end": "15/10/2024"}', ("2024-10-01", "2024-10-16")),  # the end tells day first
        ("From 2024/10/01 to 2024/10/15.", ("2024-10-01", "2024-10-16")),
        ('{"start": "10/01/2024"}', None),
        (REFUSAL, None),
    ],
)
def test_parse_date_range_tolerates_plain_forms(reply: str, expected: tuple[str, str] | None) -> None:
    parsed = parse_date_range(reply, SHANGHAI)
    as_days = None if parsed is None else (parsed[0].date().isoformat(), parsed[1].date().isoformat())
    assert as_days == expected


def test_extract_time_uses_python_style_dotted_dates(llm: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.add_rule("recently", "Sure: {'start': '2024.10.01', 'end': '2024.10.15'}")
    ctx = MemoryContext(user_name="ann", query="what did I buy recently?", query_time=SAID)
    worker(llm, "extract_time").run(ctx)
    start, end = datetime(2024, 10, 1, tzinfo=SHANGHAI), datetime(2024, 10, 16, tzinfo=SHANGHAI)
    assert ctx.time_range == TimeRange("event_time", start, end)
    assert len(chats(server)) == 1


@pytest.mark.parametrize(("llm_time", "expected"), [("19/10/2024", date(2024, 10, 19)), ("2024.10.19", date(2024, 10, 19))])
def test_get_observation_with_time_reads_other_date_forms(
    llm_time: str, expected: date, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Messages (each with", f"[{{'message': 1, 'content': 'ann is learning Japanese', 'time': '{llm_time}'}}]")
    ctx = MemoryContext(user_name="ann", informative_messages=(message("Recently I started learning Japanese"),))
    worker(llm, "get_observation_with_time").run(ctx)
    (japanese,) = ctx.timed_observations
    assert japanese.event_time is not None and japanese.event_time.astimezone(SHANGHAI).date() == expected
    assert japanese.meta["time_source"] == "llm" and len(chats(server)) == 1


def test_get_observation_with_time_drops_an_ambiguous_date_and_says_why(
    llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Messages (each with", '[{"message": 1, "content": "ann is learning Japanese", "time": "10/01/2024"}]')
    ctx = MemoryContext(user_name="ann", informative_messages=(message("Recently I started learning Japanese"),))
    worker(llm, "get_observation_with_time").run(ctx)
    (japanese,) = ctx.timed_observations
    (dropped,) = ctx.details["get_observation_with_time"]["dropped_times"]
    assert japanese.event_time is None and "ambiguous" in dropped["reason"]


# -- the rewrite: markdown around its label --


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("**Rewrite:** What does my sister Mary do in Berlin?", "What does my sister Mary do in Berlin?"),
        ("- **改写**：我妹妹小丽在上海做什么工作？", "我妹妹小丽在上海做什么工作？"),
        ("**None**", None),
    ],
)
def test_parse_rewrite_reads_through_markdown(reply: str, expected: str | None) -> None:
    assert parse_rewrite(reply) == expected
