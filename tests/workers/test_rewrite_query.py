"""rewrite_query: set_query, then a follow-up made standalone by the LLM with the chat's help.

The model is the real `openai_like` backend talking to the fake OpenAI-compatible server over
HTTP; every request it sends is recorded and checked.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.config import validate_config
from memoryscope.context import MemoryContext, Message
from memoryscope.errors import ConfigError
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.worker import Worker
from memoryscope.workers.rewrite_query import RewriteQueryWorker, parse_rewrite

SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = datetime(2024, 10, 26, 21, 26, 20, tzinfo=SHANGHAI)
HISTORY = (
    Message("user", "My sister Mary moved to Berlin last spring.", NOW - timedelta(minutes=2)),
    Message("assistant", "What a change! How is she finding it?", NOW - timedelta(minutes=1)),
)
FOLLOW_UP = "and what about her job?"
STANDALONE = "What is my sister Mary's job in Berlin?"


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default_reply="None") as fake:
        yield fake


def with_llm(server: FakeOpenAIServer, language: str = "en", **params: Any) -> Worker:
    model = OpenAILikeGeneration(
        OpenAILikeGeneration.Params(model_name="qwen", api_base=server.base_url, max_retries=0, timeout=5.0)
    )
    env = make_env(models={"generation_model": model}, timezone="Asia/Shanghai", language=language)
    return build_worker("rewrite_query", dict(params), env)


def run(worker: Worker, query: str = FOLLOW_UP, history: tuple[Message, ...] = HISTORY, **fields: Any) -> MemoryContext:
    fields.setdefault("user_name", "ann")
    fields.setdefault("query_time", NOW)
    ctx = MemoryContext(query=query, chat_history=history, **fields)
    worker.run(ctx)
    return ctx


def chats(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [request.body for request in server.requests if request.path.endswith("/chat/completions")]


def test_follow_up_is_rewritten_from_the_labelled_history(server: FakeOpenAIServer) -> None:
    server.add_rule(FOLLOW_UP, STANDALONE)
    worker = with_llm(server)
    assert isinstance(worker, RewriteQueryWorker)
    ctx = run(worker, query=f"  {FOLLOW_UP}\n")
    assert ctx.query == STANDALONE
    assert ctx.query_time == NOW
    [body] = chats(server)
    system, user = body["messages"]
    assert system["role"] == "system" and "None" in system["content"]
    assert user["content"] == (
        "Chat:\n"
        "ann: My sister Mary moved to Berlin last spring.\n"
        "Assistant: What a change! How is she finding it?\n"
        f"Question: {FOLLOW_UP}\n"
        "Rewrite:\n"
    )


def test_only_the_latest_messages_are_shown_and_a_named_speaker_keeps_its_name(server: FakeOpenAIServer) -> None:
    server.add_rule(FOLLOW_UP, STANDALONE)
    history = (
        Message("user", "I had pasta for lunch.", NOW - timedelta(hours=1)),
        Message("system", "You are a helpful assistant.", NOW - timedelta(minutes=3)),
        Message("user", "My sister Mary moved to Berlin.", NOW - timedelta(minutes=2), name="Annie"),
        Message("assistant", "   ", NOW - timedelta(seconds=90)),  # empty turns are not shown
        Message("assistant", "How is she finding it?", NOW - timedelta(minutes=1)),
    )
    run(with_llm(server), history=history)
    prompt = chats(server)[0]["messages"][-1]["content"]
    assert "Annie: My sister Mary moved to Berlin.\nAssistant: How is she finding it?\nQuestion:" in prompt
    assert "pasta" not in prompt and "helpful assistant" not in prompt
    server.clear_requests()
    run(with_llm(server, rewrite_history_count=5), history=history)
    assert "ann: I had pasta for lunch.\nAnnie: My sister" in chats(server)[0]["messages"][-1]["content"]


def test_the_current_turn_repeated_at_the_end_of_the_history_is_not_shown_twice(server: FakeOpenAIServer) -> None:
    history = (*HISTORY, Message("user", FOLLOW_UP, NOW))
    run(with_llm(server), history=history)
    prompt = chats(server)[0]["messages"][-1]["content"]
    assert prompt.count(FOLLOW_UP) == 1
    assert "ann: My sister Mary moved to Berlin last spring.\nAssistant:" in prompt


def test_long_messages_keep_their_head_and_tail(server: FakeOpenAIServer) -> None:
    long = "My sister Mary moved to Berlin " + "and so on " * 60 + "and she loves it."
    run(with_llm(server), history=(Message("user", long, NOW - timedelta(minutes=1)),))
    prompt = chats(server)[0]["messages"][-1]["content"]
    assert "ann: My sister Mary moved" in prompt and "and she loves it." in prompt and "…" in prompt
    assert "so on " * 30 not in prompt


@pytest.mark.parametrize("reply", ["None", "none.", '"None"', "None - the question stands alone.", "无", "“无”。", ""])
def test_no_rewrite_needed_or_an_empty_answer_keeps_the_query(server: FakeOpenAIServer, reply: str) -> None:
    server.add_rule(FOLLOW_UP, reply)
    ctx = run(with_llm(server), query=f" {FOLLOW_UP} ")
    assert ctx.query == FOLLOW_UP
    assert len(chats(server)) == 1


def test_labels_and_quotes_around_the_answer_are_stripped(server: FakeOpenAIServer) -> None:
    server.add_rule(FOLLOW_UP, f'Rewrite: "{STANDALONE}"\n')
    assert run(with_llm(server)).query == STANDALONE


def test_without_history_the_model_is_not_called(server: FakeOpenAIServer) -> None:
    server.add_rule(FOLLOW_UP, STANDALONE)
    assert run(with_llm(server), history=()).query == FOLLOW_UP
    only_system = (Message("system", "Be brief.", NOW),)
    assert run(with_llm(server), history=only_system).query == FOLLOW_UP
    assert server.requests == []


def test_rewrite_history_count_zero_turns_rewriting_off(server: FakeOpenAIServer) -> None:
    server.add_rule(FOLLOW_UP, STANDALONE)
    assert run(with_llm(server, rewrite_history_count=0)).query == FOLLOW_UP
    assert server.requests == []


def test_an_empty_query_is_not_sent_to_the_model(server: FakeOpenAIServer) -> None:
    ctx = run(with_llm(server), query="   ")
    assert ctx.query == "" and ctx.query_time == NOW
    assert server.requests == []


def test_a_failed_call_keeps_the_query_and_warns_once(server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    server.fail_next(status=500)
    with caplog.at_level(logging.WARNING, logger="memoryscope.workers.rewrite_query"):
        ctx = run(with_llm(server))
    assert ctx.query == FOLLOW_UP and ctx.query_time == NOW
    assert len(server.requests) == 1 and server.requests[0].status == 500
    [record] = [r for r in caplog.records if r.name == "memoryscope.workers.rewrite_query"]
    assert record.levelno == logging.WARNING and "rewrite call failed" in record.getMessage()


def test_the_api_key_never_reaches_the_warning(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWRITE_TEST_KEY", "sk-rewrite-secret-9876")
    with FakeOpenAIServer(api_key="sk-rewrite-secret-9876") as server:
        model = OpenAILikeGeneration(
            OpenAILikeGeneration.Params(
                model_name="qwen", api_base=server.base_url, api_key_env="REWRITE_TEST_KEY", max_retries=0, timeout=5.0
            )
        )
        worker = build_worker("rewrite_query", {}, make_env(models={"generation_model": model}))
        server.fail_next(status=401, body='{"error": {"message": "bad key sk-rewrite-secret-9876"}}')
        with caplog.at_level(logging.WARNING, logger="memoryscope.workers.rewrite_query"):
            assert run(worker).query == FOLLOW_UP
        assert server.requests[0].api_key_suffix == "9876"  # the key was sent, so the failure is real
    assert "rewrite call failed" in caplog.text
    assert "sk-rewrite-secret" not in caplog.text


def test_chinese_prompt_when_the_language_is_zh(server: FakeOpenAIServer) -> None:
    server.add_rule("那她在那边做什么工作", "改写：我妹妹小丽在上海做什么工作？")
    history = (
        Message("user", "我妹妹小丽去年搬到了上海。", NOW - timedelta(minutes=2)),
        Message("assistant", "她适应得怎么样？", NOW - timedelta(minutes=1)),
    )
    ctx = run(with_llm(server, language="zh"), query="那她在那边做什么工作？", history=history, user_name="小王")
    assert ctx.query == "我妹妹小丽在上海做什么工作？"
    system, user = chats(server)[0]["messages"]
    assert "回答“无”" in system["content"]
    assert user["content"] == (
        "对话：\n小王：我妹妹小丽去年搬到了上海。\n助手：她适应得怎么样？\n问题：那她在那边做什么工作？\n改写：\n"
    )


def test_generation_model_kwargs_go_with_the_call(server: FakeOpenAIServer) -> None:
    run(with_llm(server, generation_model_kwargs={"temperature": 0.0, "max_tokens": 64}))
    [body] = chats(server)
    assert body["temperature"] == 0.0 and body["max_tokens"] == 64


def test_without_a_generation_model_it_is_set_query() -> None:
    env = make_env(timezone="Asia/Shanghai")
    plain, rewriting = build_worker("set_query", {}, env), build_worker("rewrite_query", {}, env)
    said = datetime(2024, 10, 26, 13, 0, tzinfo=timezone.utc)
    cases = [
        {"query": f"  {FOLLOW_UP}\n", "query_time": datetime(2024, 10, 26, 21, 0)},  # naive: read in the zone
        {"query": "tea?", "query_time": said},
        {"messages": (Message("user", "I play the guitar", said), Message("user", " what do I play? ", said))},
    ]
    for fields in cases:
        expected, got = MemoryContext(user_name="ann", **fields), MemoryContext(user_name="ann", chat_history=HISTORY, **fields)
        plain.run(expected)
        rewriting.run(got)
        assert (got.query, got.query_time) == (expected.query, expected.query_time)
        assert got.query_time is not None and got.query_time.tzinfo == SHANGHAI
    assert got.query == "what do I play?" and got.query_time == said


def test_a_query_taken_from_the_last_user_message_is_rewritten_too(server: FakeOpenAIServer) -> None:
    server.add_rule(FOLLOW_UP, STANDALONE)
    said = NOW - timedelta(seconds=5)
    ctx = run(with_llm(server), query="", query_time=None, messages=(Message("user", FOLLOW_UP, said),))
    assert (ctx.query, ctx.query_time) == (STANDALONE, said)


def test_reads_and_writes_extend_set_query() -> None:
    assert RewriteQueryWorker.reads == ("query", "query_time", "messages", "chat_history")
    assert RewriteQueryWorker.writes == ("query", "query_time")
    assert RewriteQueryWorker.needs_generation_model is False


def test_bad_params_are_rejected_with_their_path() -> None:
    with pytest.raises(ConfigError, match=r"worker\.rewrite_query\.rewrite_history_cnt"):
        build_worker("rewrite_query", {"rewrite_history_cnt": 3}, make_env())
    with pytest.raises(ConfigError, match=r"worker\.rewrite_query\.rewrite_history_count"):
        build_worker("rewrite_query", {"rewrite_history_count": -1}, make_env())


def replacement_config(tmp_path: Path, workflow: str) -> dict[str, Any]:
    """MemoryScope 0.1.1's examples/advance/replacement.yaml, cut to what retrieval needs."""
    return {
        "global": {"language": "en", "timezone": "Asia/Shanghai"},
        "model": {
            "generation_model": {
                "class": "llama_index_generation_model",
                "module_name": "openai_like",
                "model_name": "qwen",
                "api_base": "http://127.0.0.1:9/v1",
            },
            "embedding_model": {"class": "llama_index_embedding_model", "module_name": "local_embedding"},
            "rank_model": {"class": "llama_index_rank_model", "module_name": "fusion_rank", "model_name": "fusion"},
        },
        "memory_store": {"class": "sqlite_memory_store", "path": str(tmp_path / "m.db"), "embedding_model": "embedding_model"},
        "worker": {
            "rewrite_query": {"class": "rewrite_query", "generation_model": "generation_model", "rewrite_history_count": 4},
            "extract_time": {"class": "extract_time", "generation_model": "generation_model"},
            "retrieve_obs_ins": {"class": "retrieve_memory", "retrieve_obs_top_k": 50},
            "semantic_rank": {"class": "semantic_rank", "rank_model": "rank_model"},
            "fuse_rerank": {"class": "fuse_rerank"},
        },
        "memory_service": {"memoryscope_service": {"memory_operations": {"retrieve_memory": {"workflow": workflow}}}},
    }


