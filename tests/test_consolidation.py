"""consolidate_memory end to end: messages in, observations in the store, nothing lost, nothing twice.

The workflow is MemoryScope 0.1's string, run by the real workflow runner over workers built
from dicts (as the YAML would build them), a real SQLite store with the offline embedding
model, and the real `openai_like` backend talking over HTTP to the fake server, which answers
from a script that reads the prompts' numbered lines (see `ConsolidationScript`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.context import CALLER_FIELDS, MemoryContext, Message
from memoryscope.errors import ModelError, WorkerError
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.stores.base import MemoryFilter
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.workflow import RunResult, WorkflowRunner, parse_workflow, validate_plan

SHANGHAI = ZoneInfo("Asia/Shanghai")
MORNING = datetime(2024, 10, 26, 9, 0, tzinfo=SHANGHAI)  # a Saturday
EVENING = datetime(2024, 10, 26, 21, 26, 20, tzinfo=SHANGHAI)
WORKFLOW = "info_filter,[get_observation|get_observation_with_time|load_today_memory],contra_repeat,store_memory"
# The worker section of a config, as YAML would give it.
WORKERS: dict[str, dict[str, Any]] = {
    "info_filter": {"class": "info_filter", "generation_model": "generation_model", "preserved_scores": "2,3"},
    "get_observation": {"class": "get_observation", "generation_model": "generation_model"},
    "get_observation_with_time": {"class": "get_observation_with_time", "generation_model": "generation_model"},
    "load_today_memory": {"class": "load_memory", "retrieve_today_top_k": 50},
    "contra_repeat": {"class": "contra_repeat", "generation_model": "generation_model", "contra_repeat_max_count": 50},
    "store_memory": {"class": "store_memory"},
}


def build_runner(store: Any, api_base: str, language: str = "en", **info_filter: Any) -> WorkflowRunner:
    """The consolidate_memory runner over `store`, with its LLM at `api_base` (and `info_filter`
    params set over its own). The killed subprocess below imports this module to build the very
    same runner."""
    model = OpenAILikeGeneration(OpenAILikeGeneration.Params(model_name="qwen", api_base=api_base, max_retries=0, timeout=30.0))
    env = make_env(store=store, models={"generation_model": model}, timezone="Asia/Shanghai", language=language)
    entries = {**WORKERS, "info_filter": {**WORKERS["info_filter"], **info_filter}}
    workers = {
        name: build_worker(str(entry["class"]), {k: v for k, v in entry.items() if k != "class"}, env, name=name)
        for name, entry in entries.items()
    }
    plan = parse_workflow(WORKFLOW, "memory_service.consolidate_memory.workflow")
    validate_plan(plan, workers, CALLER_FIELDS, "memory_service.consolidate_memory.workflow")
    return WorkflowRunner("consolidate_memory", plan, workers)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@dataclass
class Memory:
    """One user's memory: a store, the runner, and the messages told so far."""

    store: SqliteMemoryStore
    runner: WorkflowRunner
    user: str
    server: FakeOpenAIServer

    def tell(self, *texts: str, start: datetime = EVENING, role: str = "user") -> None:
        messages = tuple(Message(role, text, start + timedelta(minutes=i)) for i, text in enumerate(texts))
        reader = build_worker("read_message", {}, make_env(store=self.store, timezone="Asia/Shanghai"))
        reader.run(MemoryContext(user_name=self.user, messages=messages))

    def consolidate(self) -> RunResult:
        return self.runner.run(MemoryContext(user_name=self.user))

    def nodes(self, memory_type: MemoryType, **conditions: Any) -> list[MemoryNode]:
        found = self.store.scan(MemoryFilter(user_name=self.user, memory_types=(memory_type,), **conditions), limit=1000)
        return sorted(found, key=lambda node: node.content)

    def observation(self, content: str) -> MemoryNode:
        (node,) = [node for node in self.nodes(MemoryType.OBSERVATION) if node.content == content]
        return node

    def chats(self) -> int:
        return sum(request.path.endswith("/chat/completions") for request in self.server.requests)


@pytest.fixture
def memory_for(server: FakeOpenAIServer, embedding: LocalEmbedding, tmp_path: Path) -> Iterator[Any]:
    opened: list[tuple[SqliteMemoryStore, WorkflowRunner]] = []

    def make(user: str, language: str = "en") -> Memory:
        store = SqliteMemoryStore(path=tmp_path / "memories.db", embedding_model=embedding)
        runner = build_runner(store, server.base_url, language)
        opened.append((store, runner))
        return Memory(store, runner, user, server)

    yield make
    for store, runner in opened:
        runner.close()
        store.close()


