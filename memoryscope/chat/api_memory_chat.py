"""`api_memory_chat`: chat with memory from Python — retrieve, answer, remember.

    chat = scope.default_memory_chat
    response = chat.chat_with_memory("what instrument do I play?")
    response.message.content, response.meta_data["memories"], response.meta_data["timings"]
    for piece in chat.chat_with_memory("and since when?", stream=True):
        print(piece.meta_data["delta"], end="")
    response = await chat.achat_with_memory("...")          # async; `stream=True` gives an async iterator
    chat.run_service_operation("consolidate_memory")       # a readable line

Each turn: the `retrieve_operation` finds memories for the query; the generation model answers
with them and the current time in its system prompt; the user's message is stored with the
`store_operation` (which tells the service's scheduler, so consolidation runs when enough
messages wait). Without a generation model the reply lists the memories found instead (the
first reply of a chat says why), and nothing fails.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import Field

from memoryscope.chat.base import CHATS, ChatParams, ChatResponse
from memoryscope.context import Message
from memoryscope.memory import MemoryNode, format_time
from memoryscope.models.base import ChatMessage, GenerationModel
from memoryscope.workflow import RunResult

if TYPE_CHECKING:
    from memoryscope.app import MemoryScope

__all__ = ["ApiMemoryChat", "ChatTurn", "readable_result"]

SYSTEM_PROMPTS = {
    "en": (
        "You are {assistant}, a helpful assistant with long-term memory of the user, {user}.\n"
        "The current time is {now}.\n"
        "What you remember about the user (time-stamped, most relevant first):\n{memories}\n"
        "Use these memories when they help; do not invent memories."
    ),
    "zh": (
        "你是{assistant}，一个拥有用户（{user}）长期记忆的助手。\n"
        "现在的时间是 {now}。\n"
        "你记得的关于用户的信息（带时间，最相关的在前）：\n{memories}\n"
        "在有帮助时使用这些记忆；不要编造记忆。"
    ),
}
NO_MEMORIES = {"en": "(nothing yet)", "zh": "（暂无）"}
NO_LLM_NOTICE = {
    "en": "No LLM is configured, so instead of a reply here is what I remember that fits your message:",
    "zh": "未配置大模型，以下是与你的消息相关的记忆（代替回复）：",
}
NO_LLM_HEADER = {"en": "What I remember that fits your message:", "zh": "与你的消息相关的记忆："}


@dataclass(frozen=True)
class ChatTurn:
    """One exchange: the user's query, the reply, when it was asked, the memories it stored."""

    query: str
    reply: str
    time: datetime
    stored_ids: tuple[str, ...] = ()


