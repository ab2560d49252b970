"""update_memory: add, delete (only the user's own) and delete_all, with MemoryScope 0.1 names."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest

from memoryscope.context import MemoryContext
from memoryscope.errors import ConfigError, MemoryScopeError
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.builders import build_worker, make_env

Make = Callable[..., MemoryNode]
NOW = datetime(2024, 10, 26, 13, 26, 20, tzinfo=timezone.utc)


def updater(store: Any, method: str) -> Any:
    return build_worker("update_memory", {"method": method}, make_env(store=store))


@pytest.mark.parametrize("method", ["add", "from_query"])
def test_add_stores_customized_observations_said_at_query_time(store: Any, method: str) -> None:
    ctx = MemoryContext(user_name="ann", workspace="w", query_time=NOW, new_memories=("I like green tea", " "))
    updater(store, method).run(ctx)
    [node] = store.scan(MemoryFilter(user_name="ann", workspace="w"))
    assert (node.content, node.memory_type, node.message_time) == ("I like green tea", MemoryType.OBS_CUSTOMIZED, NOW)
    assert ctx.added_memory_ids == (node.memory_id,)
    assert ctx.result == "added 1 memory"


def test_add_without_new_memories_takes_the_query_like_0_1(store: Any) -> None:
    ctx = MemoryContext(user_name="ann", query=" I play the guitar ", query_time=NOW)
    updater(store, "add").run(ctx)
    assert [n.content for n in store.scan(MemoryFilter(user_name="ann"))] == ["I play the guitar"]


@pytest.mark.parametrize("method", ["delete", "delete_memory", "modify_action_status"])
def test_delete_removes_own_memories_and_refuses_another_users(store: Any, make_node: Make, method: str) -> None:
    mine = make_node("user plays the guitar")
    theirs = make_node("user plays the piano", user_name="bob")
    store.upsert([mine, theirs])
    ctx = MemoryContext(user_name="ann", memory_ids=(mine.memory_id, theirs.memory_id, "nope"))
    updater(store, method).run(ctx)
    assert store.get([mine.memory_id]) == []
    assert [n.content for n in store.get([theirs.memory_id])] == ["user plays the piano"]
    assert ctx.deleted_memory_ids == (mine.memory_id,) and ctx.deleted_count == 1
    assert ctx.unknown_memory_ids == (theirs.memory_id, "nope")
    assert theirs.memory_id in ctx.result and "nope" in ctx.result


def test_delete_refuses_same_user_in_another_workspace(store: Any, make_node: Make) -> None:
    elsewhere = make_node("user plays the guitar", workspace="other-assistant")
    store.upsert([elsewhere])
    ctx = MemoryContext(user_name="ann", memory_ids=(elsewhere.memory_id,))
    updater(store, "delete").run(ctx)
    assert len(store.get([elsewhere.memory_id])) == 1
    assert ctx.unknown_memory_ids == (elsewhere.memory_id,)


def test_delete_all_only_touches_this_user_target_and_workspace(store: Any, make_node: Make) -> None:
    store.upsert(
        [
            make_node("user plays the guitar"),
            make_node("user is a musician", memory_type=MemoryType.INSIGHT),
            make_node("user plays the piano", user_name="bob"),
            make_node("user likes tea", workspace="w2"),
        ]
    )
    ctx = MemoryContext(user_name="ann")
    updater(store, "delete_all").run(ctx)
    assert ctx.deleted_count == 2
    assert store.count(MemoryFilter(user_name="ann")) == 1
    assert store.count(MemoryFilter(user_name="bob")) == 1


def test_zh_result(store: Any) -> None:
    worker = build_worker("update_memory", {"method": "add"}, make_env(store=store, language="zh"))
    ctx = MemoryContext(user_name="ann", new_memories=("用户爱好是吉他",))
    worker.run(ctx)
    assert ctx.result == "添加了 1 条记忆"


def test_consolidation_writer_of_0_1_points_to_store_memory(store: Any) -> None:
    with pytest.raises(ConfigError, match=r"worker\.update_memory\.method: .*store_memory"):
        build_worker("update_memory", {"method": "from_memory_key"}, make_env(store=store))
    with pytest.raises(ConfigError, match=r"worker\.update_memory\.memory_key: .*store_memory"):
        build_worker("update_memory", {"method": "add", "memory_key": "all"}, make_env(store=store))


def test_unknown_method_and_unknown_key_are_rejected(store: Any) -> None:
    with pytest.raises(ConfigError, match=r"worker\.update_memory\.method"):
        build_worker("update_memory", {"method": "remove"}, make_env(store=store))
    with pytest.raises(ConfigError, match=r"worker\.update_memory\.mthod"):
        build_worker("update_memory", {"method": "add", "mthod": "add"}, make_env(store=store))


def test_add_refuses_an_over_long_memory_and_adds_nothing(store: Any) -> None:
    worker = build_worker("update_memory", {"method": "add", "max_memory_chars": 10}, make_env(store=store))
    ctx = MemoryContext(user_name="ann", new_memories=("short", "far too long a memory"))
    with pytest.raises(MemoryScopeError, match=r"memory 2 has 21 characters, more than `max_memory_chars` \(10\)"):
        worker.run(ctx)
    assert store.count(MemoryFilter(user_name="ann")) == 0
