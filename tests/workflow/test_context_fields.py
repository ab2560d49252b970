"""A capability declares its own context fields beside its workers: the plan check knows them, a
run starts from their default, parallel branches and the worker I/O check carry them, and the
core context holds none of MemoryOS's."""

from __future__ import annotations

from typing import ClassVar

import pytest

from memoryscope.context import CONTEXT_FIELDS, MemoryContext, context_extensions, context_field
from memoryscope.listing import memory_listing
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.memory_types import register_memory_type
from memoryscope.worker import Worker, WorkerParams
from memoryscope.workflow import WorkflowRunner, check_plan, parse_workflow

context_field("test_mood", "", "how the user sounds (a test plugin's detect_mood)", owner="test_plugin")


class DetectMood(Worker):
    reads: ClassVar[tuple[str, ...]] = ("query",)
    writes: ClassVar[tuple[str, ...]] = ("test_mood",)

    class Params(WorkerParams):
        pass

    def run(self, ctx: MemoryContext) -> None:
        ctx.test_mood = "cheerful" if "!" in ctx.query else "calm"


class Answer(Worker):
    reads: ClassVar[tuple[str, ...]] = ("test_mood",)
    writes: ClassVar[tuple[str, ...]] = ("result",)

    class Params(WorkerParams):
        pass

    def run(self, ctx: MemoryContext) -> None:
        ctx.result = f"you sound {ctx.test_mood}"


def workers() -> dict[str, Worker]:
    return {"detect_mood": DetectMood("detect_mood", DetectMood.Params()), "answer": Answer("answer", Answer.Params())}


def test_the_plan_check_knows_a_declared_field_and_points_at_context_field_for_others() -> None:
    assert "test_mood" in CONTEXT_FIELDS and context_extensions()["test_mood"].owner == "test_plugin"
    assert check_plan(parse_workflow("detect_mood,answer"), workers(), ("user_name", "query"), "op") == []
    [(_, message)] = check_plan(parse_workflow("answer"), workers(), ("user_name",), "op")
    assert "'test_mood'" in message  # read before anything writes it

    class Undeclared(Worker):
        writes: ClassVar[tuple[str, ...]] = ("zzqx_unheard_of",)

    [(_, problem)] = check_plan(parse_workflow("x"), {"x": Undeclared}, ("user_name",), "op")
    assert "not a MemoryContext field" in problem and "context_field" in problem


@pytest.mark.parametrize("checking", [False, True])
def test_a_run_starts_from_the_default_and_carries_the_field_through_branches(
    checking: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYSCOPE_CHECK_WORKER_IO", "1" if checking else "0")
    assert MemoryContext(user_name="ann").test_mood == ""
    runner = WorkflowRunner("op", parse_workflow("[detect_mood],answer"), workers())
    result = runner.run(MemoryContext(user_name="ann", query="I got the job!"))
    assert result.context.test_mood == "cheerful" and result.context.result == "you sound cheerful"
    assert MemoryContext(user_name="bob").test_mood == ""  # a new run starts from the default again


def test_a_field_cannot_shadow_the_core_or_another_owners_or_hold_a_mutable_default() -> None:
    with pytest.raises(ValueError, match="MemoryContext's own"):
        context_field("query", "", "x", owner="test_plugin")
    with pytest.raises(ValueError, match="declared already, by 'test_plugin'"):
        context_field("test_mood", "", "x", owner="someone_else")
    with pytest.raises(ValueError, match="immutable"):
        context_field("test_list", [], "x", owner="test_plugin")
    context_field("test_mood", "", "how the user sounds (a test plugin's detect_mood)", owner="test_plugin")  # again: fine


def test_the_core_context_holds_none_of_memoryos_fields() -> None:
    import dataclasses

    core = {item.name for item in dataclasses.fields(MemoryContext)}
    assert not core & {"short_term_pages", "mid_term_recall", "memoryos_update_due"}


TEST_MOOD_TYPE = register_memory_type(
    "test_mood_note", labels={"en": "mood notes", "zh": "情绪记录"}, order=35, owner="test_plugin"
)


class NoteMood(Worker):
    memory_types: ClassVar[tuple[str, ...]] = ("test_mood_note",)


def test_a_capability_registers_a_memory_type_that_the_plan_check_and_listings_know() -> None:
    assert MemoryType("test_mood_note") is TEST_MOOD_TYPE and TEST_MOOD_TYPE in MemoryType
    assert check_plan(parse_workflow("note"), {"note": NoteMood}, ("user_name",), "op") == []
    node = MemoryNode(user_name="ann", content="sounded cheerful", memory_type="test_mood_note")  # type: ignore[arg-type]
    insight = MemoryNode(user_name="ann", content="likes tea", memory_type=MemoryType.INSIGHT)
    shown = memory_listing([node, insight], "en", None).splitlines()
    assert [line for line in shown if line.startswith("-----")] == [
        "----- insight memory (1) -----",
        "----- mood notes (1) -----",
    ]
    with pytest.raises(ValueError, match="registered by 'test_plugin' already"):
        register_memory_type("test_mood_note", labels={"en": "other"}, owner="another_plugin")

    class NoteWeather(Worker):
        memory_types: ClassVar[tuple[str, ...]] = ("zzqx_weather_note",)

    [(_, problem)] = check_plan(parse_workflow("x"), {"x": NoteWeather}, ("user_name",), "op")
    assert "'zzqx_weather_note', which nobody registered" in problem and "register_memory_type" in problem
    with pytest.raises(ValueError, match="not a memory type; the types are: conversation"):
        MemoryType("zzqx_weather_note")
    read_back = MemoryNode.from_dict({**node.to_dict(), "memory_type": "zzqx_weather_note"})  # as a store holds it
    assert read_back.memory_type == "zzqx_weather_note" and "zzqx_weather_note" not in MemoryType
