"""Keep new chat messages as conversation memories, before anything else happens to them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import ClassVar
from zoneinfo import ZoneInfo

from pydantic import Field

from memoryscope.context import MemoryContext, Message
from memoryscope.env import Env
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.stores.base import MemoryStore
from memoryscope.worker import Worker, WorkerParams, register_worker

__all__ = ["ReadMessageWorker", "message_memory_id"]

# Fixed, so a message gets the same memory id in every process and every run.
_NAMESPACE = uuid.UUID("6d656d6f-7279-5363-6f70-652d6d736773")
_RESULT = {"en": "stored {new} new {messages} ({known} already stored)", "zh": "保存了 {new} 条新消息（{known} 条已保存过）"}


def message_memory_id(ctx: MemoryContext, message: Message) -> str:
    """The memory id of `message` for this user: from its `message_id` when it has one, else
    from its role, time and text. Storing a message twice therefore stores it once."""
    if message.message_id:
        identity = f"id\x1f{message.message_id}"
    else:
        identity = f"text\x1f{message.role}\x1f{message.time.isoformat()}\x1f{message.content}"
    return uuid.uuid5(_NAMESPACE, f"{ctx.user_name}\x1f{ctx.target_name}\x1f{ctx.workspace}\x1f{identity}").hex


@register_worker("read_message")
class ReadMessageWorker(Worker):
    """Store `messages` as `conversation` memories, in one atomic write.

    User and assistant messages are both kept (`meta["role"]`, `meta["speaker"]` tell them
    apart); system messages and empty ones are not. `meta["context"]` holds the text of the
    `context_messages` messages just before it in the same batch (what it answers), which keyword
    search indexes with it (`memoryscope.memory.searchable_text`). `reflected=False` marks a message that
    consolidation has not used yet. Messages already stored are left as they are (consolidation
    may have marked them), so reading the same messages again adds nothing: a message's memory
    id is derived from the user and its `message_id` (see `message_memory_id`).
    `details["stored_messages"]` counts the new ones.
    """

    reads: ClassVar[tuple[str, ...]] = ("messages",)
    writes: ClassVar[tuple[str, ...]] = ("details", "result")

    class Params(WorkerParams):
        context_messages: int = Field(
            2, ge=0, description="How many earlier messages of the same batch to keep as a message's context; 0 keeps none."
        )

    params: Params

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")
        self._zone: ZoneInfo = env.settings.tzinfo
        self._language: str = env.settings.language

    def run(self, ctx: MemoryContext) -> None:
        nodes: dict[str, MemoryNode] = {}
        kept = [message for message in ctx.messages if message.role != "system" and message.content.strip()]
        depth = self.params.context_messages
        for index, message in enumerate(kept):
            context = "\n".join(earlier.content.strip() for earlier in kept[max(0, index - depth) : index])
            node = self._node(ctx, message, context)
            nodes.setdefault(node.memory_id, node)
        known = {node.memory_id for node in self._store.get(list(nodes))} if nodes else set()
        new = [node for memory_id, node in nodes.items() if memory_id not in known]
        if new:
            self._store.upsert(new)
        ctx.details["stored_messages"] = len(new)
        ctx.details["stored_message_ids"] = [node.memory_id for node in new]
        ctx.result = _RESULT[self._language].format(
            new=len(new), known=len(known), messages="message" if len(new) == 1 else "messages"
        )

    def _node(self, ctx: MemoryContext, message: Message, context: str) -> MemoryNode:
        speaker = message.name or (ctx.user_name if message.role == "user" else message.role)
        meta = {"role": message.role, "speaker": speaker}
        if context:
            meta["context"] = context
        return MemoryNode(
            user_name=ctx.user_name,
            target_name=ctx.target_name,
            workspace=ctx.workspace,
            memory_id=message_memory_id(ctx, message),
            memory_type=MemoryType.CONVERSATION,
            content=message.content.strip(),
            message_time=self._aware(message.time),
            source_message_ids=(message.message_id,) if message.message_id else (),
            reflected=False,
            meta=meta,
        )

    def _aware(self, moment: datetime) -> datetime:
        return moment.replace(tzinfo=self._zone) if moment.tzinfo is None else moment