def english_script(server: FakeOpenAIServer) -> ConsolidationScript:
    script = ConsolidationScript(user="ann")
    script.say("I love coffee, I have a cup every morning", 3, [("ann likes coffee", "coffee, drink")])
    script.say("I live in Hangzhou", 3, [("ann lives in Hangzhou", "Hangzhou, home")])
    script.say("What's the weather like today?", 0)
    script.say("Can you write me a poem about autumn?", 1)
    script.say(
        "I went hiking last Saturday", 3, [("ann went hiking in the Western Hills", "hiking, Western Hills", "2024-10-19")]
    )
    script.say("I don't drink coffee any more, doctor's orders", 3, [("ann does not drink coffee any more", "coffee")])
    script.say("I live in Hangzhou, China by the way", 3, [("ann lives in Hangzhou, China", "Hangzhou")])
    script.say("I play the guitar every evening", 3, [("ann plays the guitar every evening", "guitar, music")])
    script.say(
        "Yesterday my daughter started piano lessons",
        3,
        [("ann's daughter started piano lessons", "daughter, piano", "2024-10-25")],
    )
    script.say("Thanks!", 0)
    script.verdict("ann does not drink coffee any more", "contradict", "ann likes coffee")
    script.verdict("ann lives in Hangzhou, China", "repeat", "ann lives in Hangzhou")
    script.install(server)
    return script


MORNING_TALK = ("I love coffee, I have a cup every morning", "I live in Hangzhou", "What's the weather like today?",
                "Can you write me a poem about autumn?")  # fmt: skip
EVENING_TALK = ("I went hiking last Saturday", "I don't drink coffee any more, doctor's orders",
                "I live in Hangzhou, China by the way", "I play the guitar every evening",
                "Yesterday my daughter started piano lessons", "Thanks!")  # fmt: skip


def test_a_day_of_english_conversation(server: FakeOpenAIServer, memory_for: Any) -> None:
    english_script(server)
    memory = memory_for("ann")
    memory.tell(*MORNING_TALK, start=MORNING)
    memory.tell("Sunny, about 20°C.", start=MORNING + timedelta(seconds=30), role="assistant")
    first = memory.consolidate()
    assert first.context.result == "stored 2 observations, consolidated 5 messages"
    assert memory.chats() == 3  # nothing in the morning says when: no get_observation_with_time call

    memory.tell(*EVENING_TALK)
    second = memory.consolidate()
    assert second.context.result == "stored 4 observations, expired 1, consolidated 6 messages"
    assert memory.chats() == 3 + 4

    coffee = memory.observation("ann likes coffee")
    no_coffee = memory.observation("ann does not drink coffee any more")
    assert coffee.status is MemoryStatus.EXPIRED and coffee.superseded_by == no_coffee.memory_id
    assert no_coffee.status is MemoryStatus.VALID and no_coffee.event_time is None
    hiking = memory.observation("ann went hiking in the Western Hills")
    assert hiking.event_time == datetime(2024, 10, 19, tzinfo=SHANGHAI) and hiking.message_time == EVENING
    assert hiking.value == "hiking, Western Hills" and hiking.meta["time_source"] == "rules"
    piano = memory.observation("ann's daughter started piano lessons")
    assert piano.event_time == datetime(2024, 10, 25, tzinfo=SHANGHAI)
    assert [node.content for node in memory.nodes(MemoryType.OBSERVATION, status=MemoryStatus.VALID)] == [
        "ann does not drink coffee any more",
        "ann lives in Hangzhou",  # the evening's "Hangzhou, China" was a repeat
        "ann plays the guitar every evening",
        "ann went hiking in the Western Hills",
        "ann's daughter started piano lessons",
    ]
    (hiking_message,) = [node for node in memory.nodes(MemoryType.CONVERSATION) if node.content == "I went hiking last Saturday"]
    assert hiking.source_message_ids == (hiking_message.memory_id,)
    assert memory.nodes(MemoryType.CONVERSATION, reflected=False) == []
    assert len(memory.nodes(MemoryType.CONVERSATION, reflected=True)) == 11
    assert hiking.format("en", SHANGHAI) == "[2024-10-19 00:00:00 Sat] ann went hiking in the Western Hills"

    before = {node.memory_id: node for node in memory.store.scan(MemoryFilter(user_name="ann"), limit=1000)}
    third = memory.consolidate()
    assert third.stopped == "no new messages" and memory.chats() == 7
    after = {node.memory_id: node for node in memory.store.scan(MemoryFilter(user_name="ann"), limit=1000)}
    assert after == before