@CHATS.register("api_memory_chat")
class ApiMemoryChat:
    """One user's chat. Keeps the recent turns; memories come from the service each turn."""

    class Params(ChatParams):
        user_name: str = Field("", description="Whose memories; defaults to the service's `human_name`.")

    def __init__(self, name: str, params: Params, scope: MemoryScope) -> None:
        self.name = name
        self.params = params
        self._scope = scope
        self.service = scope.services[params.memory_service]
        self.user_name = params.user_name or self.service.params.human_name
        self.turns: list[ChatTurn] = []
        self._unanswered: tuple[str, datetime] | None = None  # a query whose reply failed, for `retry`
        self._told_no_llm = False

    @property
    def scope(self) -> MemoryScope:
        """The `MemoryScope` this chat belongs to (its config, models and services)."""
        return self._scope

    @property
    def history(self) -> list[ChatMessage]:
        """The kept turns as chat messages, oldest first."""
        return [message for turn in self.turns for message in _turn_messages(turn)]

    def for_user(self, user_name: str) -> ApiMemoryChat:
        """A new chat like this one, for another user's memories."""
        return type(self)(self.name, self.params.model_copy(update={"user_name": user_name}), self._scope)

    # -- chatting ----------------------------------------------------------------------------

    def chat_with_memory(
        self,
        query: str,
        history: Sequence[ChatMessage | Mapping[str, str]] | None = None,
        stream: bool | None = None,
        query_time: datetime | None = None,
    ) -> Any:
        """A `ChatResponse`; with `stream=True` an iterator of them, each with `meta_data["delta"]`.

        `history` (chat messages, or dicts with `role` and `content`) replaces the chat's own
        turns in the prompt for this call; `query_time` is when the query was asked (default now).
        """
        stream = self.params.stream if stream is None else stream
        now = self._now(query_time)
        meta = self._meta(self._retrieve(query, now))
        model = self._model()
        if model is None:
            response = self._memories_instead(meta)
            self._remember(query, response.message.content, now)
            return iter([_with_delta(response, response.message.content)]) if stream else response
        messages = self._prompt(query, meta["memories"], now, history)
        if stream:
            return self._stream(model, messages, query, now, meta)
        started = time.perf_counter()
        try:
            reply = model.chat(messages)
        except Exception:
            self._remember_unanswered(query, now)
            raise
        meta["timings"]["generation"] = time.perf_counter() - started
        self._remember(query, reply, now)
        return ChatResponse(ChatMessage("assistant", reply), meta)

    async def achat_with_memory(
        self,
        query: str,
        history: Sequence[ChatMessage | Mapping[str, str]] | None = None,
        stream: bool | None = None,
        query_time: datetime | None = None,
    ) -> Any:
        """As `chat_with_memory`, for asyncio: a `ChatResponse`, or with `stream=True` an async iterator.

        Retrieval and storing run in a worker thread (`asyncio.to_thread`); the reply comes from
        the model's async API, so the event loop is never blocked.
        """
        stream = self.params.stream if stream is None else stream
        now = self._now(query_time)
        meta = self._meta(await asyncio.to_thread(self._retrieve, query, now))
        model = self._model()
        if model is None:
            response = self._memories_instead(meta)
            await asyncio.to_thread(self._remember, query, response.message.content, now)
            return _one(_with_delta(response, response.message.content)) if stream else response
        messages = self._prompt(query, meta["memories"], now, history)
        if stream:
            return self._astream(model, messages, query, now, meta)
        started = time.perf_counter()
        try:
            reply = await model.achat(messages)
        except Exception:
            await asyncio.to_thread(self._remember_unanswered, query, now)
            raise
        meta["timings"]["generation"] = time.perf_counter() - started
        await asyncio.to_thread(self._remember, query, reply, now)
        return ChatResponse(ChatMessage("assistant", reply), meta)

    def retry(self, stream: bool | None = None) -> Any:
        """Ask the last query again (the one whose reply failed, else the last turn's, which is dropped).

        The query keeps its time, so its stored message is not stored twice.
        """
        if self._unanswered is not None:
            query, asked_at = self._unanswered
        elif self.turns:
            turn = self.turns.pop()
            query, asked_at = turn.query, turn.time
        else:
            return None
        self._unanswered = None
        return self.chat_with_memory(query, stream=stream, query_time=asked_at)

    def pop_turns(self, count: int = 1, forget: bool = True) -> list[ChatTurn]:
        """Undo the last `count` turns: drop them from the chat and, with `forget`, delete the
        messages they stored (memories already drawn from them by consolidation stay)."""
        if count < 0:
            raise ValueError(f"count must be zero or more, got {count}")
        removed = self.turns[len(self.turns) - min(count, len(self.turns)) :]
        del self.turns[len(self.turns) - len(removed) :]
        self._unanswered = None
        ids = tuple(memory_id for turn in removed for memory_id in turn.stored_ids)
        if forget and ids and "delete_memory" in self.service.operations:
            self.service.run_operation("delete_memory", self.user_name, memory_ids=ids)
        return removed

    def run_service_operation(self, name: str, **inputs: Any) -> str:
        """Run a service operation for this chat's user; returns its result as readable text."""
        result = self.service.run_operation(name, self.user_name, **inputs)
        settings = self._scope.config.settings
        return readable_result(name, result, settings.language, settings.tzinfo)

    # -- pieces ------------------------------------------------------------------------------

    @property
    def _language(self) -> str:
        return self._scope.config.settings.language

    def _now(self, query_time: datetime | None) -> datetime:
        zone = self._scope.config.settings.tzinfo
        if query_time is None:
            return datetime.now(zone)
        return query_time.replace(tzinfo=zone) if query_time.tzinfo is None else query_time

    def _model(self) -> GenerationModel | None:
        return self._scope.env.generation_model(self.params.generation_model, f"memory_chat.{self.name}.generation_model")

    def _retrieve(self, query: str, now: datetime) -> RunResult:
        return self.service.run_operation(self.params.retrieve_operation, self.user_name, query=query, query_time=now)

    def _meta(self, found: RunResult) -> dict[str, Any]:
        memories = list(found.context.memories)
        timings = dict(found.timings)
        timings[self.params.retrieve_operation] = found.total_seconds
        return {"memories": self._format(memories), "memory_ids": [m.memory_id for m in memories], "timings": timings}

    def _format(self, memories: Sequence[MemoryNode]) -> list[str]:
        settings = self._scope.config.settings
        return [memory.format(settings.language, settings.tzinfo) for memory in memories]

    def _memories_instead(self, meta: dict[str, Any]) -> ChatResponse:
        """The reply without an LLM: the memories found, under one notice per chat."""
        header = (NO_LLM_HEADER if self._told_no_llm else NO_LLM_NOTICE)[self._language]
        self._told_no_llm = True
        reply = header + "\n" + ("\n".join(meta["memories"]) or NO_MEMORIES[self._language])
        meta["notice"] = NO_LLM_NOTICE[self._language]
        return ChatResponse(ChatMessage("assistant", reply), meta)

    def _prompt(
        self,
        query: str,
        lines: list[str],
        now: datetime,
        history: Sequence[ChatMessage | Mapping[str, str]] | None,
    ) -> list[ChatMessage]:
        system = SYSTEM_PROMPTS[self._language].format(
            assistant=self.service.params.assistant_name,
            user=self.user_name,
            now=format_time(now, self._language, self._scope.config.settings.tzinfo),
            memories="\n".join(lines) or NO_MEMORIES[self._language],
        )
        recent = [_chat_message(item) for item in history] if history is not None else self.history
        keep = 2 * self.params.history_message_count
        return [ChatMessage("system", system), *(recent[-keep:] if keep else []), ChatMessage("user", query)]

    def _stream(
        self, model: GenerationModel, messages: list[ChatMessage], query: str, now: datetime, meta: dict[str, Any]
    ) -> Iterator[ChatResponse]:
        pieces: list[str] = []
        started = time.perf_counter()
        try:
            for delta in model.stream_chat(messages):
                pieces.append(delta)
                yield _with_delta(ChatResponse(ChatMessage("assistant", "".join(pieces)), _copy(meta)), delta)
        except GeneratorExit:  # the caller stopped reading: the turn is what they saw
            self._remember(query, "".join(pieces), now)
            raise
        except Exception:
            self._remember_unanswered(query, now)
            raise
        meta["timings"]["generation"] = time.perf_counter() - started
        self._remember(query, "".join(pieces), now)

    async def _astream(
        self, model: GenerationModel, messages: list[ChatMessage], query: str, now: datetime, meta: dict[str, Any]
    ) -> AsyncIterator[ChatResponse]:
        pieces: list[str] = []
        started = time.perf_counter()
        try:
            async for delta in model.astream_chat(messages):
                pieces.append(delta)
                yield _with_delta(ChatResponse(ChatMessage("assistant", "".join(pieces)), _copy(meta)), delta)
        except GeneratorExit:  # closed early: store on this thread, an await is not allowed here
            self._remember(query, "".join(pieces), now)
            raise
        except Exception:
            await asyncio.to_thread(self._remember_unanswered, query, now)
            raise
        meta["timings"]["generation"] = time.perf_counter() - started
        await asyncio.to_thread(self._remember, query, "".join(pieces), now)

    def _store(self, query: str, now: datetime) -> tuple[str, ...]:
        """Keep the user's message as a conversation memory (this also notifies the scheduler)."""
        if self.params.store_operation not in self.service.operations or not query.strip():
            return ()
        message = Message(role="user", content=query, time=now, name=self.user_name)
        result = self.service.run_operation(self.params.store_operation, self.user_name, messages=(message,))
        return tuple(result.context.details.get("stored_message_ids", ()))

    def _remember(self, query: str, reply: str, now: datetime) -> None:
        stored = self._store(query, now)
        self.turns.append(ChatTurn(query, reply, now, stored))
        del self.turns[: max(len(self.turns) - self.service.params.history_msg_count, 0)]
        self._unanswered = None

    def _remember_unanswered(self, query: str, now: datetime) -> None:
        """The reply failed: the message was still said, so it is stored; `retry` asks it again."""
        self._unanswered = (query, now)
        self._store(query, now)


