"""long_contra_repeat: older memories that new facts contradict or repeat expire, in one LLM call."""

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
from memoryscope.memory import MemoryNode, MemoryStatus
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.workers.long_contra_repeat import parse_judgments

SHANGHAI = ZoneInfo("Asia/Shanghai")
Make = Callable[..., MemoryNode]
LAST_YEAR = datetime(2023, 5, 1, 20, 0, tzinfo=SHANGHAI)
THIS_MONTH = datetime(2024, 10, 20, 20, 0, tzinfo=SHANGHAI)
# A model's judgments for facts like these: (word in the older memory, word in the new fact, judgment).
RULES_EN = [
    ("Beijing", "moved to Hangzhou", "contradiction"),
    ("teacher", "nurse", "contradiction"),
    ("guitar", "guitar", "repeat"),
]
RULES_ZH = [("北京", "杭州", "矛盾"), ("老师", "护士", "矛盾"), ("吉他", "吉他", "重复")]
LINE = re.compile(r"^(N?)(\d+)\. (.*)$")


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default_reply="Let me think about this carefully, there is a lot to consider.") as fake:
        yield fake


@pytest.fixture
def llm(server: FakeOpenAIServer) -> OpenAILikeGeneration:
    return OpenAILikeGeneration(
        OpenAILikeGeneration.Params(model_name="Qwen/Qwen2.5-7B-Instruct", api_base=server.base_url, max_retries=0, timeout=5)
    )


def numbered(body: dict[str, Any]) -> tuple[dict[int, str], dict[int, str]]:
    """(new facts, older memories) of the prompt, by number."""
    new: dict[int, str] = {}
    old: dict[int, str] = {}
    for line in str(body["messages"][1]["content"]).splitlines():
        match = LINE.match(line.strip())
        if match:
            (new if match.group(1) else old)[int(match.group(2))] = match.group(3)
    return new, old


def judge(rules: list[tuple[str, str, str]], chatter: str = "") -> Callable[[dict[str, Any]], str]:
    """A model that applies `rules` to every (older memory, new fact) pair of the prompt."""

    def reply(body: dict[str, Any]) -> str:
        new, old = numbered(body)
        found = []
        for old_number, old_text in old.items():
            for new_number, new_text in new.items():
                hit = next((verdict for was, now, verdict in rules if was in old_text and now in new_text), None)
                if hit:
                    found.append({"old": old_number, "new": new_number, "judgment": hit})
                    break
        return f"{chatter}{json.dumps(found, ensure_ascii=False)}"

    return reply


def environment(llm: OpenAILikeGeneration, store: Any, **settings: Any) -> Env:
    settings.setdefault("timezone", "Asia/Shanghai")
    return make_env(store=store, models={"generation_model": llm}, **settings)


def chats(server: FakeOpenAIServer) -> list[Any]:
    return [record for record in server.requests if record.path == "/v1/chat/completions"]


def seed(store: Any, make_node: Make, texts: dict[str, str], **fields: Any) -> dict[str, MemoryNode]:
    fields.setdefault("user_name", "user")
    fields.setdefault("message_time", LAST_YEAR)
    nodes = {name: make_node(text, reflected=True, **fields) for name, text in texts.items()}
    store.upsert(list(nodes.values()))
    return nodes


def new_facts(store: Any, make_node: Make, texts: list[str]) -> tuple[MemoryNode, ...]:
    """Unreflected observations, already stored by consolidation."""
    nodes = tuple(
        make_node(text, user_name="user", message_time=THIS_MONTH + timedelta(hours=index)) for index, text in enumerate(texts)
    )
    store.upsert(list(nodes))
    return nodes


