"""store_memory: everything a backend workflow decided, in one atomic write to a real store."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from memoryscope.context import MemoryContext
from memoryscope.errors import WorkerError
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType, utc_now
from memoryscope.models.base import EmbeddingModel
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.worker import Worker
from memoryscope.workflow import WorkflowRunner, parse_workflow

SHANGHAI = ZoneInfo("Asia/Shanghai")
EVENING = datetime(2024, 10, 26, 21, 0, tzinfo=SHANGHAI)
LONG_AGO = EVENING - timedelta(days=30)
Make = Callable[..., MemoryNode]


def storer(store: Any, language: str = "en") -> Worker:
    return build_worker("store_memory", {}, make_env(store=store, timezone="Asia/Shanghai", language=language))


def message(text: str, make_node: Make) -> MemoryNode:
    return make_node(text, memory_type=MemoryType.CONVERSATION, message_time=EVENING, updated_at=LONG_AGO, meta={"role": "user"})


def test_one_write_stores_observations_expires_and_marks_messages_consolidated(store: Any, make_node: Make) -> None:
    messages = (message("I don't drink coffee any more", make_node), message("Nice weather", make_node))
    old = make_node("ann likes coffee", updated_at=LONG_AGO)
    store.upsert([*messages, old])
    new = make_node("ann does not drink coffee", message_time=EVENING, source_message_ids=(messages[0].memory_id,))
    ctx = MemoryContext(
        user_name="ann",
        pending_messages=messages,
        new_observations=(new,),
        expired_memories=(old.replace(status=MemoryStatus.EXPIRED, superseded_by=new.memory_id),),
    )
    before = utc_now()
    storer(store).run(ctx)
    assert ctx.result == "stored 1 observation, expired 1, consolidated 2 messages"
    stored = {node.memory_id: node for node in store.scan(MemoryFilter(user_name="ann"))}
    assert len(stored) == 4
    assert stored[new.memory_id].content == "ann does not drink coffee" and stored[new.memory_id].status is MemoryStatus.VALID
    assert stored[old.memory_id].status is MemoryStatus.EXPIRED and stored[old.memory_id].superseded_by == new.memory_id
    assert all(stored[node.memory_id].reflected for node in messages)
    assert not stored[new.memory_id].reflected  # not reflected on yet: that is the reflection cycle's flag
    assert all(node.updated_at >= before for node in stored.values())
    assert ctx.store_outcome.written == 4 and len(ctx.store_outcome.memory_ids) == 4


def test_reflection_results_insights_and_observations_marked_reflected(store: Any, make_node: Make) -> None:
    observations = (make_node("ann plays the guitar"), make_node("ann plays the piano"))
    store.upsert(observations)
    insight = make_node("hobby: music", memory_type=MemoryType.INSIGHT, key="hobby", value="music")
    ctx = MemoryContext(user_name="ann", unreflected_observations=observations, updated_insights=(insight,))
    storer(store).run(ctx)
    assert ctx.result == "updated 1 insight, reflected on 2 observations"
    assert all(node.reflected for node in store.get([node.memory_id for node in observations]))
    assert store.get([insight.memory_id])[0].value == "music"


def test_an_expired_unreflected_observation_is_both_expired_and_reflected(store: Any, make_node: Make) -> None:
    observation = make_node("ann lives in Beijing")
    store.upsert([observation])
    ctx = MemoryContext(
        user_name="ann",
        unreflected_observations=(observation,),
        expired_memories=(observation.replace(status=MemoryStatus.EXPIRED, superseded_by="other"),),
    )
    storer(store).run(ctx)
    (stored,) = store.get([observation.memory_id])
    assert stored.status is MemoryStatus.EXPIRED and stored.superseded_by == "other" and stored.reflected


def test_nothing_to_store(store: Any) -> None:
    ctx = MemoryContext(user_name="ann")
    storer(store).run(ctx)
    assert ctx.result == "nothing to store" and store.count(MemoryFilter(user_name="ann")) == 0


def test_chinese_summary(store: Any, make_node: Make) -> None:
    said = message("我会弹吉他", make_node)
    store.upsert([said])  # a run's pending messages come from the store
    ctx = MemoryContext(user_name="ann", new_observations=(make_node("小王会弹吉他"),), pending_messages=(said,))
    storer(store, language="zh").run(ctx)
    assert ctx.result == "保存了 1 条观察，整理了 1 条消息"


def test_what_was_deleted_since_the_run_loaded_it_is_left_out_and_said(store: Any, make_node: Make) -> None:
    kept, deleted = message("I play the guitar", make_node), message("I live in Hangzhou", make_node)
    store.upsert([kept, deleted])
    store.delete([deleted.memory_id])  # the user deletes it while the run works
    facts = (
        make_node("ann plays the guitar", source_message_ids=(kept.memory_id,)),
        make_node("ann lives in Hangzhou", source_message_ids=(deleted.memory_id,)),
    )
    ctx = MemoryContext(user_name="ann", pending_messages=(kept, deleted), new_observations=facts)
    storer(store).run(ctx)
    stored = sorted(node.content for node in store.scan(MemoryFilter(user_name="ann")))
    assert stored == ["I play the guitar", "ann plays the guitar"]
    assert ctx.store_outcome.dropped == 2
    assert ctx.result == "stored 2 observations, consolidated 2 messages; left out 2 deleted meanwhile"


class BrokenEmbedding(EmbeddingModel):
    """The store's embedding model, out of order: every passage it is asked for fails."""

    def __init__(self, inner: EmbeddingModel) -> None:
        super().__init__(inner.model_name, inner.endpoint)
        self._inner = inner

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._inner.embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("embedding failed")