def readable_result(name: str, result: RunResult, language: str = "en", tz: Any = None) -> str:
    """What an operation did, for a person: its result text, else its memories, else that it is done."""
    context = result.context
    if context.result:
        text = context.result
    elif context.memories:
        text = "\n".join(memory.format(language, tz) for memory in context.memories)
    elif result.stopped:
        text = f"{name}: stopped: {result.stopped}"
    else:
        text = f"{name}: done"
    if result.skipped:
        text += f"\n({name} skipped {', '.join(result.skipped)}: no LLM configured)"
    return text


def _turn_messages(turn: ChatTurn) -> list[ChatMessage]:
    return [ChatMessage("user", turn.query), ChatMessage("assistant", turn.reply)]


def _chat_message(item: ChatMessage | Mapping[str, str]) -> ChatMessage:
    if isinstance(item, ChatMessage):
        return item
    return ChatMessage(str(item["role"]), str(item["content"]))


def _copy(meta: dict[str, Any]) -> dict[str, Any]:
    return {key: (dict(value) if isinstance(value, dict) else value) for key, value in meta.items()}


def _with_delta(response: ChatResponse, delta: str) -> ChatResponse:
    response.meta_data["delta"] = delta
    return response


async def _one(response: ChatResponse) -> AsyncIterator[ChatResponse]:
    yield response
