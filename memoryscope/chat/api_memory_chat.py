"""`api_memory_chat`: chat with memory from Python — retrieve, answer, remember."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import Field

from memoryscope.chat.base import CHATS, ChatParams, ChatResponse
from memoryscope.context import Message
from memoryscope.memory import format_time
from memoryscope.models.base import ChatMessage

if TYPE_CHECKING:
    from memoryscope.app import MemoryScope

__all__ = ["ApiMemoryChat"]

SYSTEM_PROMPTS = {
    "en": (
        "You are a helpful assistant with long-term memory of the user.\n"
        "The current time is {now}.\n"
        "What you remember about the user (time-stamped, most relevant first):\n{memories}\n"
        "Use these memories when they help; do not invent memories."
    ),
    "zh": (
        "你是一个拥有用户长期记忆的助手。\n"
        "现在的时间是 {now}。\n"
        "你记得的关于用户的信息（带时间，最相关的在前）：\n{memories}\n"
        "在有帮助时使用这些记忆；不要编造记忆。"
    ),
}
NO_MEMORIES = {"en": "(nothing yet)", "zh": "（暂无）"}
NO_LLM_REPLY = {
    "en": "No LLM is configured, so here is what I remember that fits your message:\n{memories}",
    "zh": "未配置大模型，以下是与你的消息相关的记忆：\n{memories}",
}


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
        self.history: list[ChatMessage] = []

    # -- chatting ----------------------------------------------------------------------------

    def chat_with_memory(
        self,
        query: str,
        history: Sequence[ChatMessage] | None = None,
        stream: bool | None = None,
        query_time: datetime | None = None,
    ) -> Any:
        """A `ChatResponse`; with `stream=True`, an iterator of responses carrying `meta_data["delta"]`."""
        stream = self.params.stream if stream is None else stream
        now = query_time or datetime.now(self._scope.config.settings.tzinfo)
        found = self.service.run_operation(self.params.retrieve_operation, self.user_name, query=query, query_time=now)
        lines = self._format([memory for memory in found.context.memories])
        meta: dict[str, Any] = {
            "memories": lines,
            "memory_ids": [m.memory_id for m in found.context.memories],
            "timings": dict(found.timings),
        }
        model = self._scope.env.generation_model(self.params.generation_model, f"memory_chat.{self.name}.generation_model")
        if model is None:
            reply = NO_LLM_REPLY[self._language].format(memories="\n".join(lines) or NO_MEMORIES[self._language])
            response = ChatResponse(ChatMessage("assistant", reply), meta)
            self._remember(query, reply, now)
            return iter([self._with_delta(response, reply)]) if stream else response
        messages = self._prompt(query, lines, now, history)
        if stream:
            return self._stream(model, messages, query, now, meta)
        started = time.perf_counter()
        reply = model.chat(messages)
        meta["timings"]["generation"] = time.perf_counter() - started
        self._remember(query, reply, now)
        return ChatResponse(ChatMessage("assistant", reply), meta)

    def run_service_operation(self, name: str, **inputs: Any) -> str:
        """Run a service operation for this chat's user; returns its readable result."""
        result = self.service.run_operation(name, self.user_name, **inputs)
        if result.context.result:
            return result.context.result
        return result.stopped or f"{name}: done"

    # -- pieces ------------------------------------------------------------------------------

    @property
    def _language(self) -> str:
        return self._scope.config.settings.language

    def _format(self, memories: Sequence[Any]) -> list[str]:
        settings = self._scope.config.settings
        return [memory.format(settings.language, settings.tzinfo) for memory in memories]

    def _prompt(self, query: str, lines: list[str], now: datetime, history: Sequence[ChatMessage] | None) -> list[ChatMessage]:
        system = SYSTEM_PROMPTS[self._language].format(
            now=format_time(now, self._language), memories="\n".join(lines) or NO_MEMORIES[self._language]
        )
        recent = list(history if history is not None else self.history)[-2 * self.params.history_message_count :]
        return [ChatMessage("system", system), *recent, ChatMessage("user", query)]

    def _stream(
        self, model: Any, messages: list[ChatMessage], query: str, now: datetime, meta: dict[str, Any]
    ) -> Iterator[ChatResponse]:
        pieces: list[str] = []
        for delta in model.stream_chat(messages):
            pieces.append(delta)
            yield self._with_delta(ChatResponse(ChatMessage("assistant", "".join(pieces)), dict(meta)), delta)
        self._remember(query, "".join(pieces), now)

    @staticmethod
    def _with_delta(response: ChatResponse, delta: str) -> ChatResponse:
        response.meta_data["delta"] = delta
        return response

    def _remember(self, query: str, reply: str, now: datetime) -> None:
        self.history += [ChatMessage("user", query), ChatMessage("assistant", reply)]
        if self.params.store_operation in self.service.operations:
            message = Message(role="user", content=query, time=now, name=self.user_name)
            self.service.run_operation(self.params.store_operation, self.user_name, messages=(message,))
