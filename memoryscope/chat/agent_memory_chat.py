"""`agent_memory_chat`: a MemGPT-style agent that manages its own memory by function calls.

    chat = scope.memory_chats["agent_memory_chat"]          # configs/agent.yaml selects it
    response = chat.chat_with_memory("I moved to Hangzhou")
    response.message.content                                 # what the agent sent (send_message)
    response.meta_data["inner_monologue"], response.meta_data["steps"], response.meta_data["context_window"]
    for piece in chat.chat_with_memory("where do I live?", stream=True):
        print(piece.delta, end="")

Unlike `api_memory_chat`, which retrieves memories for every message, the agent decides: it
edits its core memory blocks, keeps and searches archival memory, and searches past messages,
through the functions of `memoryscope.agent.tools`, step by step (`memoryscope.agent.engine`).
Its state (blocks, summary, queue, counters) lives in the store per user and survives a restart.
The user's messages and the messages the agent sends are stored as conversation memories by
the `store_operation`, so the service's consolidation and reflection can run beside it, as the
YAML switches them, and what they learn is found by `archival_memory_search`.

The model must call functions (OpenAI tools): `memoryscope check-config` refuses a model with
`function_calling: false`. Streaming yields the agent's message once its step has sent it.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memoryscope.agent.blocks import BlockSpec
from memoryscope.agent.context_window import WindowSettings
from memoryscope.agent.engine import Agent, AgentSettings, TurnResult
from memoryscope.chat.base import CHATS, ChatParams, ChatResponse
from memoryscope.chat.remember import TurnStorage
from memoryscope.door import AgentRecord
from memoryscope.errors import InvalidInputError, MemoryScopeError
from memoryscope.models.base import ChatMessage, GenerationModel

if TYPE_CHECKING:
    from memoryscope.app import MemoryScope

__all__ = ["AgentMemoryChat", "BlockConfig", "DEFAULT_PERSONA", "agent_chat"]

DEFAULT_PERSONA = {
    "en": "I am {assistant}, a warm and curious companion. I remember what matters to the people I talk with.",
    "zh": "我是{assistant}，一个温暖、好奇的伙伴。我会记住对话中对方在意的事。",
}
DEFAULT_CONTEXT_WINDOW = 8192  # when neither the chat nor its model says


class BlockConfig(BaseModel):
    """One core memory block: its name, its limit in characters, its first value."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    limit: int = Field(2000, gt=0, le=100_000, description="Most characters the block may hold.")
    value: str = Field("", description="Its text before the agent first edits it ({assistant} is filled in).")


def _default_blocks() -> list[BlockConfig]:
    return [BlockConfig(name="persona", limit=2000, value=DEFAULT_PERSONA["en"]), BlockConfig(name="human", limit=2000, value="")]