def test_contradicted_and_repeated_old_memories_expire_pointing_at_the_new_fact(
    make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Older memories", judge(RULES_EN, "After comparing them:\n"))
    old = seed(
        store,
        make_node,
        {
            "beijing": "user lives in Beijing near the Summer Palace",
            "guitar": "user plays the guitar every evening",
            "tea": "user likes green tea",
        },
    )
    teacher = seed(store, make_node, {"job": "user's job: teacher"}, memory_type="insight", key="job", value="teacher")["job"]
    home = seed(store, make_node, {"home": "user's home city: Beijing"}, memory_type="insight", key="home city", value="Beijing")
    home_now = home["home"].replace(content="user's home city: Hangzhou", value="Hangzhou", updated=True)
    nurse = make_node("user's profession: nurse", user_name="user", memory_type="insight", key="profession", value="nurse")
    fresh = new_facts(store, make_node, ["user moved to Hangzhou last month", "user plays the guitar every evening after dinner"])
    worker = build_worker("long_contra_repeat", {}, environment(llm, store))
    ctx = MemoryContext(user_name="user", updated_insights=(nurse, home_now), unreflected_observations=fresh)
    worker.run(ctx)

    assert len(chats(server)) == 1
    expired = {node.memory_id: node for node in ctx.expired_memories}
    assert set(expired) == {old["beijing"].memory_id, old["guitar"].memory_id, teacher.memory_id}
    assert all(node.status is MemoryStatus.EXPIRED for node in expired.values())
    assert expired[old["beijing"].memory_id].superseded_by == fresh[0].memory_id
    assert expired[old["guitar"].memory_id].superseded_by == fresh[1].memory_id
    assert expired[teacher.memory_id].superseded_by == nurse.memory_id
    assert expired[teacher.memory_id].content == "user's job: teacher" and expired[teacher.memory_id].score is None
    new, older = numbered(chats(server)[0].body)
    assert "[2024-10-20 20:00:00 Sun] user moved to Hangzhou last month" in new.values()
    # New facts and the old version of an updated insight are never judged as older memories.
    assert not any("Hangzhou" in text or "home city" in text for text in older.values())
    assert ctx.details["long_contra_repeat"]["compared"] == len(older)


def test_chinese_prompt_and_judgments(make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.add_rule("较早的记忆", judge(RULES_ZH, "判断如下：\n"))
    old = seed(store, make_node, {"beijing": "用户住在北京颐和园附近", "tea": "用户喜欢喝绿茶"})
    fresh = new_facts(store, make_node, ["用户上个月搬到了杭州"])
    worker = build_worker("long_contra_repeat", {}, environment(llm, store, language="zh"))
    ctx = MemoryContext(user_name="user", unreflected_observations=fresh)
    worker.run(ctx)
    assert [(node.memory_id, node.superseded_by) for node in ctx.expired_memories] == [
        (old["beijing"].memory_id, fresh[0].memory_id)
    ]
    sent = str(chats(server)[0].body["messages"][1]["content"])
    assert "N1. [2024-10-20 20:00:00 周日] 用户上个月搬到了杭州" in sent


def test_turned_off_it_expires_nothing_and_calls_nothing(
    make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Older memories", judge(RULES_EN))
    seed(store, make_node, {"beijing": "user lives in Beijing"})
    fresh = new_facts(store, make_node, ["user moved to Hangzhou last month"])
    worker = build_worker("long_contra_repeat", {}, environment(llm, store, enable_long_contra_repeat=False))
    ctx = MemoryContext(user_name="user", unreflected_observations=fresh)
    worker.run(ctx)
    assert ctx.expired_memories == () and chats(server) == []
    assert ctx.details["long_contra_repeat"]["enabled"] is False


def test_nothing_similar_enough_means_no_call(
    make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    seed(store, make_node, {"beijing": "user lives in Beijing"})
    fresh = new_facts(store, make_node, ["user moved to Hangzhou last month"])
    worker = build_worker("long_contra_repeat", {"long_contra_repeat_threshold": 0.999}, environment(llm, store))
    ctx = MemoryContext(user_name="user", unreflected_observations=fresh)
    worker.run(ctx)
    assert ctx.expired_memories == () and chats(server) == []


def test_other_users_memories_are_never_compared(
    make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Older memories", judge(RULES_EN))
    seed(store, make_node, {"beijing": "user lives in Beijing"}, user_name="bob")
    seed(store, make_node, {"other": "user lives in Beijing"}, user_name="user", workspace="another-assistant")
    fresh = new_facts(store, make_node, ["user moved to Hangzhou last month"])
    worker = build_worker("long_contra_repeat", {}, environment(llm, store))
    ctx = MemoryContext(user_name="user", unreflected_observations=fresh)
    worker.run(ctx)
    assert ctx.expired_memories == () and chats(server) == []


@pytest.mark.parametrize("count", [6, 30])
def test_one_call_however_many_new_observations(
    count: int, make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    server.add_rule("Older memories", judge(RULES_EN))
    old = seed(store, make_node, {"beijing": "user lives in Beijing near the Summer Palace"})
    texts = ["user moved to Hangzhou last month"] + [
        f"user read chapter {index} of a novel about sailing" for index in range(count - 1)
    ]
    fresh = new_facts(store, make_node, texts)
    worker = build_worker("long_contra_repeat", {}, environment(llm, store))
    ctx = MemoryContext(user_name="user", unreflected_observations=fresh)
    worker.run(ctx)
    assert len(chats(server)) == 1
    assert [node.memory_id for node in ctx.expired_memories] == [old["beijing"].memory_id]


def test_garbage_is_repaired_once(make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.add_rule("could not be read", judge(RULES_EN))  # the repair request; the first answer is garbage
    old = seed(store, make_node, {"beijing": "user lives in Beijing"})
    fresh = new_facts(store, make_node, ["user moved to Hangzhou last month"])
    worker = build_worker("long_contra_repeat", {}, environment(llm, store))
    ctx = MemoryContext(user_name="user", unreflected_observations=fresh)
    worker.run(ctx)
    assert len(chats(server)) == 2
    assert [node.memory_id for node in ctx.expired_memories] == [old["beijing"].memory_id]


def test_garbage_twice_expires_nothing_and_says_so(
    make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    seed(store, make_node, {"beijing": "user lives in Beijing"})
    fresh = new_facts(store, make_node, ["user moved to Hangzhou last month"])
    earlier = make_node("user drinks coffee daily", user_name="user", status="expired", superseded_by="x")
    worker = build_worker("long_contra_repeat", {}, environment(llm, store))
    ctx = MemoryContext(user_name="user", unreflected_observations=fresh, expired_memories=(earlier,))
    worker.run(ctx)
    assert len(chats(server)) == 2
    assert ctx.expired_memories == (earlier,)  # what an earlier step expired stays
    assert ctx.details["long_contra_repeat"]["unreadable"] is True


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('[{"old": 1, "new": 2, "judgment": "contradiction"}]', [(1, 2, "contradiction")]),
        ('[{"old": 1, "new": 2, "judgment": "contradict"}]', [(1, 2, "contradiction")]),  # the verb the prompts teach
        ('```json\n{"judgments": [{"old": "2", "new": "N1", "judgment": "Repeated"}]}\n```', [(2, 1, "repeat")]),
        (
            '[{"old": 1, "new": 1, "judgment": "矛盾"}, {"old": 2, "new": 1, "judgment": "被包含"}]',
            [(1, 1, "contradiction"), (2, 1, "repeat")],
        ),
        ('[{"old": 9, "new": 1, "judgment": "repeat"}, {"old": 1, "new": 1, "judgment": "none"}]', []),
        ("Judgment: <1> <N2> <Contradiction>\nJudgment: <2> <N1> <None>", [(1, 2, "contradiction")]),
        ("[]", []),
        ("None", []),
        ("I need more context to decide.", None),
    ],
)
def test_parse_judgments(reply: str, expected: list[tuple[int, int, str]] | None) -> None:
    assert parse_judgments(reply, old_count=2, new_count=2) == expected
