"""MemoryOS's short term: keep a new question-answer turn as a page, in one write."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from memoryscope.context import MemoryContext, Message
from memoryscope.env import Env
from memoryscope.history import ChangeSource
from memoryscope.memory import MemoryNode, utc_now
from memoryscope.stores.base import MemoryStore
from memoryscope.stores.metadata import MetadataCondition
from memoryscope.worker import Worker, WorkerParams, register_worker
from memoryscope.workers._memoryos import PAGE, SHORT, derived_id, scope_filter

__all__ = ["MemoryosAddPageWorker"]

_SHORT_TIER = (MetadataCondition("memoryos_tier", "eq", SHORT),)
_LABELS = {"en": ("User", "Assistant"), "zh": ("用户", "助手")}


@register_worker("memoryos_add_page")
class MemoryosAddPageWorker(Worker):
    """Store the run's `messages` as short-term pages: each user message with the assistant
    messages after it is one page ("User: ...\\nAssistant: ..."), time-stamped with when the user
    spoke. One upsert; a page's id derives from its owner, time and text, so adding a turn twice
    keeps one page. No LLM: this is the cheap, inline part of a turn.

    `memoryos_update_due` is set when the short term now holds more than `short_term_capacity`
    pages: then `memoryos_update` should run to move the oldest to mid term."""

    reads: ClassVar[tuple[str, ...]] = ("messages",)
    writes: ClassVar[tuple[str, ...]] = ("added_memory_ids", "stored_message_ids", "memoryos_update_due", "result", "details")

    class Params(WorkerParams):
        short_term_capacity: int = Field(7, gt=0, le=10_000, description="Pages the short term holds (MemoryOS's name).")

    params: Params

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")
        self._labels = _LABELS.get(env.settings.language, _LABELS["en"])
        self._zone = env.settings.tzinfo

    def run(self, ctx: MemoryContext) -> None:
        pages = [self._page(ctx, question, answers) for question, answers in _turns(ctx.messages)]
        if pages:
            self._store.upsert(pages, change=ChangeSource.of(ctx))
        short = self._store.count(scope_filter(ctx, PAGE, metadata=_SHORT_TIER))
        ctx.added_memory_ids = tuple(page.memory_id for page in pages)
        ctx.stored_message_ids = ctx.added_memory_ids  # what `MemoryScope.add` and the chat read back
        ctx.memoryos_update_due = short > self.params.short_term_capacity
        ctx.result = f"stored {len(pages)} page(s); short term holds {short}"
        ctx.details[self.name] = {"pages": len(pages), "short_term": short}

    def _page(self, ctx: MemoryContext, question: Message | None, answers: list[Message]) -> MemoryNode:
        asked = question.content if question is not None else ""
        answered = "\n".join(message.content for message in answers)
        user, assistant = self._labels
        separator = "：" if user == "用户" else ": "
        content = f"{user}{separator}{asked}\n{assistant}{separator}{answered}"
        said = question.time if question is not None else answers[0].time
        said = said.replace(tzinfo=self._zone) if said.tzinfo is None else said  # a time without a zone is the config's
        memory_id = derived_id("memoryos_page", ctx.user_name, ctx.target_name, ctx.workspace, said.isoformat(), content)
        now = utc_now()
        return MemoryNode(
            user_name=ctx.user_name,
            target_name=ctx.target_name,
            workspace=ctx.workspace,
            memory_id=memory_id,
            memory_type=PAGE,
            content=content,
            message_time=said,
            created_at=now,
            updated_at=now,
            meta={**_given_metadata(question, answers), "memoryos_tier": SHORT},
        )


def _given_metadata(question: Message | None, answers: list[Message]) -> dict[str, object]:
    """The caller's metadata of a turn (MemoryOS's `meta_data`), kept on its page: the messages' own, merged."""
    merged: dict[str, object] = {}
    for message in (*answers, *((question,) if question is not None else ())):
        merged.update(message.metadata)
    return merged


def _turns(messages: tuple[Message, ...]) -> list[tuple[Message | None, list[Message]]]:
    """(the user's message, the assistant's replies to it); system messages are left out."""
    turns: list[tuple[Message | None, list[Message]]] = []
    for message in messages:
        if message.role == "user":
            turns.append((message, []))
        elif message.role == "assistant":
            if not turns:
                turns.append((None, []))
            turns[-1][1].append(message)
    return turns
