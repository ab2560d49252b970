"""print_memory: time-stamped lines grouped by kind, with ids, in the configured language and zone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

from memoryscope.context import CALLER_FIELDS, MemoryContext
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.worker import WORKERS
from memoryscope.workflow import check_plan, parse_workflow

Make = Callable[..., MemoryNode]
SAID = datetime(2024, 10, 26, 13, 26, 20, tzinfo=timezone.utc)  # 21:26:20 on a Saturday in Shanghai


def memories(make_node: Make) -> tuple[MemoryNode, ...]:
    return (
        make_node("user plays the guitar", memory_id="obs1", message_time=SAID),
        make_node("user is a musician", memory_id="ins1", memory_type=MemoryType.INSIGHT, message_time=SAID),
        make_node("user plays the violin", memory_id="old1", status=MemoryStatus.EXPIRED, message_time=SAID),
        make_node("user went hiking", memory_id="obs2", event_time=datetime(2024, 10, 19, 2, tzinfo=timezone.utc)),
    )


def render(language: str, nodes: tuple[MemoryNode, ...]) -> str:
    worker = build_worker("print_memory", {}, make_env(language=language, timezone="Asia/Shanghai"))
    ctx = MemoryContext(user_name="ann", memories=nodes)
    worker.run(ctx)
    return ctx.result


def test_english_lines_grouped_by_kind_with_ids(make_node: Make) -> None:
    assert render("en", memories(make_node)) == (
        "----- insight memory (1) -----\n"
        "[2024-10-26 21:26:20 Sat] user is a musician (id: ins1)\n"
        "----- observation memory (2) -----\n"
        "[2024-10-26 21:26:20 Sat] user plays the guitar (id: obs1)\n"
        "[2024-10-19 10:00:00 Sat] user went hiking (id: obs2)\n"
        "----- expired memory (1) -----\n"
        "[2024-10-26 21:26:20 Sat] user plays the violin (id: old1)"
    )


def test_chinese_lines(make_node: Make) -> None:
    nodes = (
        make_node("用户爱好是吉他", memory_id="obs1", message_time=SAID),
        make_node("我每天练琴", memory_id="msg1", memory_type=MemoryType.CONVERSATION, message_time=SAID),
        make_node("用户喜欢绿茶", memory_id="add1", memory_type=MemoryType.OBS_CUSTOMIZED, message_time=SAID),
    )
    assert render("zh", nodes) == (
        "----- 自定义记忆 (1) -----\n"
        "[2024-10-26 21:26:20 周六] 用户喜欢绿茶 (id: add1)\n"
        "----- 观察记忆 (1) -----\n"
        "[2024-10-26 21:26:20 周六] 用户爱好是吉他 (id: obs1)\n"
        "----- 对话记忆 (1) -----\n"
        "[2024-10-26 21:26:20 周六] 我每天练琴 (id: msg1)"
    )


def test_no_memories_says_so() -> None:
    assert render("en", ()) == "No memories."
    assert render("zh", ()) == "暂无记忆。"


def test_listing_workflow_of_memoryscope_0_1_checks() -> None:
    """`set_query,retrieve_top_memory,print_memory`: retrieval gives print_memory its memories."""
    workers = {name: WORKERS.get(name) for name in ("set_query", "print_memory")}
    workers["retrieve_top_memory"] = WORKERS.get("retrieve_memory")
    plan = parse_workflow("set_query,retrieve_top_memory,print_memory", where="list_memory")
    assert check_plan(plan, workers, given=CALLER_FIELDS, where="list_memory") == []