def test_replaces_set_query_at_the_head_of_retrieve_memory(tmp_path: Path) -> None:
    workflow = "rewrite_query,[extract_time|retrieve_obs_ins,semantic_rank],fuse_rerank"
    config = validate_config(replacement_config(tmp_path, workflow))
    assert config.workers["rewrite_query"].cls is RewriteQueryWorker
    plan = config.services["memoryscope_service"].operations["retrieve_memory"].plan
    assert plan.canonical() == workflow
    broken = replacement_config(tmp_path, workflow)
    broken["worker"]["rewrite_query"]["rewrite_history_cnt"] = 3
    with pytest.raises(ConfigError, match=r"worker\.rewrite_query\.rewrite_history_cnt"):
        validate_config(broken)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("What does my sister do?", "What does my sister do?"),
        ('Rewrite: "What does my sister do?"', "What does my sister do?"),
        ("Rewritten question:\n  What does my sister do?\n", "What does my sister do?"),
        ("```\nWhat does my sister do?\n```", "What does my sister do?"),
        ("<think>she is Mary</think>\nWhat does Mary do?", "What does Mary do?"),
        ("改写：我妹妹做什么工作？", "我妹妹做什么工作？"),
        ("None", None),
        ("NONE!", None),
        ("'none'", None),
        ("None - it stands alone.", None),
        ("无", None),
        ("“无”。", None),
        ("N/A", None),
        ("None of my friends like jazz?", "None of my friends like jazz?"),  # a question, not the word None
        ("无人机是在哪里买的？", "无人机是在哪里买的？"),
        ("", ""),
        ("Rewrite:", ""),
    ],
)
def test_parse_rewrite(reply: str, expected: str | None) -> None:
    assert parse_rewrite(reply) == expected
