"""load_memory: today's memories, the unreflected observations and the insights, from a real store."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.context import MemoryContext
from memoryscope.errors import ConfigError
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.worker import Worker

SHANGHAI = ZoneInfo("Asia/Shanghai")
EVENING = datetime(2024, 10, 26, 21, 0, tzinfo=SHANGHAI)
Make = Callable[..., MemoryNode]


def loader(store: Any, **params: Any) -> Worker:
    return build_worker("load_memory", params, make_env(store=store, timezone="Asia/Shanghai"), name="load_today_memory")


def pending(said: datetime) -> MemoryNode:
    return MemoryNode(user_name="ann", content="a message", memory_type=MemoryType.CONVERSATION, message_time=said)


def contents(nodes: tuple[MemoryNode, ...]) -> list[str]:
    return [node.content for node in nodes]


def test_today_is_the_day_the_pending_messages_were_said_in_the_configured_zone(store: Any, make_node: Make) -> None:
    store.upsert(
        [
            make_node("said this morning", message_time=EVENING - timedelta(hours=12)),
            make_node("said just after midnight", message_time=datetime(2024, 10, 25, 16, 30, tzinfo=timezone.utc)),
            make_node("said the day before", message_time=EVENING - timedelta(days=1)),
            make_node("added by hand today", memory_type=MemoryType.OBS_CUSTOMIZED, created_at=EVENING - timedelta(hours=1)),
            make_node("consolidated today, said last week", message_time=EVENING - timedelta(days=7), created_at=EVENING),
            make_node("expired today", message_time=EVENING, status=MemoryStatus.EXPIRED),
            make_node("an insight from today", memory_type=MemoryType.INSIGHT, message_time=EVENING),
            make_node("a message from today", memory_type=MemoryType.CONVERSATION, message_time=EVENING),
            make_node("bob's memory from today", user_name="bob", message_time=EVENING),
        ]
    )
    ctx = MemoryContext(user_name="ann", pending_messages=(pending(EVENING),))
    loader(store, retrieve_today_top_k=50).run(ctx)
    assert contents(ctx.today_memories) == ["added by hand today", "said this morning", "said just after midnight"]
    assert ctx.unreflected_observations == () and ctx.insights == ()  # not asked for: left alone


def test_a_batch_said_over_two_days_compares_with_both_days(store: Any, make_node: Make) -> None:
    store.upsert(
        [
            make_node("from the 24th", message_time=EVENING - timedelta(days=2)),
            make_node("from the 25th", message_time=EVENING - timedelta(days=1)),
            make_node("from the 26th", message_time=EVENING),
        ]
    )
    ctx = MemoryContext(user_name="ann", pending_messages=(pending(EVENING), pending(EVENING - timedelta(days=2))))
    loader(store, retrieve_today_top_k=50).run(ctx)
    assert contents(ctx.today_memories) == ["from the 26th", "from the 24th"]


def test_without_pending_messages_today_is_the_query_day_or_now(store: Any, make_node: Make) -> None:
    store.upsert(
        [
            make_node("from the 25th", message_time=EVENING - timedelta(days=1)),
            make_node("said now", message_time=datetime.now(SHANGHAI)),
        ]
    )
    by_query = MemoryContext(user_name="ann", query_time=EVENING - timedelta(days=1))
    loader(store, retrieve_today_top_k=50).run(by_query)
    assert contents(by_query.today_memories) == ["from the 25th"]
    now = MemoryContext(user_name="ann")
    loader(store, retrieve_today_top_k=50).run(now)
    assert contents(now.today_memories) == ["said now"]


def test_today_is_cut_at_top_k_newest_first(store: Any, make_node: Make) -> None:
    store.upsert([make_node(f"fact {i}", message_time=EVENING - timedelta(minutes=i)) for i in range(6)])
    ctx = MemoryContext(user_name="ann", pending_messages=(pending(EVENING),))
    loader(store, retrieve_today_top_k=2).run(ctx)
    assert contents(ctx.today_memories) == ["fact 0", "fact 1"]


def test_unreflected_observations_oldest_first_and_valid_insights(store: Any, make_node: Make) -> None:
    store.upsert(
        [
            make_node("newer unreflected", created_at=EVENING),
            make_node("older unreflected", created_at=EVENING - timedelta(days=3)),
            make_node("customized unreflected", memory_type=MemoryType.OBS_CUSTOMIZED, created_at=EVENING - timedelta(days=1)),
            make_node("already reflected", reflected=True),
            make_node("expired unreflected", status=MemoryStatus.EXPIRED),
            make_node("hobby: guitar", memory_type=MemoryType.INSIGHT, key="hobby", value="guitar", created_at=EVENING),
            make_node(
                "job: nurse", memory_type=MemoryType.INSIGHT, key="job", value="nurse", created_at=EVENING - timedelta(days=1)
            ),
            make_node("old job", memory_type=MemoryType.INSIGHT, status=MemoryStatus.EXPIRED),
        ]
    )
    ctx = MemoryContext(user_name="ann")
    loader(store, retrieve_not_reflected_top_k=2, retrieve_insight_top_k=10).run(ctx)
    assert contents(ctx.unreflected_observations) == ["older unreflected", "customized unreflected"]
    assert contents(ctx.insights) == ["hobby: guitar", "job: nurse"]
    assert ctx.today_memories == ()
    assert ctx.details["load_today_memory"] == {"today": None, "unreflected": 2, "insights": 2}


def test_memoryscope_0_1_keys(store: Any, make_node: Make) -> None:
    store.upsert([make_node("unreflected")])
    ctx = MemoryContext(user_name="ann")
    loader(store, retrieve_not_updated_top_k=100).run(ctx)  # 0.1's not-updated list: loaded as the unreflected
    assert contents(ctx.unreflected_observations) == ["unreflected"]
    with pytest.raises(ConfigError, match=r"worker\.load_today_memory.*nothing would be loaded"):
        loader(store)
    with pytest.raises(ConfigError, match=r"worker\.load_today_memory\.retrieve_today_topk"):
        loader(store, retrieve_today_topk=5)
