"""`api_memory_chat`: chat with memory from Python — retrieve, answer, remember both sides.

    chat = scope.default_memory_chat
    response = chat.chat_with_memory("what instrument do I play?")
    response.message.content, response.meta_data["memories"], response.meta_data["timings"]
    chat.chat_with_memory("what do I play?", role_name="ann", history_message_strategy=None)  # 0.1.x keywords
    for piece in chat.chat_with_memory("and since when?", stream=True):
        print(piece.delta, end="")
    response = await chat.achat_with_memory("...")          # async; `stream=True` gives an async iterator
    chat.run_service_operation("consolidate_memory")       # a readable line

Each turn: the `retrieve_operation` finds memories for the query; the generation model answers
with them, the current time and the persona (`system_prompt`) in its system prompt; then the
user's message and the assistant's reply are both stored, in one run of the `store_operation`
(which tells the service's scheduler, so consolidation runs when enough messages wait; it mines
only the user's messages), so a later "what did you recommend?" finds the reply. The query and
the user's message are embedded together, once, by the store's model (one request for a remote
one) before retrieval; the reply is embedded when it is stored (`memoryscope.chat.remember`).

A reply that fails (an error, Ctrl-C) stores only the user's message, and `retry()` asks it
again; a streamed reply its reader closes early is kept as far as it was read;
`remember_response=False` stores nothing. Without a generation model the reply lists the
memories found instead (the first reply of a chat says why); only the user's message is stored
then, and nothing fails.

Function calling (`achat_with_memory(..., tools=[...])`, the caller running the functions): the
model may answer with calls (`response.tool_calls`) instead of text; the caller sends the calls
and their results back as `tool_exchange` with the same query, and the model answers again. Such
a reply is not stored: the turn (the user's message and the text that ends the exchange) is
stored once, when the model answers without calls (`memoryscope.chat.tool_reply`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import Field

from memoryscope.chat.base import CHATS, ChatParams, ChatResponse
from memoryscope.chat.found_memories import found_meta, memories_instead
from memoryscope.chat.prompt import SystemPrompt
from memoryscope.chat.remember import Ask, TurnStorage
from memoryscope.chat.streaming import astream_reply, one, stream_reply, with_delta
from memoryscope.chat.tool_reply import astream_tool_reply, prompt_tokens, tool_messages, tools_in_play
from memoryscope.chat.turns import ChatTurn, HistoryStrategy, history_turns, said, turn_messages
from memoryscope.compat.inputs import caller_inputs
from memoryscope.context import Message
from memoryscope.errors import InvalidInputError
from memoryscope.memory import format_time
from memoryscope.models.base import ChatMessage, GenerationModel
from memoryscope.models.token_count import count_tokens
from memoryscope.workflow import RunResult

if TYPE_CHECKING:
    from memoryscope.app import MemoryScope
    from memoryscope.service import MemoryService

__all__ = ["ApiMemoryChat", "ChatTurn"]

PromptParts = tuple[str | None, str | None, str | None]  # system_prompt, memory_prompt, temporary_memories
History = Sequence[ChatMessage | Mapping[str, Any]]
Tools = Sequence[Mapping[str, Any]]
_Reply = TypeVar("_Reply")


@dataclass(frozen=True)
class _Prepared:
    """A turn ready for the model: the query, what was found for it, the model and the messages."""

    ask: Ask
    meta: dict[str, Any]
    model: GenerationModel | None
    messages: list[ChatMessage]


@CHATS.register("api_memory_chat")
class ApiMemoryChat:
    """A chat with memory. Keeps the recent turns; memories come from the service each turn."""

    class Params(ChatParams):
        user_name: str = Field("", description="Whose memories; defaults to the service's `human_name`.")

    def __init__(self, name: str, params: Params, scope: MemoryScope) -> None:
        self.name = name
        self.params = params
        self._scope = scope
        self.service = scope.services[params.memory_service]
        self.user_name = params.user_name or self.service.params.human_name
        self.stream = params.stream
        self.turns: list[ChatTurn] = []
        self._unanswered: Ask | None = None  # a query whose reply failed, for `retry`
        self._told_no_llm = False
        embedder = scope.env.query_embedding_model(None, f"memory_chat.{name}")
        self._storage = TurnStorage(self.service, params.store_operation, embedder, scope.store)

    @property
    def scope(self) -> MemoryScope:
        """The `MemoryScope` this chat belongs to (its config, models and services)."""
        return self._scope

    @property
    def memory_service(self) -> MemoryService:
        """The chat's service (MemoryScope 0.1.x's name)."""
        return self.service

    @property
    def human_name(self) -> str:
        return self.user_name

    @property
    def assistant_name(self) -> str:
        return self.service.params.assistant_name

    @property
    def history(self) -> list[ChatMessage]:
        """This user's kept turns as chat messages, oldest first."""
        return [message for turn in self._turns_of(self.user_name) for message in turn_messages(turn)]

    def for_user(self, user_name: str) -> ApiMemoryChat:
        """A new chat like this one, for another user's memories."""
        return type(self)(self.name, self.params.model_copy(update={"user_name": user_name}), self._scope)

    # -- chatting ----------------------------------------------------------------------------

    def chat_with_memory(
        self,
        query: str,
        role_name: str | None = None,
        system_prompt: str | None = None,
        memory_prompt: str | None = None,
        temporary_memories: str | None = None,
        history_message_strategy: HistoryStrategy = "auto",
        remember_response: bool = True,
        *,
        history: History | None = None,
        stream: bool | None = None,
        query_time: datetime | None = None,
        model_options: Mapping[str, Any] | None = None,
    ) -> Any:
        """A `ChatResponse`; with `stream=True` an iterator of them, each with `.delta`.

        The first seven parameters are MemoryScope 0.1.x's, in its order: `role_name` is whose
        memories (default: the chat's user); `system_prompt` replaces the introduction of the
        system prompt (the chat's `system_prompt` param, else who the assistant is and the time;
        `{assistant}`, `{user}` and `{now}` in it are filled in), `memory_prompt` the words
        before the memories; `temporary_memories` are added to this turn's memories only;
        `history_message_strategy` is 'auto' (the user's turns not consolidated yet, at most the
        service's `contextual_msg_max_count`), None (no earlier turns) or n (the last n turns);
        `remember_response=False` keeps neither the turn nor its messages. `history` (chat
        messages, or dicts with `role` and `content`) replaces the chat's own turns for this
        call; `query_time` is when the query was asked (default now). `model_options` (e.g.
        `{"temperature": 0.2, "max_tokens": 200}`) go with this reply's model call, over the
        chat's `generation_model_kwargs`.
        """
        ask = self._ask(query, role_name, query_time, remember_response)
        prompt_parts = (system_prompt, memory_prompt, temporary_memories)
        try:
            prepared = self._prepare(ask, prompt_parts, history, history_message_strategy)
        except KeyboardInterrupt:  # Ctrl-C while memories were being found: the message was still said
            self._remember_unanswered(ask)
            raise
        return self._answer(prepared, stream, model_options)

    async def achat_with_memory(
        self,
        query: str,
        role_name: str | None = None,
        system_prompt: str | None = None,
        memory_prompt: str | None = None,
        temporary_memories: str | None = None,
        history_message_strategy: HistoryStrategy = "auto",
        remember_response: bool = True,
        *,
        history: History | None = None,
        stream: bool | None = None,
        query_time: datetime | None = None,
        model_options: Mapping[str, Any] | None = None,
        tools: Tools | None = None,
        tool_exchange: Sequence[Mapping[str, Any]] | None = None,
    ) -> Any:
        """As `chat_with_memory`, for asyncio: a `ChatResponse`, or with `stream=True` an async iterator.

        Retrieval and storing run in a worker thread (`asyncio.to_thread`); the reply comes from
        the model's async API, so the event loop is never blocked. A reply cancelled while it is
        awaited (as Ctrl-C under `asyncio.run` does) counts as failed: the message is stored and
        `retry()` asks it again.

        `tools` (OpenAI tool schemas, `{"type": "function", "function": {"name", "parameters"}}`)
        are offered to the model; `model_options` may then hold `tool_choice` and
        `parallel_tool_calls`. `tool_exchange` is what followed the query: the model's messages
        with `tool_calls` and the `tool` messages answering them (`tool_call_id`), as OpenAI's
        messages. The response's `tool_calls` are the model's calls; a reply with calls stores
        nothing (the turn is stored when the model answers with text, see the module's notes).
        `history` may then hold such messages too. Needs a model that calls functions
        (`supports_tools`); else a `ModelError` says so.
        """
        ask = self._ask(query, role_name, query_time, remember_response)
        prompt_parts = (system_prompt, memory_prompt, temporary_memories)
        turn = await asyncio.to_thread(self._prepare, ask, prompt_parts, history, history_message_strategy)
        stream = self.stream if stream is None else stream
        options = {**self._options, **(model_options or {})}
        ask, meta, model = turn.ask, turn.meta, turn.model
        if model is None:
            response = self._memories_instead(meta)
            await asyncio.to_thread(self._remember, ask, response.message.content, replied=False)
            return one(with_delta(response, response.message.content)) if stream else response
        answered, failed = partial(self._remember, ask), partial(self._remember_unanswered, ask)
        started = time.perf_counter()
        if tools_in_play(tools, tool_exchange):
            messages = tool_messages(turn.messages, history, 2 * self._history_cap(), tool_exchange or ())
            meta["prompt_tokens"] = prompt_tokens(messages, tools or ())  # what is sent, calls and tools included
            if stream:
                return astream_tool_reply(model, messages, tools or (), options, meta, answered, failed)
            called = await self._awaited(ask, model.achat_with_tools(messages, tools or (), **options))
            meta["timings"]["generation"] = time.perf_counter() - started
            if not called.tool_calls:  # calls are not the turn's end: it is stored with the text that ends it
                await asyncio.to_thread(self._remember, ask, called.content)
            return ChatResponse(ChatMessage("assistant", called.content), meta, tool_calls=called.tool_calls)
        if stream:
            return astream_reply(model, turn.messages, options, meta, answered, failed)
        reply = await self._awaited(ask, model.achat(turn.messages, **options))
        meta["timings"]["generation"] = time.perf_counter() - started
        await asyncio.to_thread(self._remember, ask, reply)
        return ChatResponse(ChatMessage("assistant", reply), meta)

    @property
    def supports_tools(self) -> bool:
        """Whether `tools` can be offered: the chat's generation model calls functions."""
        model = self._model()
        return model is not None and model.supports_tools

    async def _awaited(self, ask: Ask, reply: Awaitable[_Reply]) -> _Reply:
        """The model's reply; when it fails, the query is stored unanswered (see `retry`)."""
        try:
            return await reply
        except Exception:
            await asyncio.to_thread(self._remember_unanswered, ask)
            raise
        except (KeyboardInterrupt, asyncio.CancelledError):
            self._remember_unanswered(ask)  # on this thread: an interrupted task should await nothing more
            raise

    def retry(self, stream: bool | None = None) -> Any:
        """Ask the last query again: the one whose reply failed, else the last turn's, which is
        dropped with its stored reply.

        The query keeps its time, so its stored message is not stored twice.
        """
        if self._unanswered is not None:
            ask = self._unanswered
        elif self.turns:
            turn = self.turns.pop()
            user_name = turn.user_name or self.user_name
            self._storage.forget(user_name, turn.reply_ids)  # the new reply replaces it
            ask = Ask(turn.query, user_name, turn.time, True, stored_ids=turn.message_ids)
        else:
            return None
        self._unanswered = None
        return self._answer(self._prepare(ask, (None, None, None), None, "auto"), stream)

    def pop_turns(self, count: int = 1, forget: bool = True) -> list[ChatTurn]:
        """Undo the last `count` turns: drop them from the chat and, with `forget`, delete the
        messages they stored, the user's and the replies (memories already drawn from them by
        consolidation stay)."""
        if count < 0:
            raise ValueError(f"count must be zero or more, got {count}")
        removed = self.turns[len(self.turns) - min(count, len(self.turns)) :]
        del self.turns[len(self.turns) - len(removed) :]
        self._unanswered = None
        if forget:
            for user_name in dict.fromkeys(turn.user_name or self.user_name for turn in removed):
                ids = tuple(i for turn in removed if (turn.user_name or self.user_name) == user_name for i in turn.stored_ids)
                self._storage.forget(user_name, ids)
        return removed

    def run_service_operation(self, name: str, role_name: str | None = None, **inputs: Any) -> str:
        """Run a service operation for `role_name` (default: this chat's user); returns readable text.

        Inputs are MemoryScope 0.1.x's keywords (`query=`, `memory_id=`, `timestamp=`) or context fields.
        """
        door = self._scope.door.for_service(self.service)  # the verbs' limits and ownership, as every face
        settings = self._scope.config.settings
        caller = door.caller(self.user_name if role_name is None else role_name)  # a blank id is refused there
        result = door.run(caller, name, **caller_inputs(name, inputs, settings.tzinfo))
        return result.readable(name, settings.language, settings.tzinfo)

    def start_backend_service(self, **_: Any) -> None:
        """MemoryScope 0.1.x: let backend operations run by their triggers (they do unless stopped)."""
        self.service.start_backend_service()

    # -- pieces ------------------------------------------------------------------------------

    @property
    def _language(self) -> str:
        return self._scope.config.settings.language

    @property
    def _options(self) -> dict[str, Any]:
        return self.params.generation_model_kwargs

    def _ask(self, query: str, role_name: str | None, query_time: datetime | None, remember: bool) -> Ask:
        zone = self._scope.config.settings.tzinfo
        if query_time is None:
            moment = datetime.now(zone)
        else:
            moment = query_time.replace(tzinfo=zone) if query_time.tzinfo is None else query_time
        if role_name is not None and not role_name.strip():
            raise InvalidInputError("user_id is empty (role_name); give the user's id, or leave it out for the chat's user")
        return Ask(query, self.user_name if role_name is None else role_name, moment, remember)

    def _answer(self, turn: _Prepared, stream: bool | None, model_options: Mapping[str, Any] | None = None) -> Any:
        """The reply to a prepared turn (see `chat_with_memory`); the turn is remembered after it."""
        stream = self.stream if stream is None else stream
        options = {**self._options, **(model_options or {})}
        ask, meta, model = turn.ask, turn.meta, turn.model
        if model is None:
            response = self._memories_instead(meta)
            self._remember(ask, response.message.content, replied=False)
            return iter([with_delta(response, response.message.content)]) if stream else response
        if stream:
            answered, failed = partial(self._remember, ask), partial(self._remember_unanswered, ask)
            return stream_reply(model, turn.messages, options, meta, answered, failed)
        started = time.perf_counter()
        try:
            reply = model.chat(turn.messages, **options)
        except (Exception, KeyboardInterrupt):  # Ctrl-C while waiting: the message was still said
            self._remember_unanswered(ask)
            raise
        meta["timings"]["generation"] = time.perf_counter() - started
        self._remember(ask, reply)
        return ChatResponse(ChatMessage("assistant", reply), meta)

    def _prepare(self, ask: Ask, prompt_parts: PromptParts, history: History | None, strategy: HistoryStrategy) -> _Prepared:
        """Everything before the reply: the memories found, and the messages to send."""
        ask, found = self._retrieve(ask)
        meta = found_meta(found, self._scope.config.settings, self.params.retrieve_operation)
        model = self._model()
        if model is None:
            return _Prepared(ask, meta, None, [])
        system = self._system(ask, meta, *prompt_parts)
        messages = self._messages(ask, system, history, strategy)
        meta["prompt_tokens"] = sum(count_tokens(message.content) for message in messages)  # what is sent, memories included
        return _Prepared(ask, meta, model, messages)

    def _model(self) -> GenerationModel | None:
        return self._scope.env.generation_model(self.params.generation_model, f"memory_chat.{self.name}.generation_model")

    def _retrieve(self, ask: Ask) -> tuple[Ask, RunResult]:
        """The memories for the query, and `ask` with the vectors of its query and message."""
        recent = self._turns_of(ask.user_name)[-self._history_cap() :]
        said = tuple(message for turn in recent for message in self._said(turn))
        ask = replace(ask, embedded=self._storage.embed_query_and_message(ask))
        inputs = {"query": ask.query, "query_time": ask.time, "chat_history": said, "embedded": ask.embedded}
        return ask, self.service.run_operation(self.params.retrieve_operation, ask.user_name, **inputs)

    def _memories_instead(self, meta: dict[str, Any]) -> ChatResponse:
        response = memories_instead(meta, self._language, first=not self._told_no_llm)
        self._told_no_llm = True
        return response

    def _system(
        self,
        ask: Ask,
        meta: dict[str, Any],
        system_prompt: str | None,
        memory_prompt: str | None,
        temporary_memories: str | None,
    ) -> ChatMessage:
        prompt = SystemPrompt(
            language=self._language,
            assistant=self.assistant_name,
            user=ask.user_name,
            now=format_time(ask.time, self._language, self._scope.config.settings.tzinfo),
            memories=tuple(meta["memory_lines"]),
            system_prompt=self.params.system_prompt if system_prompt is None else system_prompt,
            memory_prompt=memory_prompt,
            temporary_memories=temporary_memories,
        )
        return ChatMessage("system", prompt.text())

    def _messages(self, ask: Ask, system: ChatMessage, history: History | None, strategy: HistoryStrategy) -> list[ChatMessage]:
        if history is not None:  # what was said in text (function calls and their results are left out)
            recent = [message for item in history if (message := _chat_message(item)) is not None][-2 * self._history_cap() :]
        else:
            recent = [
                message
                for turn in history_turns(self._turns_of(ask.user_name), strategy, self._history_cap(), self._scope.store)
                for message in turn_messages(turn)
            ]
        return [system, *recent, ChatMessage("user", ask.query)]

    def _history_cap(self) -> int:
        count = self.params.history_message_count
        return self.service.params.contextual_msg_max_count if count is None else count

    def _turns_of(self, user_name: str) -> list[ChatTurn]:
        return [turn for turn in self.turns if (turn.user_name or self.user_name) == user_name]

    def _said(self, turn: ChatTurn) -> tuple[Message, ...]:
        return said(turn, self.user_name, self.assistant_name)

    def _remember(self, ask: Ask, reply: str, replied: bool = True) -> None:
        """Keep the turn and store its messages: the user's and, when the model `replied` (not
        the memories listed without an LLM), the reply."""
        self._unanswered = None
        if not ask.remember:
            return
        stored = self._storage.store(ask, reply if replied else None)
        self.turns.append(ChatTurn(ask.query, reply, ask.time, stored.all_ids, ask.user_name, stored.reply_ids))
        del self.turns[: max(len(self.turns) - self.service.params.history_msg_count, 0)]

    def _remember_unanswered(self, ask: Ask) -> None:
        """The reply failed: the message was still said, so it is stored; `retry` asks it again."""
        self._unanswered = ask
        if ask.remember:
            stored = self._storage.store(ask, None)
            self._unanswered = replace(ask, stored_ids=stored.message_ids)


def _chat_message(item: ChatMessage | Mapping[str, Any]) -> ChatMessage | None:
    """A history item as a text message; None for a `tool` result or a message with no text (calls only)."""
    if isinstance(item, ChatMessage):
        return item
    role, content = str(item["role"]), item.get("content")
    if role == "tool" or not isinstance(content, str) or not content:
        return None
    return ChatMessage(role, content)
