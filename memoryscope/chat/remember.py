"""Storing a chat turn: the user's message and the assistant's reply, as conversation memories.

A turn is stored by the chat's `store_operation` (`read_message` by default, which also tells
the service's scheduler, so consolidation runs when enough messages wait), both messages in ONE
run: the user's message (role "user", the user as speaker) and the reply (role "assistant", the
service's `assistant_name` as speaker), both at the time the query was asked; `read_message`
keeps them in that order. Consolidation mines only the user's messages (`info_filter`); the
replies are kept so "what did you recommend last time?" finds what was recommended
(`fuse_rerank`'s `fuse_assistant_ratio` ranks them below the user's own words).

Vectors: the query and the user's message are embedded together, in one request, before
retrieval (`embed_query_and_message`); the reply, known only after generation, is embedded when
it is stored, by the store's model, so every stored vector is the one the store would make.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from memoryscope.context import Message, TextVector
from memoryscope.memory import embedding_text_of
from memoryscope.models.base import EmbeddingModel

if TYPE_CHECKING:
    from memoryscope.service import MemoryService
    from memoryscope.stores.base import MemoryStore

__all__ = ["Ask", "StoredTurn", "TurnStorage"]


@dataclass(frozen=True)
class Ask:
    """One call's query and how to treat it."""

    query: str
    user_name: str
    time: datetime
    remember: bool  # keep the turn and store its messages (0.1.x `remember_response`)
    embedded: tuple[TextVector, ...] = ()  # the query and the user's message, already embedded
    stored_ids: tuple[str, ...] = ()  # the user's message when it is stored already (a failed reply, a retry)
    target_name: str = ""  # whose conversation beside the user's: a named agent's id
    workspace: str = ""


@dataclass(frozen=True)
class StoredTurn:
    """The memory ids a turn stored: the user's message's and the reply's."""

    message_ids: tuple[str, ...] = ()
    reply_ids: tuple[str, ...] = ()

    @property
    def all_ids(self) -> tuple[str, ...]:
        return (*self.message_ids, *self.reply_ids)


class TurnStorage:
    """Stores one chat's turns through its service's `store_operation`, and forgets them."""

    def __init__(
        self,
        service: MemoryService,
        store_operation: str,
        embedding_model: EmbeddingModel | None,
        store: MemoryStore | None,
    ) -> None:
        self._service = service
        self._operation = store_operation
        self._embedder = embedding_model  # the store's own: its vectors are the ones the store would make
        self._store = store

    @property
    def assistant_name(self) -> str:
        """The reply's speaker (read_message names a nameless assistant message by its role)."""
        return self._service.params.assistant_name or "assistant"

    def keeps(self, ask: Ask) -> bool:
        """Whether `ask`'s messages are stored at all."""
        return ask.remember and self._operation in self._service.operations and bool(ask.query.strip())

    def embed_query_and_message(self, ask: Ask) -> tuple[TextVector, ...]:
        """The query (as set_query trims it) and the user's message as it will be stored (as
        read_message embeds it: "speaker: text"), in one call to the store's model. Each
        operation uses a vector only for its exact text, so results are those of embedding them
        separately."""
        query = ask.query.strip()
        if self._embedder is None or not query:
            return ()
        passages = [self._passage(ask.query, ask.user_name)] if self.keeps(ask) else []
        query_vectors, passage_vectors = self._embedder.embed_queries_and_passages([query], passages)
        given = zip(passages, passage_vectors, strict=True)
        return (TextVector(query, query_vectors[0], True), *(TextVector(text, vector, False) for text, vector in given))

    def store(self, ask: Ask, reply: str | None) -> StoredTurn:
        """Store the user's message and, when given and not empty, the assistant's `reply`, in one run.

        A message stored before (`ask.stored_ids`) is not stored again (read_message knows it by
        its role, time and text) but still goes with the reply, so each indexes the other."""
        if not self.keeps(ask):
            return StoredTurn(message_ids=ask.stored_ids)
        messages = [Message(role="user", content=ask.query, time=ask.time, name=ask.user_name)]
        embedded = ask.embedded
        if reply is not None and reply.strip():
            messages.append(Message(role="assistant", content=reply, time=ask.time, name=self.assistant_name))
            embedded = (*embedded, *self._embed_reply(reply))
        result = self._service.run_operation(
            self._operation, ask.user_name, messages=tuple(messages), embedded=embedded,
            target_name=ask.target_name, workspace=ask.workspace,
        )  # fmt: skip
        new = result.context.stored_message_ids or ()
        return self._split(ask, new, sent=len(messages))

    def forget(self, user_name: str, memory_ids: tuple[str, ...]) -> None:
        """Delete stored messages (memories consolidation already drew from them stay)."""
        if memory_ids and "delete_memory" in self._service.operations:
            self._service.run_operation("delete_memory", user_name, memory_ids=memory_ids)

    def _embed_reply(self, reply: str) -> tuple[TextVector, ...]:
        if self._embedder is None:
            return ()
        text = self._passage(reply, self.assistant_name)
        return (TextVector(text, self._embedder.embed_passages([text])[0], False),)

    def _split(self, ask: Ask, new: tuple[str, ...], sent: int) -> StoredTurn:
        """`new` (the ids stored now, in message order) told apart into the message's and the reply's."""
        if ask.stored_ids:  # the user's message was stored before: what is new is the reply
            fresh = tuple(memory_id for memory_id in new if memory_id not in ask.stored_ids)
            return StoredTurn(ask.stored_ids, fresh)
        if len(new) == sent:  # nothing was known: one id per message sent, in order
            return StoredTurn(new[:1], new[1:])
        # one of the two was stored already (the same words at the same time): ask the store whose it is
        found = self._store.get(list(new)) if self._store is not None else []
        replies = {node.memory_id for node in found if node.meta.get("role") == "assistant"}
        return StoredTurn(tuple(i for i in new if i not in replies), tuple(i for i in new if i in replies))

    @staticmethod
    def _passage(text: str, speaker: str) -> str:
        return embedding_text_of(text.strip(), {"speaker": speaker})