def test_a_day_of_chinese_conversation(server: FakeOpenAIServer, memory_for: Any) -> None:
    script = ConsolidationScript(user="小王", language="zh")
    script.say("我很喜欢喝咖啡，每天早上一杯", 3, [("小王喜欢喝咖啡", "咖啡")])
    script.say("我上周六去西山爬山了", 3, [("小王去西山爬山", "爬山, 西山", "2024-10-19")])
    script.say("我已经不喝咖啡了，医生不让喝", 3, [("小王不再喝咖啡了", "咖啡")])
    script.say("我每天晚上都弹吉他", 3, [("小王每天晚上弹吉他", "吉他, 爱好")])
    script.say("今天天气怎么样？", 0)
    script.verdict("小王不再喝咖啡了", "contradict", "小王喜欢喝咖啡")
    script.install(server)
    memory = memory_for("小王", language="zh")
    memory.tell("我很喜欢喝咖啡，每天早上一杯", start=MORNING)
    assert memory.consolidate().context.result == "保存了 1 条观察，整理了 1 条消息"
    memory.tell("我上周六去西山爬山了", "我已经不喝咖啡了，医生不让喝", "我每天晚上都弹吉他", "今天天气怎么样？")
    result = memory.consolidate()
    assert result.context.result == "保存了 3 条观察，过期 1 条，整理了 4 条消息"
    coffee, no_coffee = memory.observation("小王喜欢喝咖啡"), memory.observation("小王不再喝咖啡了")
    assert coffee.status is MemoryStatus.EXPIRED and coffee.superseded_by == no_coffee.memory_id
    hiking = memory.observation("小王去西山爬山")
    assert hiking.event_time == datetime(2024, 10, 19, tzinfo=SHANGHAI) and hiking.value == "爬山, 西山"
    assert hiking.format("zh", SHANGHAI) == "[2024-10-19 00:00:00 周六] 小王去西山爬山"
    assert memory.nodes(MemoryType.CONVERSATION, reflected=False) == []
    assert memory.consolidate().stopped == "no new messages"


@pytest.mark.parametrize("count", [5, 20])
def test_the_number_of_llm_calls_does_not_grow_with_the_messages(server: FakeOpenAIServer, memory_for: Any, count: int) -> None:
    script = ConsolidationScript(user="ann")
    texts = []
    for i in range(count):
        timed = i % 2 == 0
        text = f"Last Saturday I tried dish number {i}" if timed else f"I like dish number {i}"
        script.say(text, 3, [(f"ann {'tried' if timed else 'likes'} dish number {i}", "dish", "")])
        texts.append(text)
    script.install(server)
    memory = memory_for("ann")
    memory.tell(*texts)
    result = memory.consolidate()
    assert memory.chats() == 4
    assert dict(script.calls) == {"info_filter": 1, "get_observation": 1, "get_observation_with_time": 1, "contra_repeat": 1}
    assert len(memory.nodes(MemoryType.OBSERVATION)) == count
    assert result.context.details["info_filter"]["informative"] == count


def test_malformed_answers_are_repaired_once_each(server: FakeOpenAIServer, memory_for: Any) -> None:
    script = english_script(server)
    for worker in ("info_filter", "get_observation", "get_observation_with_time", "contra_repeat"):
        script.garbage(worker, 1)
    memory = memory_for("ann")
    memory.tell(*MORNING_TALK, start=MORNING)
    memory.tell(*EVENING_TALK)
    result = memory.consolidate()
    assert memory.chats() == 8  # every call once more, with the repair instruction
    assert result.context.result == "stored 5 observations, expired 1, consolidated 10 messages"


