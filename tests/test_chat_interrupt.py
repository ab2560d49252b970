"""Ctrl-C while a chat turn is still finding memories (before the model is asked): the message
was said, so it is stored, and `retry()` asks that query again, not the turn before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from memoryscope import MemoryScope
from memoryscope.context import MemoryContext
from memoryscope.memory import MemoryType
from memoryscope.stores.base import MemoryFilter
from memoryscope.worker import Worker, register_worker

RETRIEVE = "memory_service.memoryscope_service.memory_operations.retrieve_memory.workflow"


@register_worker("test_interrupt_once")
class InterruptOnce(Worker):
    """Raises KeyboardInterrupt the first time it runs after `armed` is set, as Ctrl-C would."""

    reads: ClassVar[tuple[str, ...]] = ()
    writes: ClassVar[tuple[str, ...]] = ()
    armed: ClassVar[bool] = False

    def run(self, ctx: MemoryContext) -> None:
        if InterruptOnce.armed:
            InterruptOnce.armed = False
            raise KeyboardInterrupt


@pytest.fixture
def scope(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryScope]:
    for name in ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH"):
        monkeypatch.delenv(name, raising=False)
    workflow = "test_interrupt_once,set_query,[extract_time|retrieve_obs_ins,semantic_rank],fuse_rerank"
    overrides = {"memory_store.path": str(tmp_path / "chat.db"), RETRIEVE: workflow}
    with MemoryScope("default", overrides=overrides) as ms:
        yield ms


def test_ctrl_c_while_finding_memories_keeps_the_message_for_retry(scope: MemoryScope) -> None:
    chat = scope.default_memory_chat.for_user("ann")
    chat.chat_with_memory("my cat is called Mochi")
    InterruptOnce.armed = True
    with pytest.raises(KeyboardInterrupt):
        chat.chat_with_memory("what is my cat called?")
    assert scope.store is not None
    said = {node.content for node in scope.store.scan(MemoryFilter("ann", memory_types=(MemoryType.CONVERSATION,)))}
    assert "what is my cat called?" in said  # stored though no reply came
    reply = chat.retry()
    assert reply is not None and "Mochi" in reply.message.content  # the interrupted query, answered from memory
    assert [turn.query for turn in chat.turns] == ["my cat is called Mochi", "what is my cat called?"]
