"""Keep new chat messages as conversation memories, before anything else happens to them."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import ClassVar
from zoneinfo import ZoneInfo

from pydantic import Field

from memoryscope.context import MemoryContext, Message
from memoryscope.env import Env
from memoryscope.memory import MemoryNode, MemoryType, utc_now
from memoryscope.stores.base import MemoryFilter, MemoryStore, TimeRange
from memoryscope.worker import Worker, WorkerParams, register_worker

__all__ = ["ReadMessageWorker", "message_memory_id"]

# Fixed, so a message gets the same memory id in every process and every run.
_NAMESPACE = uuid.UUID("6d656d6f-7279-5363-6f70-652d6d736773")
_INSTANT = timedelta(microseconds=1)  # a time range's end is exclusive; this makes it "up to and including"
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
    `context_messages` messages just before it (what it answers), which keyword search indexes
    with it (`memoryscope.memory.searchable_text`). Those come from the same batch, and for the
    first messages of a batch from the messages stored last before it (said no later than the
    batch's first message, and at most `context_gap_minutes` earlier: an older one belongs to
    another conversation), so the context does not depend on how a chatbot batches its calls.
    A batch's memories get `created_at` a millisecond apart, in message order, so "stored last"
    keeps the conversation's order in every store. `reflected=False` marks a message that
    consolidation has not used yet. Messages already stored are left as they are (consolidation
    may have marked them), so reading the same messages again adds nothing: a message's memory
    id is derived from the user and its `message_id` (see `message_memory_id`).
    `details["stored_messages"]` counts the new ones.
    """

    reads: ClassVar[tuple[str, ...]] = ("messages",)
    writes: ClassVar[tuple[str, ...]] = ("details", "result")

    class Params(WorkerParams):
        context_messages: int = Field(
            2, ge=0, description="How many earlier messages to keep as a message's context; 0 keeps none."
        )
        context_gap_minutes: float = Field(
            60,
            ge=0,
            description="Stored messages said more than this many minutes before a batch are another conversation, "
            "not its context.",
        )

    params: Params

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")
        self._zone: ZoneInfo = env.settings.tzinfo
        self._language: str = env.settings.language

    def run(self, ctx: MemoryContext) -> None:
        kept = [message for message in ctx.messages if message.role != "system" and message.content.strip()]
        ids = [message_memory_id(ctx, message) for message in kept]
        known = {node.memory_id for node in self._store.get(ids)} if ids else set()
        depth = self.params.context_messages
        needs_earlier = any(memory_id not in known for memory_id in ids[:depth])
        earlier = self._stored_before(ctx, kept[0], set(ids)) if needs_earlier else []
        texts = [*earlier, *(message.content.strip() for message in kept)]
        stamp = utc_now()
        nodes: dict[str, MemoryNode] = {}
        for index, (memory_id, message) in enumerate(zip(ids, kept)):
            if memory_id in known or memory_id in nodes:
                continue
            at = len(earlier) + index
            context = "\n".join(texts[max(0, at - depth) : at])
            nodes[memory_id] = self._node(ctx, message, memory_id, context, stamp + timedelta(milliseconds=index))
        new = list(nodes.values())
        if new:
            self._store.upsert(new)
        ctx.details["stored_messages"] = len(new)
        ctx.details["stored_message_ids"] = [node.memory_id for node in new]
        ctx.result = _RESULT[self._language].format(
            new=len(new), known=len(known), messages="message" if len(new) == 1 else "messages"
        )

    def _stored_before(self, ctx: MemoryContext, first: Message, batch_ids: set[str]) -> list[str]:
        """The texts of the `context_messages` messages stored last before `first`, oldest first."""
        depth = self.params.context_messages
        said = self._aware(first.time)
        memory_filter = MemoryFilter(
            user_name=ctx.user_name,
            target_name=ctx.target_name,
            workspace=ctx.workspace,
            memory_types=(MemoryType.CONVERSATION,),
            time_range=TimeRange("message_time", start=said - timedelta(minutes=self.params.context_gap_minutes), end=said + _INSTANT),
        )
        stored = self._store.scan(memory_filter, limit=depth + len(batch_ids), newest_first=True)
        earlier = [node.content for node in stored if node.memory_id not in batch_ids][:depth]
        return earlier[::-1]

    def _node(self, ctx: MemoryContext, message: Message, memory_id: str, context: str, created_at: datetime) -> MemoryNode:
        speaker = message.name or (ctx.user_name if message.role == "user" else message.role)
        meta = {"role": message.role, "speaker": speaker}
        if context:
            meta["context"] = context
        return MemoryNode(
            user_name=ctx.user_name,
            target_name=ctx.target_name,
            workspace=ctx.workspace,
            memory_id=memory_id,
            memory_type=MemoryType.CONVERSATION,
            content=message.content.strip(),
            message_time=self._aware(message.time),
            source_message_ids=(message.message_id,) if message.message_id else (),
            reflected=False,
            created_at=created_at,
            updated_at=created_at,
            meta=meta,
        )

    def _aware(self, moment: datetime) -> datetime:
        return moment.replace(tzinfo=self._zone) if moment.tzinfo is None else moment