@CHATS.register("agent_memory_chat")
class AgentMemoryChat:
    """A MemGPT-style agent per user, over the scope's store, models and service."""

    needs_function_calling = True  # the config check refuses a generation model that cannot call functions
    manages_own_memory = True  # the user's profile is the agent's `human` block (`memoryscope.door`'s `profile`)

    class Params(ChatParams):
        user_name: str = Field("", description="Whose agent; defaults to the service's `human_name`.")
        blocks: list[BlockConfig] = Field(default_factory=_default_blocks, description="The core memory blocks.")
        max_steps_per_turn: int = Field(8, gt=0, le=100, description="Steps (model requests) one user message may take.")
        context_window: int | None = Field(
            None, gt=0, le=10_000_000, description="Tokens the model takes; default: the model's `context_window`, else 8192."
        )
        warning_fraction: float = Field(0.7, gt=0, le=1, description="Past this share of the window, warn the agent.")
        flush_fraction: float = Field(1.0, gt=0, le=1, description="Past this share, summarise the oldest messages.")

        @model_validator(mode="after")
        def _sound(self) -> AgentMemoryChat.Params:
            names = [block.name for block in self.blocks]
            if len(set(names)) != len(names):
                raise ValueError(f"blocks: each name once, got {names}")
            if self.flush_fraction < self.warning_fraction:
                raise ValueError(
                    f"flush_fraction ({self.flush_fraction}) is below warning_fraction ({self.warning_fraction}): "
                    "the agent would lose messages before it is warned"
                )
            return self

    def __init__(self, name: str, params: Params, scope: MemoryScope, _agents: _AgentPool | None = None) -> None:
        self.name = name
        self.params = params
        self._scope = scope
        self.service = scope.services[params.memory_service]
        self.user_name = params.user_name or self.service.params.human_name
        self.stream = params.stream
        self._agents = _AgentPool() if _agents is None else _agents  # shared by `for_user` copies: one agent per user
        embedder = scope.env.query_embedding_model(None, f"memory_chat.{name}")
        self._storage = TurnStorage(self.service, params.store_operation, embedder, scope.store)

    @property
    def scope(self) -> MemoryScope:
        return self._scope

    @property
    def agent(self) -> Agent:
        """This chat's user's agent (built on first use, with its saved state)."""
        return self.agent_for(self.user_name)

    def agent_for(self, user: str, *, target_name: str = "", first_values: Mapping[str, str] | None = None) -> Agent:
        """The agent of `user` (and of `target_name`: one of the user's named agents, whose id it
        is), built on first use with its saved state. `first_values`: the text blocks begin with
        when they are first made (a named agent's persona and human), instead of the config's."""
        key = (user, target_name)
        with self._agents.lock:
            if key not in self._agents.by_user:
                settings = self._settings()
                if first_values:
                    unknown = sorted(set(first_values) - {spec.name for spec in settings.blocks})
                    if unknown:
                        raise MemoryScopeError(f"memory_chat.{self.name}.blocks has no block {', '.join(unknown)}")
                    blocks = tuple(replace(spec, initial=first_values.get(spec.name, spec.initial)) for spec in settings.blocks)
                    settings = replace(settings, blocks=blocks)
                self._agents.by_user[key] = Agent(
                    self._scope, user, self._model(), settings, self._storage, target_name=target_name
                )
            return self._agents.by_user[key]

    def named_agent(self, user: str, record: AgentRecord) -> Agent:
        """The agent of one of the user's named agents (`Door.create_agent`): its blocks begin
        with the record's persona and human."""
        return self.agent_for(user, target_name=record.id, first_values={"persona": record.persona, "human": record.human})

    def first_values(self) -> dict[str, str]:
        """The text each block of a new agent begins with, as configured (`{assistant}` filled in)."""
        return {spec.name: spec.initial for spec in self._settings().blocks}

    def forget_agent(self, user: str, target_name: str) -> None:
        """Drop a built agent (one deleted from the store) from this chat's pool."""
        with self._agents.lock:
            self._agents.by_user.pop((user, target_name), None)

    def for_user(self, user_name: str) -> AgentMemoryChat:
        return type(self)(self.name, self.params.model_copy(update={"user_name": user_name}), self._scope, self._agents)

    # -- chatting ----------------------------------------------------------------------------

    def chat_with_memory(
        self,
        query: str,
        role_name: str | None = None,
        system_prompt: str | None = None,
        memory_prompt: str | None = None,
        temporary_memories: str | None = None,
        history_message_strategy: Any = "auto",
        remember_response: bool = True,
        *,
        history: Any = None,
        stream: bool | None = None,
        query_time: datetime | None = None,
    ) -> Any:
        """A `ChatResponse` (with `stream=True`, an iterator of pieces with `.delta`). The
        agent keeps its own context, so `history`, `system_prompt` and the other prompt
        arguments of `api_memory_chat` are accepted and not used; `role_name` picks the user."""
        if role_name is not None and not role_name.strip():
            raise InvalidInputError("user_id is empty (role_name); give the user's id, or leave it out for the chat's user")
        agent = self.agent_for(self.user_name if role_name is None else role_name)
        result = agent.send(query, when=query_time)
        response = _response(result)
        return _pieces(response) if (self.stream if stream is None else stream) else response

    async def achat_with_memory(self, query: str, role_name: str | None = None, *args: Any, **kwargs: Any) -> Any:
        """As `chat_with_memory`, for asyncio (the steps run in a worker thread)."""
        stream = kwargs.pop("stream", None)
        response = await asyncio.to_thread(self.chat_with_memory, query, role_name, *args, stream=False, **kwargs)
        return _apieces(response) if (self.stream if stream is None else stream) else response

    # -- building ----------------------------------------------------------------------------

    def _model(self) -> GenerationModel:
        where = f"memory_chat.{self.name}.generation_model"
        model = self._scope.env.generation_model(self.params.generation_model, where)
        if model is None:
            raise MemoryScopeError(
                f"{where}: the agent needs a generation model that calls functions, and none is configured "
                "(for the shipped configs: set MEMORYSCOPE_LLM_API_BASE and MEMORYSCOPE_LLM_API_KEY)"
            )
        if not model.supports_tools:
            raise MemoryScopeError(f"{where}: {model.model_name} does not call functions (function_calling: false)")
        return model

    def _settings(self) -> AgentSettings:
        global_settings = self._scope.config.settings
        assistant = self.service.params.assistant_name or "assistant"
        language = global_settings.language
        blocks = tuple(BlockSpec(b.name, b.limit, self._first_value(b, assistant, language)) for b in self.params.blocks)
        window = WindowSettings(
            context_window=self.params.context_window or self._model_window(),
            warning_fraction=self.params.warning_fraction,
            flush_fraction=self.params.flush_fraction,
        )
        return AgentSettings(blocks, window, self.params.max_steps_per_turn, language, assistant)

    def _first_value(self, block: BlockConfig, assistant: str, language: str) -> str:
        value = block.value
        if block.name == "persona" and value == DEFAULT_PERSONA["en"]:
            value = DEFAULT_PERSONA.get(language, value)
        return value.replace("{assistant}", assistant)

    def _model_window(self) -> int:
        spec = self._scope.config.models.get(self.params.generation_model)
        window = getattr(spec.params, "context_window", None) if spec is not None else None
        return int(window) if isinstance(window, int) and window > 0 else DEFAULT_CONTEXT_WINDOW


