"""info_filter: pending messages in, one scoring call per prompt budget, informative messages out.

The model is the real `openai_like` backend talking to the fake server, whose answers come from
a script that reads the numbered lines of the prompt.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.context import MemoryContext, Message
from memoryscope.errors import ConfigError
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.worker import Worker
from memoryscope.workers.info_filter import parse_scores

SHANGHAI = ZoneInfo("Asia/Shanghai")
EVENING = datetime(2024, 10, 26, 21, 0, tzinfo=SHANGHAI)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def script(server: FakeOpenAIServer) -> ConsolidationScript:
    script = ConsolidationScript(user="ann")
    script.say("I play the guitar every evening", score=3)
    script.say("I'm a bit tired today", score=2)
    script.say("Write me a poem about dragons", score=1)
    script.say("What is the capital of France?", score=0)
    script.install(server)
    return script


def env_for(server: FakeOpenAIServer, store: Any, language: str = "en") -> Any:
    model = OpenAILikeGeneration(
        OpenAILikeGeneration.Params(model_name="qwen", api_base=server.base_url, max_retries=0, timeout=5.0)
    )
    return make_env(store=store, models={"generation_model": model}, timezone="Asia/Shanghai", language=language)


def remember(store: Any, *texts: str, role: str = "user", start: datetime = EVENING, user: str = "ann") -> None:
    """Store `texts` as conversation memories one minute apart, as read_message does."""
    messages = tuple(Message(role, text, start + timedelta(minutes=i)) for i, text in enumerate(texts))
    build_worker("read_message", {}, make_env(store=store, timezone="Asia/Shanghai")).run(
        MemoryContext(user_name=user, messages=messages)
    )


def chats(server: FakeOpenAIServer) -> list[Any]:
    return [request for request in server.requests if request.path.endswith("/chat/completions")]


def run(worker: Worker, user: str = "ann") -> MemoryContext:
    ctx = MemoryContext(user_name=user)
    worker.run(ctx)
    return ctx


def test_scores_every_pending_user_message_in_one_call(server: FakeOpenAIServer, script: ConsolidationScript, store: Any) -> None:
    remember(store, "What is the capital of France?", "I play the guitar every evening", "Write me a poem about dragons")
    remember(store, "Paris. Anything else?", role="assistant", start=EVENING + timedelta(seconds=30))
    remember(store, "I'm a bit tired today", start=EVENING + timedelta(minutes=5))
    ctx = run(build_worker("info_filter", {}, env_for(server, store)))
    assert [node.content for node in ctx.informative_messages] == ["I play the guitar every evening", "I'm a bit tired today"]
    # the assistant's message is pending too (it gets marked consolidated) but is not scored
    assert len(ctx.pending_messages) == 5
    assert [node.meta["role"] for node in ctx.pending_messages].count("assistant") == 1
    (request,) = chats(server)
    prompt = request.body["messages"][-1]["content"]
    assert "4 [2024-10-26 21:05:00 Sat] ann: I'm a bit tired today" in prompt
    assert "Paris" not in prompt
    assert ctx.details["info_filter"]["scored"] == 4 and ctx.details["info_filter"]["llm_calls"] == 1


def test_no_pending_messages_stops_the_workflow_without_a_call(
    server: FakeOpenAIServer, script: ConsolidationScript, store: Any
) -> None:
    remember(store, "I play the guitar every evening", user="bob")  # another user's message
    ctx = run(build_worker("info_filter", {}, env_for(server, store)))
    assert ctx.stop_reason == "no new messages" and ctx.result == "no new messages"
    assert ctx.pending_messages == () and chats(server) == []


def test_consolidated_messages_are_not_pending(server: FakeOpenAIServer, script: ConsolidationScript, store: Any) -> None:
    remember(store, "I play the guitar every evening", "I'm a bit tired today")
    done = next(node for node in store.scan(MemoryFilter(user_name="ann")) if node.content.startswith("I play"))
    store.update(done.memory_id, reflected=True)
    ctx = run(build_worker("info_filter", {}, env_for(server, store)))
    assert [node.content for node in ctx.pending_messages] == ["I'm a bit tired today"]


def test_takes_the_first_stored_pending_messages_up_to_the_maximum_in_the_order_said(
    server: FakeOpenAIServer, script: ConsolidationScript, store: Any
) -> None:
    remember(store, "I'm a bit tired today", start=EVENING + timedelta(hours=1))
    remember(store, "What is the capital of France?")
    remember(store, "I play the guitar every evening", start=EVENING + timedelta(minutes=1))
    ctx = run(build_worker("info_filter", {"max_pending_messages": 2}, env_for(server, store)))
    assert [node.content for node in ctx.pending_messages] == ["What is the capital of France?", "I'm a bit tired today"]
    assert ctx.details["info_filter"]["pending"] == 2


def test_preserved_scores_accept_the_0_1_string_and_are_checked(
    server: FakeOpenAIServer, script: ConsolidationScript, store: Any
) -> None:
    remember(store, "I play the guitar every evening", "I'm a bit tired today", "Write me a poem about dragons")
    ctx = run(build_worker("info_filter", {"preserved_scores": "1,3"}, env_for(server, store)))
    assert [node.content for node in ctx.informative_messages] == [
        "I play the guitar every evening",
        "Write me a poem about dragons",
    ]
    with pytest.raises(ConfigError, match=r"worker\.info_filter\.preserved_scores"):
        build_worker("info_filter", {"preserved_scores": [2, 5]}, env_for(server, store))
    with pytest.raises(ConfigError, match=r"worker\.info_filter\.info_filter_msg_max_sise"):
        build_worker("info_filter", {"info_filter_msg_max_sise": 100}, env_for(server, store))


def test_a_message_the_model_did_not_score_is_not_informative_and_reported(server: FakeOpenAIServer, store: Any) -> None:
    server.add_rule("Sentences:", "Here are the scores.\n1: 3\n")  # the second message is forgotten
    remember(store, "I play the guitar every evening", "I'm a bit tired today")
    ctx = run(build_worker("info_filter", {}, env_for(server, store)))
    tired = next(node for node in ctx.pending_messages if node.content.startswith("I'm"))
    assert [node.content for node in ctx.informative_messages] == ["I play the guitar every evening"]
    assert ctx.details["info_filter"]["unscored_message_ids"] == [tired.memory_id]


def test_unreadable_scores_are_asked_again_once(server: FakeOpenAIServer, script: ConsolidationScript, store: Any) -> None:
    remember(store, "I play the guitar every evening", "I'm a bit tired today")
    worker = build_worker("info_filter", {}, env_for(server, store))
    script.garbage("info_filter", 1)
    ctx = run(worker)
    assert len(ctx.informative_messages) == 2
    assert len(chats(server)) == 2
    assert "could not be read" in chats(server)[1].body["messages"][-1]["content"]


def test_scores_unreadable_twice_leave_the_messages_pending_without_crashing(
    server: FakeOpenAIServer, script: ConsolidationScript, store: Any
) -> None:
    remember(store, "I play the guitar every evening", "I'm a bit tired today")
    script.garbage("info_filter", 2)
    ctx = run(build_worker("info_filter", {}, env_for(server, store)))
    assert ctx.informative_messages == () and ctx.pending_messages == () and ctx.stop_reason  # not "not informative"
    assert len(ctx.details["info_filter"]["failed_message_ids"]) == 2  # pending, with the failure noted (test_failed_messages)


def test_calls_do_not_grow_with_messages_until_the_prompt_budget_is_full(
    server: FakeOpenAIServer, script: ConsolidationScript, store: Any
) -> None:
    texts = [f"I play the guitar every evening{'!' * i}" for i in range(40)]
    for text in texts:
        script.say(text, score=3)
    remember(store, *texts)
    ctx = run(build_worker("info_filter", {}, env_for(server, store)))
    assert len(chats(server)) == 1 and len(ctx.informative_messages) == 40
    server.clear_requests()
    ctx = run(build_worker("info_filter", {"prompt_token_budget": 1000}, env_for(server, store)))
    requests = chats(server)
    assert 2 <= len(requests) <= 4
    assert len(ctx.informative_messages) == 40  # every chunk numbered from 1, mapped back correctly


def test_long_messages_keep_head_and_tail_in_the_prompt(
    server: FakeOpenAIServer, script: ConsolidationScript, store: Any
) -> None:
    remember(store, "I live in Hangzhou " + "and so on " * 100 + "and I have two cats")
    run(build_worker("info_filter", {"info_filter_msg_max_size": 60}, env_for(server, store)))
    prompt = chats(server)[0].body["messages"][-1]["content"]
    assert "ann: I live in Hangzhou" in prompt and "I have two cats" in prompt and "…" in prompt
    assert "so on " * 10 not in prompt


def test_chinese_prompts_and_messages(server: FakeOpenAIServer, store: Any) -> None:
    script = ConsolidationScript(user="小王", language="zh")
    script.say("我每天晚上都弹吉他", score=3)
    script.say("今天天气怎么样？", score=0)
    script.install(server)
    remember(store, "我每天晚上都弹吉他", "今天天气怎么样？", user="小王")
    ctx = run(build_worker("info_filter", {}, env_for(server, store, language="zh")), user="小王")
    assert [node.content for node in ctx.informative_messages] == ["我每天晚上都弹吉他"]
    request = chats(server)[0].body["messages"]
    assert (
        request[-1]["content"].startswith("句子：")
        and "1 [2024-10-26 21:00:00 周六] 小王：我每天晚上都弹吉他" in request[-1]["content"]
    )
    assert "打分" in request[0]["content"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("1: 3\n2: 0\n3：2", {1: 3, 2: 0, 3: 2}),
        ("Thought: it is about music.\nResult: <1> <3>\nResult: <2> <0>", {1: 3, 2: 0}),
        ("[1] 2\n[2] 1", {1: 2, 2: 1}),
        ('```json\n[{"message": 1, "score": 3}, {"message": 2, "score": 1}]\n```', {1: 3, 2: 1}),
        ('{"1": 3, "2": "0"}', {1: 3, 2: 0}),
        ("1: 3\n1: 0", {1: 3}),  # the first answer for a number wins
        ("1 [2024-10-25 09:12:00 Fri] ann: hello", {}),  # an echoed prompt line is no score
        ("1: 7", {}),
        ("I cannot score these.", {}),
    ],
)
def test_parse_scores(reply: str, expected: dict[int, int]) -> None:
    assert parse_scores(reply) == expected
