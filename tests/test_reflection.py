"""reflect_and_reconsolidate end to end: observations in the store become insights; old facts expire.

The workflow is MemoryScope 0.1's string, run by the real workflow runner over workers built
from dicts (as the YAML would build them), a real SQLite store with the offline embedding
model, the real `fusion_rank` ranker, and the real `openai_like` backend talking over HTTP to
the fake server, which answers from a script that reads the prompts (see `ReflectionScript`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.config import load_config
from memoryscope.context import CALLER_FIELDS, MemoryContext
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.models.rank.fusion_rank import FusionRank
from memoryscope.stores.base import MemoryFilter
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.testing.reflection_script import ReflectionScript
from memoryscope.workers._insight import insight_id
from memoryscope.workflow import RunResult, WorkflowRunner, parse_workflow, validate_plan

SHANGHAI = ZoneInfo("Asia/Shanghai")
LAST_YEAR = datetime(2023, 5, 1, 20, 0, tzinfo=SHANGHAI)
THIS_MONTH = datetime(2024, 10, 1, 20, 0, tzinfo=SHANGHAI)
WORKFLOW = "load_obs_and_insight,get_reflection_subject,update_insight,long_contra_repeat,store_memory"
# The worker section of a config, as YAML would give it (MemoryScope 0.1's keys).
WORKERS: dict[str, dict[str, Any]] = {
    "load_obs_and_insight": {"class": "load_memory", "retrieve_not_reflected_top_k": 100, "retrieve_insight_top_k": 100},
    "get_reflection_subject": {
        "class": "get_reflection_subject",
        "generation_model": "generation_model",
        "reflect_obs_cnt_threshold": 6,
    },
    "update_insight": {
        "class": "update_insight",
        "generation_model": "generation_model",
        "rank_model": "rank_model",
        "embedding_model": "embedding_model",
        "update_insight_threshold": 0.5,
    },
    "long_contra_repeat": {
        "class": "long_contra_repeat",
        "generation_model": "generation_model",
        "long_contra_repeat_threshold": 0.5,
    },
    "store_memory": {"class": "store_memory"},
}
NEW_EN = [
    "user plays the guitar every evening",
    "user works as a nurse at Ruijin Hospital",
    "user has a cat named Mimi",
    "user is vegetarian and cooks tofu a lot",
    "user moved to Hangzhou last month",
    "user practises guitar solos on weekends",
]
NEW_ZH = [
    "用户每天晚上弹吉他",
    "用户在瑞金医院当护士",
    "用户养了一只叫咪咪的猫",
    "用户吃素，经常做豆腐",
    "用户上个月搬到了杭州",
    "用户周末练吉他独奏",
]


def script_for(language: str) -> ReflectionScript:
    script = ReflectionScript(language=language)
    if language == "en":
        for word, attribute, value in [
            ("guitar", "hobby", "playing the guitar"),
            ("nurse", "job", "nurse at Ruijin Hospital"),
            ("cat", "pet", "a cat named Mimi"),
            ("vegetarian", "diet", "vegetarian"),
            ("Hangzhou", "home city", "Hangzhou"),
        ]:
            script.subject(word, attribute)
            script.value(attribute, word, value)
        script.verdict("Beijing", "moved to Hangzhou", "contradiction")
    else:
        for word, attribute, value in [
            ("吉他", "爱好", "弹吉他"),
            ("护士", "职业", "瑞金医院护士"),
            ("猫", "宠物", "一只叫咪咪的猫"),
            ("吃素", "饮食偏好", "素食"),
            ("杭州", "居住城市", "杭州"),
        ]:
            script.subject(word, attribute)
            script.value(attribute, word, value)
        script.verdict("北京", "搬到了杭州", "矛盾")
    return script


@dataclass
class Memory:
    """One user's memory: the store, the reflect_and_reconsolidate runner, the scripted model."""

    store: SqliteMemoryStore
    runner: WorkflowRunner
    script: ReflectionScript
    server: FakeOpenAIServer
    user: str = "user"

    def seed(self, texts: list[str], start: datetime, reflected: bool, **fields: Any) -> list[MemoryNode]:
        nodes = [
            MemoryNode(
                user_name=self.user, content=text, message_time=start + timedelta(hours=index), reflected=reflected, **fields
            )
            for index, text in enumerate(texts)
        ]
        self.store.upsert(nodes)
        return nodes

    def reflect(self) -> RunResult:
        return self.runner.run(MemoryContext(user_name=self.user))

    def insights(self) -> dict[str, MemoryNode]:
        found = self.store.scan(MemoryFilter(self.user, memory_types=(MemoryType.INSIGHT,), status=MemoryStatus.VALID))
        return {node.key: node for node in found}

    def get(self, node: MemoryNode) -> MemoryNode:
        (found,) = self.store.get([node.memory_id])
        return found

    def chats(self) -> int:
        return sum(request.path.endswith("/chat/completions") for request in self.server.requests)


