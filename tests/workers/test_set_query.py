"""set_query: a trimmed query and a timezone-aware query time."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from memoryscope.context import MemoryContext, Message
from memoryscope.errors import ConfigError
from memoryscope.testing.builders import build_worker, make_env

SHANGHAI = ZoneInfo("Asia/Shanghai")


def test_trims_query_and_defaults_time_to_now_in_configured_zone() -> None:
    worker = build_worker("set_query", {}, make_env(timezone="Asia/Shanghai"))
    ctx = MemoryContext(user_name="ann", query="  what do I play?\n")
    worker.run(ctx)
    assert ctx.query == "what do I play?"
    assert ctx.query_time is not None and ctx.query_time.tzinfo == SHANGHAI
    assert abs(ctx.query_time - datetime.now(timezone.utc)) < timedelta(seconds=5)


def test_naive_time_is_read_in_configured_zone() -> None:
    worker = build_worker("set_query", {}, make_env(timezone="Asia/Shanghai"))
    ctx = MemoryContext(user_name="ann", query="tea?", query_time=datetime(2024, 10, 26, 21, 26, 20))
    worker.run(ctx)
    assert ctx.query_time == datetime(2024, 10, 26, 21, 26, 20, tzinfo=SHANGHAI)


def test_aware_time_keeps_its_instant_shown_in_configured_zone() -> None:
    worker = build_worker("set_query", {}, make_env(timezone="Asia/Shanghai"))
    ctx = MemoryContext(user_name="ann", query="tea?", query_time=datetime(2024, 10, 26, 13, 26, 20, tzinfo=timezone.utc))
    worker.run(ctx)
    assert ctx.query_time is not None
    assert ctx.query_time.tzinfo == SHANGHAI and ctx.query_time.hour == 21
    assert ctx.query_time == datetime(2024, 10, 26, 13, 26, 20, tzinfo=timezone.utc)


def test_without_query_uses_last_user_message_like_memoryscope_0_1() -> None:
    worker = build_worker("set_query", {}, make_env(timezone="UTC"))
    said = datetime(2024, 10, 26, 9, 0, tzinfo=timezone.utc)
    messages = (
        Message("user", "I play the guitar", said - timedelta(minutes=5)),
        Message("user", " what do I play? ", said),
        Message("assistant", "You play the guitar.", said + timedelta(seconds=1)),
    )
    ctx = MemoryContext(user_name="ann", messages=messages)
    worker.run(ctx)
    assert (ctx.query, ctx.query_time) == ("what do I play?", said)


def test_unknown_param_is_rejected_with_its_path() -> None:
    with pytest.raises(ConfigError, match=r"worker\.set_query\.top_k"):
        build_worker("set_query", {"top_k": 3}, make_env())
