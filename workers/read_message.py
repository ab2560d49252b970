"""Keep new chat messages as conversation memories, before anything else happens to them."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import ClassVar
from zoneinfo import ZoneInfo

import numpy as np
from pydantic import Field

from memoryscope.context import MemoryContext, Message
from memoryscope.env import Env
from memoryscope.errors import MemoryScopeError
from memoryscope.history import ChangeSource
from memoryscope.memory import MemoryNode, MemoryType, embedding_text, utc_now
from memoryscope.stores.base import MemoryFilter, MemoryStore, TimeRange
from memoryscope.timeparse import find_time_expressions
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
    apart); system messages and empty ones are not. `reflected=False` marks a message that
    consolidation has not used yet. Messages already stored are left as they are (consolidation
    may have marked them), so reading the same messages again adds nothing: a message's memory
    id is derived from the user and its `message_id` (see `message_memory_id`).
    `stored_message_ids` names the new ones.

    A message alone often names neither what it answers nor what it led to ("Yes, every
    evening!"), so keyword search (`memoryscope.memory.searchable_text`) also indexes
    `meta["context"]`, the `context_messages` messages just before it, and `meta["reply"]`, the
    `reply_messages` just after it. Both cross batch boundaries: the first messages of a batch
    take their context from the messages stored last before it (said no later than the batch's
    first message and at most `context_gap_minutes` earlier; older ones are another
    conversation), and those stored messages get this batch's first messages as their reply. So
    the index does not depend on how a chatbot batches its calls. A batch's memories get
    `created_at` a millisecond apart, in message order, so "stored last" keeps the
    conversation's order in every store.

    With `event_time_from_text`, a message that mentions a time the rules of
    `memoryscope.timeparse` can place ("yesterday", "last Saturday", "on 3 May", "上周六") gets
    `event_time` = the start of the first such time, read in the configured zone at the time it
    was said; `fuse_rerank` and `retrieve_memory` match a query's time range on it.

    A message longer than `max_message_chars` fails the whole call before anything is stored, so
    no batch is kept in part. Vectors are the store's, except for a message whose passage vector
    the caller gives in `embedded` (a chat turn embeds its query and its message together).
    """

    reads: ClassVar[tuple[str, ...]] = ("messages", "embedded")
    writes: ClassVar[tuple[str, ...]] = ("stored_message_ids", "result")

    class Params(WorkerParams):
        context_messages: int = Field(
            2, ge=0, description="How many earlier messages to index with a message (what it answers); 0: none."
        )
        reply_messages: int = Field(
            1, ge=0, description="How many later messages to index with a message (what answered it); 0: none."
        )
        context_gap_minutes: float = Field(
            60,
            ge=0,
            description="Stored messages said more than this many minutes before a batch belong to another "
            "conversation: neither its context nor replied to by it.",
        )
        event_time_from_text: bool = Field(
            True,
            description="Set a message's event_time to the first time it mentions, read at the time it was said "
            "('yesterday I went bowling' -> the day before), so a question about that day finds it.",
        )
        max_message_chars: int = Field(
            100_000,
            gt=0,
            description="The longest message kept, in characters: a longer one fails the call and nothing of it is "
            "stored. (What is embedded is cut anyway, by the embedding model's `max_input_tokens`.)",
        )

    params: Params

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")
        self._zone: ZoneInfo = env.settings.tzinfo
        self._language: str = env.settings.language

    def run(self, ctx: MemoryContext) -> None:
        kept = [message for message in ctx.messages if message.role != "system" and message.content.strip()]
        self._check_sizes(ctx.messages)
        ids = [message_memory_id(ctx, message) for message in kept]
        known = {node.memory_id: node for node in self._store.get(ids)} if ids else {}
        reach = max(self.params.context_messages, self.params.reply_messages)
        joins_earlier = any(memory_id not in known for memory_id in ids[:reach])
        earlier = self._stored_before(ctx, kept[0], set(ids)) if joins_earlier else []
        texts = [node.content for node in earlier] + [message.content.strip() for message in kept]
        stamp = utc_now()
        nodes: dict[str, MemoryNode] = {}
        for index, (memory_id, message) in enumerate(zip(ids, kept, strict=True)):
            if memory_id not in known and memory_id not in nodes:
                at = len(earlier) + index
                moment = stamp + timedelta(milliseconds=index)
                nodes[memory_id] = self._node(ctx, message, memory_id, self._neighbours(texts, at), moment)
        new = list(nodes.values())
        if new:
            self._store.upsert(new, _given_vectors(ctx, new), change=ChangeSource.of(ctx))
        stored_in_order = [*earlier, *(known.get(memory_id) for memory_id in ids)]
        self._extend_replies(stored_in_order, texts)
        ctx.stored_message_ids = tuple(node.memory_id for node in new)
        ctx.result = _RESULT[self._language].format(
            new=len(new), known=len(known), messages="message" if len(new) == 1 else "messages"
        )

    def _check_sizes(self, messages: tuple[Message, ...]) -> None:
        limit = self.params.max_message_chars
        for position, message in enumerate(messages, start=1):
            size = len(message.content.strip())
            if size > limit and message.role != "system":
                named = f" (id {message.message_id!r})" if message.message_id else ""
                raise MemoryScopeError(
                    f"message {position}{named} has {size} characters, more than `max_message_chars` ({limit}) of "
                    f"worker {self.name!r}; none of the {len(messages)} messages was stored. Split it, or raise the limit."
                )

    def _neighbours(self, texts: list[str], at: int) -> dict[str, str]:
        """`context` and `reply` meta of the message at `texts[at]` (absent when empty)."""
        before = texts[max(0, at - self.params.context_messages) : at]
        after = texts[at + 1 : at + 1 + self.params.reply_messages]
        found = {"context": "\n".join(before), "reply": "\n".join(after)}
        return {name: text for name, text in found.items() if text}

    def _extend_replies(self, stored: list[MemoryNode | None], texts: list[str]) -> None:
        """Messages stored before (`stored[i]` is the message of `texts[i]`, None for a new one)
        whose reply was cut short by the end of their batch get the messages now after them.
        A reply is only ever extended, never replaced."""
        for at, node in enumerate(stored):
            if node is None:
                continue
            reply = self._neighbours(texts, at).get("reply", "")
            old = node.meta.get("reply", "")
            if reply != old and isinstance(old, str) and reply.startswith(old):
                self._store.update(node.memory_id, meta={**node.meta, "reply": reply})

    def _stored_before(self, ctx: MemoryContext, first: Message, batch_ids: set[str]) -> list[MemoryNode]:
        """The messages stored last before `first` in the same conversation, oldest first."""
        reach = max(self.params.context_messages, self.params.reply_messages)
        said = self._aware(first.time)
        memory_filter = MemoryFilter(
            user_name=ctx.user_name,
            target_name=ctx.target_name,
            workspace=ctx.workspace,
            memory_types=(MemoryType.CONVERSATION,),
            time_range=TimeRange(
                "message_time", start=said - timedelta(minutes=self.params.context_gap_minutes), end=said + _INSTANT
            ),
        )
        stored = self._store.scan(memory_filter, limit=reach + len(batch_ids), newest_first=True)
        return [node for node in stored if node.memory_id not in batch_ids][:reach][::-1]

    def _node(
        self, ctx: MemoryContext, message: Message, memory_id: str, neighbours: dict[str, str], created_at: datetime
    ) -> MemoryNode:
        speaker = message.name or (ctx.user_name if message.role == "user" else message.role)
        said = self._aware(message.time)
        return MemoryNode(
            user_name=ctx.user_name,
            target_name=ctx.target_name,
            workspace=ctx.workspace,
            memory_id=memory_id,
            memory_type=MemoryType.CONVERSATION,
            content=message.content.strip(),
            message_time=said,
            event_time=self._mentioned_time(message.content, said),
            source_message_ids=(message.message_id,) if message.message_id else (),
            reflected=False,
            created_at=created_at,
            updated_at=created_at,
            meta={**message.metadata, "role": message.role, "speaker": speaker, **neighbours},
        )

    def _mentioned_time(self, text: str, said: datetime) -> datetime | None:
        if not self.params.event_time_from_text:
            return None
        mentions = find_time_expressions(text, said.astimezone(self._zone))
        return mentions[0].start if mentions else None

    def _aware(self, moment: datetime) -> datetime:
        return moment.replace(tzinfo=self._zone) if moment.tzinfo is None else moment


def _given_vectors(ctx: MemoryContext, nodes: list[MemoryNode]) -> np.ndarray | None:
    """The caller's passage vectors of `nodes` (`embedded`, by exact text) when it gave one for
    each, else None: the store embeds them."""
    given = {item.text: item.vector for item in ctx.embedded if not item.is_query}
    texts = [embedding_text(node) for node in nodes] if given else []
    if not texts or any(text not in given for text in texts):
        return None
    return np.vstack([given[text] for text in texts])