@pytest.fixture
def memory_for(server: FakeOpenAIServer, embedding: LocalEmbedding, tmp_path: Path) -> Iterator[Any]:
    opened: list[tuple[SqliteMemoryStore, WorkflowRunner]] = []

    def make(language: str = "en", user: str = "user", **settings: Any) -> Memory:
        store = SqliteMemoryStore(path=tmp_path / f"memories-{len(opened)}.db", embedding_model=embedding)
        model = OpenAILikeGeneration(OpenAILikeGeneration.Params(model_name="qwen", api_base=server.base_url, max_retries=0))
        ranker = FusionRank(FusionRank.Params(vector_weight=0.6, keyword_weight=0.35, recency_weight=0.05))
        models = {"generation_model": model, "rank_model": ranker, "embedding_model": embedding}
        env = make_env(store=store, models=models, timezone="Asia/Shanghai", language=language, **settings)
        workers = {
            name: build_worker(str(entry["class"]), {k: v for k, v in entry.items() if k != "class"}, env, name=name)
            for name, entry in WORKERS.items()
        }
        where = "memory_service.memoryscope_service.memory_operations.reflect_and_reconsolidate.workflow"
        plan = parse_workflow(WORKFLOW, where)
        validate_plan(plan, workers, CALLER_FIELDS, where)
        runner = WorkflowRunner("reflect_and_reconsolidate", plan, workers)
        opened.append((store, runner))
        script = script_for(language)
        script.install(server)
        return Memory(store, runner, script, server, user)

    yield make
    for store, runner in opened:
        runner.close()
        store.close()


def seed_history(memory: Memory, language: str = "en") -> dict[str, Any]:
    """Last year's facts (reflected), the insight they gave, and this month's new observations."""
    if language == "en":
        beijing, tea = memory.seed(["user lives in Beijing near the Summer Palace", "user likes green tea"], LAST_YEAR, True)
        (home,) = memory.seed(
            ["user's home city: Beijing"], LAST_YEAR, False, memory_type="insight", key="home city", value="Beijing"
        )
        fresh = memory.seed(NEW_EN, THIS_MONTH, False)
    else:
        beijing, tea = memory.seed(["用户住在北京颐和园附近", "用户喜欢喝绿茶"], LAST_YEAR, True)
        (home,) = memory.seed(["用户的居住城市：北京"], LAST_YEAR, False, memory_type="insight", key="居住城市", value="北京")
        fresh = memory.seed(NEW_ZH, THIS_MONTH, False)
    return {"beijing": beijing, "tea": tea, "home": home, "fresh": fresh}


def test_observations_become_insights_old_facts_expire_and_a_second_run_waits(memory_for: Any) -> None:
    memory = memory_for()
    seeded = seed_history(memory)
    result = memory.reflect()

    assert result.stopped == "" and memory.chats() == 3
    insights = memory.insights()
    assert {key: node.value for key, node in insights.items()} == {
        "hobby": "playing the guitar",
        "job": "nurse at Ruijin Hospital",
        "pet": "a cat named Mimi",
        "diet": "vegetarian",
        "home city": "Hangzhou",
    }
    hobby = insights["hobby"]
    assert hobby.content == "user's hobby: playing the guitar" and hobby.memory_id == insight_id("user", "", "", "hobby")
    home = insights["home city"]
    assert (home.memory_id, home.content, home.updated) == (seeded["home"].memory_id, "user's home city: Hangzhou", True)
    moved = seeded["fresh"][4]
    old_beijing = memory.get(seeded["beijing"])
    assert (old_beijing.status, old_beijing.superseded_by) == (MemoryStatus.EXPIRED, moved.memory_id)
    assert memory.get(seeded["tea"]).status is MemoryStatus.VALID
    assert all(memory.get(node).reflected for node in seeded["fresh"])
    assert "updated 5 insights" in result.context.result and "reflected on 6 observations" in result.context.result

    again = memory.reflect()
    assert again.stopped == "only 0 new observations; reflecting at 6"
    assert memory.chats() == 3 and memory.insights() == insights


def test_chinese_reflection(memory_for: Any) -> None:
    memory = memory_for("zh", user="用户")
    seeded = seed_history(memory, "zh")
    memory.reflect()
    insights = memory.insights()
    assert insights["爱好"].content == "用户的爱好：弹吉他"
    assert insights["宠物"].content == "用户的宠物：一只叫咪咪的猫"
    assert (insights["居住城市"].memory_id, insights["居住城市"].content) == (seeded["home"].memory_id, "用户的居住城市：杭州")
    assert memory.get(seeded["beijing"]).superseded_by == seeded["fresh"][4].memory_id
    assert memory.chats() == 3


