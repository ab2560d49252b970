"""What a model writes is cleaned, capped and typed before it becomes a memory (issue 10, 4 and 6).

The model is the real `openai_like` backend on the fake server, answering with control
characters, ANSI escapes, right-to-left overrides, huge and oddly typed values, and dates that
are unparseable or out of range. Every run must succeed, store clean text, and report what it
skipped or dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.context import MemoryContext
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.models.rank.fusion_rank import FusionRank
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.worker import Worker
from memoryscope.workers.extract_time import parse_date_range

SHANGHAI = ZoneInfo("Asia/Shanghai")
SAID = datetime(2024, 10, 26, 21, 26, 20, tzinfo=SHANGHAI)
# Whatever must never reach a memory: C0/C1 controls, DEL, escape sequences, bidi controls.
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
DIRTY = "ann\x00 plays\x07 the \x1b[31mguitar\x1b[0m \u202eevery\u202c evening\x9b2J"
CLEAN = "ann plays the guitar every evening"
Make = Callable[..., MemoryNode]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default_reply="Sorry, I cannot help with that request.") as fake:
        yield fake


@pytest.fixture
def llm(server: FakeOpenAIServer) -> OpenAILikeGeneration:
    return OpenAILikeGeneration(
        OpenAILikeGeneration.Params(model_name="qwen", api_base=server.base_url, max_retries=0, timeout=5)
    )


def worker(llm: OpenAILikeGeneration, name: str, store: Any = None, **params: Any) -> Worker:
    models = {"generation_model": llm, "rank_model": FusionRank()}
    return build_worker(name, params, make_env(store=store, models=models, timezone="Asia/Shanghai"))


def message(text: str) -> MemoryNode:
    return MemoryNode(
        user_name="ann", content=text, memory_type=MemoryType.CONVERSATION, message_time=SAID,
        memory_id=f"msg-{abs(hash(text)) % 10**8}", meta={"role": "user"},
    )  # fmt: skip


def observe(llm: OpenAILikeGeneration, name: str, *texts: str) -> MemoryContext:
    ctx = MemoryContext(user_name="ann", informative_messages=tuple(message(text) for text in texts))
    worker(llm, name).run(ctx)
    return ctx


def test_observation_text_and_keywords_are_cleaned_and_typed(server: FakeOpenAIServer, llm: OpenAILikeGeneration) -> None:
    items = [
        {"message": 1, "content": DIRTY, "keywords": ["guitar\x1b[1m", 7, {"x": 1}, "music\u202e"]},
        {"message": 1, "content": "\x1b[2J\x07\x00", "keywords": "nothing left"},  # only control characters
        {"message": 1, "content": "ann sings " + "la " * 400, "keywords": "singing"},  # 1.2 KB: no fact
        {"message": 1, "content": "ann has a cat", "keywords": "cat " * 200},
    ]
    server.add_rule("Messages:", json.dumps(items))
    ctx = observe(llm, "get_observation", "I play the guitar every evening and I have a cat")
    guitar, cat = ctx.observations
    assert (guitar.content, guitar.value) == (CLEAN, "guitar, 7, music")
    assert cat.content == "ann has a cat" and len(cat.value) <= 200 and not UNSAFE.search(cat.value)
    reasons = [entry["reason"] for entry in ctx.details["get_observation"]["skipped"]]
    assert reasons == ["no usable content", "too long"]
    assert all(not UNSAFE.search(entry["item"]) for entry in ctx.details["get_observation"]["skipped"])


@pytest.mark.parametrize(
    ("llm_time", "problem"),
    [("0001-01-01", "out of range"), ("99999-01-01", "out of range"), ("2024-13-45", "not a date")],
)
def test_a_bad_model_date_drops_only_the_time_and_is_reported(
    server: FakeOpenAIServer, llm: OpenAILikeGeneration, llm_time: str, problem: str
) -> None:
    """In Asia/Shanghai (east of UTC) 0001-01-01 used to raise OverflowError; 99999 was read as 9999."""
    items = [{"message": 1, "content": "ann is learning Japanese", "keywords": "Japanese", "time": llm_time}]
    server.add_rule("Messages (each with the time", json.dumps(items))
    ctx = observe(llm, "get_observation_with_time", "Recently I started learning Japanese")
    (japanese,) = ctx.timed_observations  # an observation without a valid time is still an observation
    assert japanese.content == "ann is learning Japanese" and japanese.event_time is None
    (dropped,) = ctx.details["get_observation_with_time"]["dropped_times"]
    assert dropped["time"] == llm_time and problem in dropped["reason"]
    assert dropped["memory_id"] == japanese.memory_id


def test_a_good_model_date_still_places_the_fact(server: FakeOpenAIServer, llm: OpenAILikeGeneration) -> None:
    items = [{"message": 1, "content": "ann is learning Japanese", "keywords": "Japanese", "time": "2024-10-01"}]
    server.add_rule("Messages (each with the time", json.dumps(items))
    ctx = observe(llm, "get_observation_with_time", "Recently I started learning Japanese")
    (japanese,) = ctx.timed_observations
    assert japanese.event_time == datetime(2024, 10, 1, tzinfo=SHANGHAI)
    assert ctx.details["get_observation_with_time"]["dropped_times"] == []


def observations(make_node: Make) -> tuple[MemoryNode, ...]:
    texts = ("user plays the guitar every evening", "user lives in Hangzhou", "user has a cat named Mimi")
    start = datetime(2024, 10, 1, 20, 0, tzinfo=SHANGHAI)
    return tuple(
        make_node(text, user_name="user", message_time=start + timedelta(days=index), source_message_ids=(f"m{index}",))
        for index, text in enumerate(texts)
    )


def test_insight_values_are_cleaned_capped_and_typed(
    make_node: Make, store: Any, llm: OpenAILikeGeneration, server: FakeOpenAIServer
) -> None:
    huge = "guitar and " * 2000  # 22 KB
    answer = {
        "hobby": "\x1b[31mplaying\x07 the guitar\u202e\x00",
        "favourite music": huge,
        "home": ["Hangzhou", ["Zhejiang", "China"]],
        "pet": {"value": {"name": "Mimi", "kind": "cat"}},
        "lucky number": 42,
    }
    server.add_rule("Attributes of user", json.dumps(answer))
    ctx = MemoryContext(
        user_name="user",
        unreflected_observations=observations(make_node),
        insight_subjects=("hobby", "favourite music", "home", "pet", "lucky number"),
    )
    worker(llm, "update_insight", store, update_insight_threshold=-1.0).run(ctx)  # every fact for every key
    found = {node.key: node for node in ctx.updated_insights}
    assert found["hobby"].value == "playing the guitar"
    assert found["hobby"].content == "user's hobby: playing the guitar"
    assert len(found["favourite music"].value) <= 300 and found["favourite music"].value.startswith("guitar and")
    assert found["home"].value == "Hangzhou, Zhejiang, China"
    assert found["pet"].value == "name: Mimi; kind: cat"
    assert found["lucky number"].value == "42"
    assert all(not UNSAFE.search(node.content + node.key + node.value) for node in ctx.updated_insights)
    assert ctx.details["update_insight"]["truncated"] == ["favourite music"]


def test_insight_subjects_are_cleaned(make_node: Make, llm: OpenAILikeGeneration, server: FakeOpenAIServer) -> None:
    server.add_rule("New attributes", json.dumps(["\x1b[31mhobby\x1b[0m", "pet\u202e\x07", ["nested"], "\x00\x1b[2J"]))
    many = tuple(make_node(f"user fact number {index}", user_name="user") for index in range(6))
    ctx = MemoryContext(user_name="user", unreflected_observations=many)
    worker(llm, "get_reflection_subject").run(ctx)
    assert ctx.insight_subjects == ("hobby", "pet")


@pytest.mark.parametrize("reply", ['{"start": "0001-01-01", "end": "0001-01-03"}', '{"start": "9999-12-31"}',
                                   '{"start": "99999-01-01"}'])  # fmt: skip
def test_extract_time_ignores_out_of_range_model_dates(reply: str) -> None:
    assert parse_date_range(reply, SHANGHAI) is None


def test_extract_time_worker_survives_an_extreme_model_date(server: FakeOpenAIServer, llm: OpenAILikeGeneration) -> None:
    server.add_rule("recently", '{"start": "0001-01-01", "end": "9999-12-31"}')
    ctx = MemoryContext(user_name="ann", query="what did I do recently?", query_time=SAID)
    worker(llm, "extract_time").run(ctx)
    assert ctx.time_range is None


def test_a_message_said_at_the_end_of_the_calendar_does_not_fail_the_worker(
    server: FakeOpenAIServer, llm: OpenAILikeGeneration
) -> None:
    """A message said on 9999-12-30: "tomorrow" is beyond what datetime holds: it places nothing, no OverflowError."""
    items = [{"message": 1, "content": "ann will fly to Paris", "keywords": "Paris", "time": "9999-12-31"}]
    server.add_rule("Messages", json.dumps(items))
    said = datetime(9999, 12, 30, 12, 0, tzinfo=SHANGHAI)
    text = "Tomorrow I fly to Paris, recently booked"
    ctx = MemoryContext(user_name="ann", informative_messages=(message(text).replace(message_time=said),))
    worker(llm, "get_observation_with_time").run(ctx)
    (paris,) = ctx.timed_observations
    (dropped,) = ctx.details["get_observation_with_time"]["dropped_times"]
    assert paris.event_time is None and "out of range" in dropped["reason"]
