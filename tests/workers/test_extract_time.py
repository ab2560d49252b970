"""extract_time: rules place the query's time; an LLM is asked only about vague time words.

The LLM path talks to the fake OpenAI-compatible server over real HTTP through the real
`openai_like` backend.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from memoryscope.context import MemoryContext
from memoryscope.errors import ConfigError
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.stores.base import TimeRange
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.worker import Worker
from memoryscope.workers.extract_time import parse_date_range

SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = datetime(2024, 10, 26, 21, 26, 20, tzinfo=SHANGHAI)  # a Saturday


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=SHANGHAI)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default_reply="{}") as fake:
        yield fake


def with_llm(server: FakeOpenAIServer, language: str = "en", **params: object) -> Worker:
    model = OpenAILikeGeneration(
        OpenAILikeGeneration.Params(model_name="qwen", api_base=server.base_url, max_retries=0, timeout=5.0)
    )
    env = make_env(models={"generation_model": model}, timezone="Asia/Shanghai", language=language)
    return build_worker("extract_time", dict(params), env)


def run(worker: Worker, query: str, query_time: datetime | None = NOW) -> MemoryContext:
    ctx = MemoryContext(user_name="ann", query=query, query_time=query_time)
    worker.run(ctx)
    return ctx


def chats(server: FakeOpenAIServer) -> list[dict[str, object]]:
    return [request.body for request in server.requests if request.path.endswith("/chat/completions")]


def test_rules_set_the_event_time_range_without_an_llm() -> None:
    worker = build_worker("extract_time", {}, make_env(timezone="Asia/Shanghai"))
    ctx = run(worker, "what did I do last Saturday?")
    assert ctx.time_range == TimeRange("event_time", day("2024-10-19"), day("2024-10-20"))


def test_chinese_query_in_an_english_configured_system() -> None:
    worker = build_worker("extract_time", {}, make_env(timezone="Asia/Shanghai", language="en"))
    assert run(worker, "我三周前去了哪里？").time_range == TimeRange("event_time", day("2024-09-30"), day("2024-10-07"))


def test_query_time_is_read_in_the_configured_zone() -> None:
    """01:00 on the 27th in Shanghai is still the 26th in UTC: "yesterday" is the Shanghai one."""
    worker = build_worker("extract_time", {}, make_env(timezone="Asia/Shanghai"))
    utc_time = datetime(2024, 10, 26, 17, 0, tzinfo=timezone.utc)
    assert run(worker, "what did I eat yesterday?", utc_time).time_range == TimeRange(
        "event_time", day("2024-10-26"), day("2024-10-27")
    )
    naive = datetime(2024, 10, 27, 1, 0)
    assert run(worker, "what did I eat yesterday?", naive).time_range == TimeRange(
        "event_time", day("2024-10-26"), day("2024-10-27")
    )


def test_missing_query_time_means_now() -> None:
    worker = build_worker("extract_time", {}, make_env(timezone="Asia/Shanghai"))
    time_range = run(worker, "what did I do today?", None).time_range
    assert time_range is not None and time_range.start is not None and time_range.end is not None
    assert time_range.start <= datetime.now(SHANGHAI) < time_range.end


def test_no_time_word_gives_none_and_no_llm_call(server: FakeOpenAIServer) -> None:
    worker = with_llm(server)
    assert run(worker, "what is my favourite food?").time_range is None
    assert run(worker, "").time_range is None
    assert chats(server) == []


def test_rules_win_over_the_llm(server: FakeOpenAIServer) -> None:
    worker = with_llm(server)
    assert run(worker, "what did I do yesterday?").time_range == TimeRange("event_time", day("2024-10-25"), day("2024-10-26"))
    assert chats(server) == []


def test_vague_time_word_asks_the_llm(server: FakeOpenAIServer) -> None:
    server.add_rule("around the holidays", 'Sure!\n```json\n{"start": "2023-12-20", "end": "2024-01-02"}\n```')
    worker = with_llm(server)
    ctx = run(worker, "what did I do around the holidays?")
    assert ctx.time_range == TimeRange("event_time", day("2023-12-20"), day("2024-01-03"))  # end day included
    [body] = chats(server)
    messages = body["messages"]
    assert isinstance(messages, list)
    assert "JSON" in messages[0]["content"]
    assert messages[1]["content"] == "Now: 2024-10-26 21:26 (Saturday)\nQuestion: what did I do around the holidays?\n"


def test_chinese_prompt_when_the_language_is_zh(server: FakeOpenAIServer) -> None:
    server.add_rule("前阵子", json.dumps({"start": "2024-09-01", "end": "2024-09-30"}))
    worker = with_llm(server, language="zh")
    assert run(worker, "我前阵子去了哪里？").time_range == TimeRange("event_time", day("2024-09-01"), day("2024-10-01"))
    [body] = chats(server)
    messages = body["messages"]
    assert isinstance(messages, list)
    assert "只回复一个 JSON 对象" in messages[0]["content"]
    assert "现在：2024-10-26 21:26（星期六）" in messages[1]["content"]


@pytest.mark.parametrize("reply", ["{}", "I cannot tell.", '{"start": "sometime"}', "[1, 2]", '{"start": "2024-02-30"}'])
def test_unusable_llm_reply_gives_none(server: FakeOpenAIServer, reply: str) -> None:
    server.add_rule("recently", reply)
    worker = with_llm(server)
    assert run(worker, "what did I buy recently?").time_range is None
    assert len(chats(server)) == 1


def test_failed_llm_call_gives_none_without_raising(server: FakeOpenAIServer) -> None:
    server.fail_next(status=500)
    worker = with_llm(server)
    assert run(worker, "what did I buy recently?").time_range is None
    assert len(server.requests) == 1


def test_llm_fallback_can_be_turned_off(server: FakeOpenAIServer) -> None:
    worker = with_llm(server, use_llm_fallback=False)
    assert run(worker, "what did I buy recently?").time_range is None
    assert chats(server) == []


def test_without_a_configured_llm_vague_words_give_none() -> None:
    worker = build_worker("extract_time", {}, make_env(timezone="Asia/Shanghai"))
    assert run(worker, "what did I buy recently?").time_range is None


def test_unknown_param_is_rejected_with_its_path() -> None:
    with pytest.raises(ConfigError, match=r"worker\.extract_time\.use_llm"):
        build_worker("extract_time", {"use_llm": True}, make_env())


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"start": "2024-10-01", "end": "2024-10-15"}', ("2024-10-01", "2024-10-16")),
        ('```json\n{"start": "2024-10-01", "end": "2024-10-15"}\n```', ("2024-10-01", "2024-10-16")),
        ('The range is {"start": "2024-10-15T00:00:00", "end": "2024-10-01"}.', ("2024-10-01", "2024-10-16")),  # swapped
        ('{"start": "2024-10-01"}', ("2024-10-01", "2024-10-02")),  # one date is that day
        ("start: 2024-10-01, end: 2024-10-03", ("2024-10-01", "2024-10-04")),  # no JSON at all
        ("{}", None),
        ("", None),
        ('{"start": 20241001}', None),
    ],
)
def test_parse_date_range(reply: str, expected: tuple[str, str] | None) -> None:
    parsed = parse_date_range(reply, SHANGHAI)
    assert parsed == (None if expected is None else (day(expected[0]), day(expected[1])))