def agent_chat(scope: MemoryScope) -> AgentMemoryChat:
    """The scope's `agent_memory_chat`; a MemoryScopeError saying which config to use when it has none."""
    chat = next((c for c in scope.chats.values() if isinstance(c, AgentMemoryChat)), None)
    if chat is None:
        raise MemoryScopeError(
            f"{scope.config.source} has no agent_memory_chat under memory_chat:; use --config agent (or a config with one)"
        )
    return chat


@dataclass
class _AgentPool:
    """The agents a chat and its `for_user` copies share: one per user, so two requests for the
    same user (a server makes a copy per request) take turns on one agent's lock."""

    by_user: dict[tuple[str, str], Agent] = field(default_factory=dict)  # (user, target) -> agent
    lock: threading.Lock = field(default_factory=threading.Lock)


def _response(result: TurnResult) -> ChatResponse:
    meta = {
        "inner_monologue": [step.thought for step in result.steps if step.thought],
        "steps": [
            {"thought": step.thought, "calls": [asdict(call) for call in step.calls], "heartbeat": step.heartbeat}
            for step in result.steps
        ],
        "notices": list(result.notices),
        "memories": "",
        "memory_lines": [],
        "memory_ids": [],
        "timings": dict(result.timings),
        "context_window": dict(result.context_window),
    }
    return ChatResponse(ChatMessage("assistant", result.reply), meta)


def _chunks(text: str) -> list[str]:
    return re.findall(r"\s*\S+\s*", text) or [text]


def _pieces(response: ChatResponse) -> Iterator[ChatResponse]:
    text = ""
    for piece in _chunks(response.message.content):
        text += piece
        yield ChatResponse(ChatMessage("assistant", text), response.meta_data, delta=piece)


async def _apieces(response: ChatResponse) -> AsyncIterator[ChatResponse]:
    for piece in _pieces(response):
        yield piece