@pytest.mark.parametrize("count", [6, 30])
def test_llm_calls_per_run_do_not_grow_with_the_observations(count: int, memory_for: Any) -> None:
    memory = memory_for()
    seed_history(memory)
    memory.seed(
        [f"user read chapter {index} of a sailing novel" for index in range(count - 6)], THIS_MONTH + timedelta(days=3), False
    )
    memory.reflect()
    assert memory.chats() == 3
    assert memory.insights()["job"].value == "nurse at Ruijin Hospital"


def test_garbage_is_repaired_and_garbage_twice_skips_only_that_step(memory_for: Any) -> None:
    memory = memory_for()
    seeded = seed_history(memory)
    memory.script.garbage("get_reflection_subject", 1)  # repaired
    memory.script.garbage("update_insight", 2)  # unreadable twice: no insight values this run
    memory.script.garbage("long_contra_repeat", 1)  # repaired
    result = memory.reflect()
    assert memory.script.calls == {"get_reflection_subject": 2, "update_insight": 2, "long_contra_repeat": 2}
    # No insight value was read, so none is stored; the old home city, left as it was, is now
    # contradicted by the move (the next reflection names the attribute afresh).
    assert memory.insights() == {}
    assert memory.get(seeded["home"]).superseded_by == seeded["fresh"][4].memory_id
    assert sorted(result.context.details["update_insight"]["skipped"]) == ["diet", "hobby", "home city", "job", "pet"]
    # The rest of the run is stored: the contradiction, and the observations marked reflected.
    assert memory.get(seeded["beijing"]).status is MemoryStatus.EXPIRED
    assert all(memory.get(node).reflected for node in seeded["fresh"])


def test_without_long_contra_repeat_nothing_expires_and_no_call_is_made(memory_for: Any) -> None:
    memory = memory_for(enable_long_contra_repeat=False)
    seeded = seed_history(memory)
    memory.reflect()
    assert memory.script.calls == {"get_reflection_subject": 1, "update_insight": 1}
    assert memory.get(seeded["beijing"]).status is MemoryStatus.VALID
    assert memory.insights()["home city"].value == "Hangzhou"


LEGACY_CONFIG = """
global: {language: en, enable_ranker: true, enable_long_contra_repeat: true}
memory_service:
  memoryscope_service:
    class: core.service.memory_scope_service
    memory_operations:
      reflect_and_reconsolidate:
        class: core.operation.backend_operation
        workflow: load_obs_and_insight,get_reflection_subject,update_insight,long_contra_repeat,store_memory
        interval_time: 15
worker:
  store_memory: {class: core.worker.backend.update_memory_worker, method: from_memory_key, memory_key: all}
  load_obs_and_insight:
    class: core.worker.backend.load_memory_worker
    retrieve_not_reflected_top_k: 100
    retrieve_not_updated_top_k: 100
    retrieve_insight_top_k: 100
  get_reflection_subject:
    class: core.worker.backend.get_reflection_subject_worker
    generation_model: generation_model
    reflect_obs_cnt_threshold: 10
  update_insight:
    class: core.worker.backend.update_insight_worker
    generation_model: generation_model
    rank_model: rank_model
    embedding_model: embedding_model
    update_insight_threshold: 0.5
  long_contra_repeat:
    class: core.worker.backend.long_contra_repeat_worker
    generation_model: generation_model
    long_contra_repeat_threshold: 0.5
model:
  generation_model: {class: core.models.llama_index_generation_model, module_name: openai_generation, model_name: gpt-4o-mini}
  embedding_model:
    class: core.models.llama_index_embedding_model
    module_name: openai_embedding
    model_name: text-embedding-3-small
  rank_model: {class: core.models.llama_index_rank_model, module_name: dashscope_rank, model_name: gte-rerank, top_n: 500}
memory_store:
  class: core.storage.llama_index_es_memory_store
  embedding_model: embedding_model
  es_url: http://localhost:9200
"""


def test_a_memoryscope_01_reflection_config_loads(tmp_path: Path) -> None:
    path = tmp_path / "legacy.yaml"
    path.write_text(LEGACY_CONFIG, encoding="utf-8")
    config = load_config(path, environ={})
    workers = config.workers
    assert workers["get_reflection_subject"].params.reflect_obs_cnt_threshold == 10  # type: ignore[attr-defined]
    assert workers["update_insight"].params.update_insight_threshold == 0.5  # type: ignore[attr-defined]
    assert workers["long_contra_repeat"].params.long_contra_repeat_threshold == 0.5  # type: ignore[attr-defined]
    operation = config.services["memoryscope_service"].operations["reflect_and_reconsolidate"]
    assert operation.plan.step_names() == tuple(WORKFLOW.split(","))