def test_an_answer_malformed_twice_keeps_its_messages_pending_and_the_rest_goes_on(
    server: FakeOpenAIServer, memory_for: Any
) -> None:
    script = english_script(server)
    script.garbage("get_observation_with_time", 2)
    memory = memory_for("ann")
    memory.tell(*EVENING_TALK)
    result = memory.consolidate()
    skipped = result.context.unreadable_timed_message_ids
    assert len(skipped) == 2  # "last Saturday" and "Yesterday": their facts are skipped
    assert [node.content for node in memory.nodes(MemoryType.OBSERVATION)] == [
        "ann does not drink coffee any more",
        "ann lives in Hangzhou, China",
        "ann plays the guitar every evening",
    ]
    # their messages are not lost: they stay pending, the failure noted, for a later run
    waiting = memory.nodes(MemoryType.CONVERSATION, reflected=False)
    assert sorted(node.memory_id for node in waiting) == sorted(skipped)
    assert all(node.meta["consolidation_failures"] == 1 and "unreadable" in node.meta["consolidation_error"] for node in waiting)
    said = result.context.result
    assert said.endswith(")") and "consolidated 4 messages; 2 message(s) wait: 2 backing off until " in said, said
    assert "(last error: worker store_memory: the facts drawn from this message stayed unreadable" in said


def test_a_failing_endpoint_fails_the_run_and_stores_nothing(server: FakeOpenAIServer, memory_for: Any) -> None:
    english_script(server)
    memory = memory_for("ann")
    memory.tell(*EVENING_TALK)
    server.fail_next(100, status=500)
    with pytest.raises(WorkerError, match="worker 'info_filter'") as failure:
        memory.consolidate()
    assert isinstance(failure.value.cause, ModelError)
    assert memory.nodes(MemoryType.OBSERVATION) == []
    assert len(memory.nodes(MemoryType.CONVERSATION, reflected=False)) == 6
    server.clear_faults()
    assert memory.consolidate().context.result == "stored 5 observations, consolidated 6 messages"


def test_a_failure_after_the_first_calls_stores_nothing_either(server: FakeOpenAIServer, memory_for: Any) -> None:
    script = english_script(server)
    script.after("info_filter", lambda: server.fail_next(1, status=503))  # a later call of this run fails
    memory = memory_for("ann")
    memory.tell(*EVENING_TALK)
    with pytest.raises(WorkerError) as failure:
        memory.consolidate()
    assert failure.value.worker != "info_filter" and isinstance(failure.value.cause, ModelError)
    assert memory.nodes(MemoryType.OBSERVATION) == []
    assert len(memory.nodes(MemoryType.CONVERSATION, reflected=False)) == 6