def test_a_failed_write_stores_nothing_and_leaves_messages_pending(
    store: Any, make_node: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = (message("I play the guitar", make_node),)
    store.upsert(messages)
    ctx = MemoryContext(user_name="ann", pending_messages=messages, new_observations=(make_node("ann plays the guitar"),))
    # the new observation needs a vector; the store cannot make one, so the whole write fails
    monkeypatch.setattr(store, "embedding_model", BrokenEmbedding(store.embedding_model))
    runner = WorkflowRunner("consolidate_memory", parse_workflow("store_memory"), {"store_memory": storer(store)})
    with pytest.raises(WorkerError, match="store_memory"):
        runner.run(ctx)
    assert store.count(MemoryFilter(user_name="ann", memory_types=(MemoryType.OBSERVATION,))) == 0
    assert store.count(MemoryFilter(user_name="ann", reflected=False)) == 1


def test_reflection_does_not_bring_back_deleted_observations_or_insights_drawn_from_them(store: Any, make_node: Make) -> None:
    said = message("I play the guitar", make_node)
    seen = make_node("ann plays the guitar", source_message_ids=(said.memory_id,))
    other = make_node("ann lives in Hangzhou", source_message_ids=("m-other",))
    old_insight = make_node("hobby: reading", memory_type=MemoryType.INSIGHT, key="hobby", value="reading")
    store.upsert([said, seen, other, old_insight])
    store.delete([seen.memory_id, old_insight.memory_id])  # deleted while the reflection run works
    insight = old_insight.replace(content="hobby: guitar", value="guitar", source_message_ids=(said.memory_id,))
    home = make_node("home: Hangzhou", memory_type=MemoryType.INSIGHT, key="home", source_message_ids=("m-other",))
    ctx = MemoryContext(
        user_name="ann",
        unreflected_observations=(seen, other),
        insights=(old_insight,),
        updated_insights=(insight, home),
    )
    storer(store).run(ctx)
    stored = {node.content: node for node in store.scan(MemoryFilter(user_name="ann"))}
    assert sorted(stored) == ["I play the guitar", "ann lives in Hangzhou", "home: Hangzhou"]
    assert stored["ann lives in Hangzhou"].reflected
    assert ctx.store_outcome.dropped == 2