_KILLED_RUN = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[3])
    from test_consolidation import build_runner
    from memoryscope.context import MemoryContext
    from memoryscope.models.embedding.local_embedding import LocalEmbedding
    from memoryscope.stores.sqlite_store import SqliteMemoryStore

    store = SqliteMemoryStore(path=sys.argv[1], embedding_model=LocalEmbedding())
    runner = build_runner(store, sys.argv[2])
    print("consolidating", flush=True)
    runner.run(MemoryContext(user_name="ann"))
    print("finished", flush=True)
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_run_killed_midway_loses_nothing_and_the_rerun_adds_nothing_twice(
    server: FakeOpenAIServer, memory_for: Any, tmp_path: Path
) -> None:
    script = english_script(server)
    memory = memory_for("ann")
    memory.tell(*MORNING_TALK, start=MORNING)
    memory.tell(*EVENING_TALK)
    reached = script.hold("contra_repeat")
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_WAIT_POLICY": "PASSIVE"}
    process = subprocess.Popen(
        [sys.executable, "-c", _KILLED_RUN, str(tmp_path / "memories.db"), server.base_url, str(Path(__file__).parent)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        if not reached.wait(timeout=60):
            process.kill()
            _, errors = process.communicate()
            pytest.fail(f"the subprocess never reached contra_repeat: {errors.decode()[-2000:]}")
        process.send_signal(signal.SIGKILL)  # in the middle of the run: its LLM call is still open
        process.wait(timeout=10)
    finally:
        script.release()
        if process.poll() is None:
            process.kill()
        process.communicate()
    assert process.returncode == -signal.SIGKILL
    assert memory.nodes(MemoryType.OBSERVATION) == []
    assert len(memory.nodes(MemoryType.CONVERSATION, reflected=False)) == 10

    result = memory.consolidate()  # the next run redoes the whole batch
    assert result.context.result == "stored 5 observations, expired 1, consolidated 10 messages"
    contents = [node.content for node in memory.nodes(MemoryType.OBSERVATION)]
    assert len(contents) == len(set(contents)) == 6
    assert memory.observation("ann likes coffee").status is MemoryStatus.EXPIRED
    assert memory.consolidate().stopped == "no new messages"
    assert len(memory.nodes(MemoryType.OBSERVATION)) == 6


def test_a_memoryscope_0_1_config_runs_the_same_workflow(server: FakeOpenAIServer, tmp_path: Path) -> None:
    from memoryscope.app import MemoryScope

    english_script(server)
    config = {
        "global": {"language": "en", "timezone": "Asia/Shanghai", "enable_today_contra_repeat": True},
        "model": {
            "generation_model": {
                "class": "llama_index_generation_model",
                "module_name": "openai_like",
                "model_name": "qwen",
                "api_base": server.base_url,
                "max_retries": 0,
            },
            "embedding_model": {"class": "llama_index_embedding_model", "module_name": "local_embedding"},
        },
        "memory_store": {
            "class": "sqlite_memory_store",
            "path": str(tmp_path / "legacy.db"),
            "embedding_model": "embedding_model",
        },
        "worker": {
            "read_message": {"class": "core.worker.frontend.read_message_worker"},
            "info_filter": {
                "class": "core.worker.backend.info_filter_worker",
                "generation_model": "generation_model",
                "preserved_scores": "2,3",
                "info_filter_msg_max_size": 200,
            },
            "get_observation": {"class": "core.worker.backend.get_observation_worker", "generation_model": "generation_model"},
            "get_observation_with_time": {
                "class": "core.worker.backend.get_observation_with_time_worker",
                "generation_model": "generation_model",
            },
            "load_today_memory": {"class": "core.worker.backend.load_memory_worker", "retrieve_today_top_k": 100},
            "contra_repeat": {"class": "core.worker.backend.contra_repeat_worker", "generation_model": "generation_model"},
            "store_memory": {
                "class": "core.worker.backend.update_memory_worker",
                "method": "from_memory_key",
                "memory_key": "all",
            },
        },
        "memory_service": {
            "memoryscope_service": {
                "class": "core.service.memory_scope_service",
                "memory_operations": {
                    "read_message": {"class": "core.operation.frontend_operation", "workflow": "read_message"},
                    "consolidate_memory": {"class": "core.operation.consolidate_memory_op", "workflow": WORKFLOW},
                },
            }
        },
    }
    with MemoryScope(config=config) as memoryscope:
        service = memoryscope.default_service
        said = tuple(Message("user", text, EVENING + timedelta(minutes=i)) for i, text in enumerate(EVENING_TALK))
        service.run_operation("read_message", "ann", messages=said)
        result = service.run_operation("consolidate_memory", "ann")
        assert result.context.result == "stored 5 observations, consolidated 6 messages"
        assert service.run_operation("consolidate_memory", "ann").stopped == "no new messages"


def test_two_users_consolidating_at_once_never_see_each_others_memories(server: FakeOpenAIServer, memory_for: Any) -> None:
    script = ConsolidationScript(user="user")
    script.say("I keep bees on my roof", 3, [("user keeps bees", "bees")])
    script.say("I play the oboe", 3, [("user plays the oboe", "oboe")])
    script.say("I collect old maps", 3, [("user collects old maps", "maps")])
    script.say("I grow tomatoes", 3, [("user grows tomatoes", "tomatoes")])
    script.install(server)
    ann, bob = memory_for("ann"), memory_for("bob")
    ann.tell("I keep bees on my roof", "I play the oboe")
    bob.tell("I collect old maps", "I grow tomatoes")

    results: dict[str, RunResult] = {}
    threads = [threading.Thread(target=lambda m=m: results.__setitem__(m.user, m.consolidate())) for m in (ann, bob)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert set(results) == {"ann", "bob"}
    assert [node.content for node in ann.nodes(MemoryType.OBSERVATION)] == ["user keeps bees", "user plays the oboe"]
    assert [node.content for node in bob.nodes(MemoryType.OBSERVATION)] == ["user collects old maps", "user grows tomatoes"]
    for memory in (ann, bob):
        everything = memory.store.scan(MemoryFilter(user_name=memory.user), limit=1000)
        assert {node.user_name for node in everything} == {memory.user}
        pending = MemoryFilter(user_name=memory.user, memory_types=(MemoryType.CONVERSATION,), reflected=False)
        assert memory.store.count(pending) == 0
