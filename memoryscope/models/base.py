"""The three model roles the workers use, and the usage counters every model keeps.

Concrete backends (`openai_like`, `bge_embedding`, `local_embedding`, `bge_rank`, `fusion_rank`,
...) subclass these and register under their `module_name` in the backend registries below.

Function calling (OpenAI "tools") is optional for a generation model: `supports_tools` says
whether `chat_with_tools` (and its async and streamed forms) works; a model without it raises a
`ModelError` saying so. Its messages and tool schemas are OpenAI wire-format dicts, its answer a
`ToolReply` (streamed: `ToolReplyPiece`s, the calls in `ToolCallDelta`s as OpenAI streams them).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from memoryscope.errors import ModelError
from memoryscope.registry import Registry

if TYPE_CHECKING:
    from memoryscope.memory import MemoryNode

__all__ = [
    "CallTally",
    "tally_calls",
    "Usage",
    "ModelParams",
    "ChatMessage",
    "ToolCall",
    "ToolReply",
    "ToolCallDelta",
    "ToolReplyPiece",
    "GenerationModel",
    "PresetGenerationModel",
    "EmbeddingModel",
    "RankModel",
    "GENERATION_BACKENDS",
    "EMBEDDING_BACKENDS",
    "RANK_BACKENDS",
]


@dataclass
class CallTally:
    """What the model calls made inside one `tally_calls()` block cost, by the role of the model
    (`generation`, `embedding`, `rank`): calls, prompt and completion tokens."""

    by_role: dict[str, dict[str, int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, role: str, prompt_tokens: int, completion_tokens: int) -> None:
        with self._lock:
            entry = self.by_role.setdefault(role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
            entry["calls"] += 1
            entry["prompt_tokens"] += prompt_tokens
            entry["completion_tokens"] += completion_tokens

    def of(self, role: str) -> dict[str, int]:
        """The calls of models of this role (zeros when none)."""
        with self._lock:
            return dict(self.by_role.get(role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}))

    def roles(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {role: dict(entry) for role, entry in self.by_role.items()}


_TALLY: ContextVar[CallTally | None] = ContextVar("memoryscope_call_tally", default=None)


@contextmanager
def tally_calls() -> Iterator[CallTally]:
    """Count the model calls this block makes (in its task, and in threads and tasks it starts),
    apart from everyone else's: what one request cost."""
    tally = CallTally()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


@dataclass
class Usage:
    """What one model has cost so far. Thread-safe; read with `snapshot()`."""

    role: str = ""  # the kind of model counted: generation, embedding, rank
    calls: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, *, latency_s: float, prompt_tokens: int = 0, completion_tokens: int = 0, error: bool = False) -> None:
        tally = _TALLY.get()
        if tally is not None and not error:
            tally.add(self.role, prompt_tokens, completion_tokens)
        with self._lock:
            self.calls += 1
            self.errors += int(error)
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            self.latency_s += latency_s

    @contextmanager
    def measure(self) -> Iterator[dict[str, int]]:
        """Time a call; the body may set `tokens["prompt"]` / `tokens["completion"]`."""
        tokens = {"prompt": 0, "completion": 0}
        started = time.perf_counter()
        failed = True
        try:
            yield tokens
            failed = False
        finally:
            self.record(
                latency_s=time.perf_counter() - started,
                prompt_tokens=tokens["prompt"],
                completion_tokens=tokens["completion"],
                error=failed,
            )

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return {
                "calls": self.calls,
                "errors": self.errors,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "latency_s": round(self.latency_s, 6),
            }


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for."""

    id: str  # as the model sent it; "call_<n>" when it sent none. Tool results answer it by this id
    name: str  # the function's name
    arguments: str  # the JSON text of the arguments as the model sent it; may be malformed, the caller parses


@dataclass(frozen=True)
class ToolReply:
    """A model's answer to `chat_with_tools`: its text and the functions it called, in order."""

    content: str  # "" when the model said nothing besides its calls
    tool_calls: tuple[ToolCall, ...] = ()  # () when it called no function


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of one function call in a streamed reply, as OpenAI streams `delta.tool_calls`."""

    index: int  # which call of the reply (0, 1, ...): pieces with the same index make one call
    id: str = ""  # on the call's first piece only
    name: str = ""  # the function's name, on the call's first piece only
    arguments: str = ""  # the next characters of the arguments' JSON text


@dataclass(frozen=True)
class ToolReplyPiece:
    """A piece of a streamed `astream_chat_with_tools` reply: new text, new parts of calls, or both."""

    content: str = ""
    tool_calls: tuple[ToolCallDelta, ...] = ()


class _Model(ABC):  # noqa: B024  # shared state only; the roles below declare the abstract methods
    """Shared by every model: a backend name, a model name, an endpoint and usage counters."""

    backend: str = ""
    role: ClassVar[str] = ""

    def __init__(self, model_name: str, endpoint: str = "local") -> None:
        self.model_name = model_name
        self.endpoint = endpoint
        self.usage = Usage(role=self.role)

    def __repr__(self) -> str:  # never shows keys
        return f"{type(self).__name__}(backend={self.backend!r}, model={self.model_name!r}, endpoint={self.endpoint!r})"


class GenerationModel(_Model):
    """Chat completion: sync, async and streaming."""

    role: ClassVar[str] = "generation"

    @abstractmethod
    def chat(self, messages: Sequence[ChatMessage], **options: Any) -> str: ...

    @abstractmethod
    def stream_chat(self, messages: Sequence[ChatMessage], **options: Any) -> Iterator[str]:
        """Yield the reply in pieces as they arrive."""

    @abstractmethod
    async def achat(self, messages: Sequence[ChatMessage], **options: Any) -> str: ...

    @abstractmethod
    def astream_chat(self, messages: Sequence[ChatMessage], **options: Any) -> AsyncIterator[str]: ...

    # -- function calling (optional) ---------------------------------------------------------

    @property
    def supports_tools(self) -> bool:
        """True when `chat_with_tools` works with this model."""
        return False

    def chat_with_tools(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], **options: Any
    ) -> ToolReply:
        """One chat completion offering `tools` to the model.

        `messages` are OpenAI wire-format dicts: `{"role": "system" | "user" | "assistant" | "tool",
        "content": str | None}`, an assistant message may carry `"tool_calls": [{"id", "type":
        "function", "function": {"name", "arguments"}}]`, a tool message carries the `"tool_call_id"`
        it answers. `tools` are OpenAI tool schemas (`{"type": "function", "function": {"name",
        "description", "parameters"}}`), sent as given. Raises `ModelError` when the model does not
        support function calling (see `supports_tools`)."""
        raise self._tools_unsupported()

    async def achat_with_tools(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], **options: Any
    ) -> ToolReply:
        """Async `chat_with_tools`."""
        raise self._tools_unsupported()

    def astream_chat_with_tools(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], **options: Any
    ) -> AsyncIterator[ToolReplyPiece]:
        """`achat_with_tools` streamed: its text and its calls in pieces as they arrive (a call's
        id and name first, then its arguments)."""
        raise self._tools_unsupported()

    def _tools_unsupported(self) -> ModelError:
        """The error of a function-calling request to a model that does not support it."""
        return ModelError(
            self.backend, self.model_name, self.endpoint,
            "this backend does not support function calling (tools); use an OpenAI-compatible backend such as `openai_like`",
        )  # fmt: skip


class PresetGenerationModel(GenerationModel):
    """A generation model with call options set in advance (a worker's `generation_model_kwargs`,
    e.g. `{temperature: 0.7}`): every call sends them, the call's own options winning. Usage is
    counted on the model it wraps."""

    def __init__(self, model: GenerationModel, options: dict[str, Any]) -> None:
        super().__init__(model.model_name, model.endpoint)
        self.backend = model.backend
        self.usage = model.usage
        self.model, self.options = model, dict(options)

    def chat(self, messages: Sequence[ChatMessage], **options: Any) -> str:
        return self.model.chat(messages, **{**self.options, **options})

    def stream_chat(self, messages: Sequence[ChatMessage], **options: Any) -> Iterator[str]:
        return self.model.stream_chat(messages, **{**self.options, **options})

    async def achat(self, messages: Sequence[ChatMessage], **options: Any) -> str:
        return await self.model.achat(messages, **{**self.options, **options})

    def astream_chat(self, messages: Sequence[ChatMessage], **options: Any) -> AsyncIterator[str]:
        return self.model.astream_chat(messages, **{**self.options, **options})

    @property
    def supports_tools(self) -> bool:
        return self.model.supports_tools

    def chat_with_tools(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], **options: Any
    ) -> ToolReply:
        return self.model.chat_with_tools(messages, tools, **{**self.options, **options})

    async def achat_with_tools(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], **options: Any
    ) -> ToolReply:
        return await self.model.achat_with_tools(messages, tools, **{**self.options, **options})

    def astream_chat_with_tools(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], **options: Any
    ) -> AsyncIterator[ToolReplyPiece]:
        return self.model.astream_chat_with_tools(messages, tools, **{**self.options, **options})


class EmbeddingModel(_Model):
    """Text → unit vectors. Queries and passages may be embedded differently (e5 prefixes)."""

    role: ClassVar[str] = "embedding"

    @property
    @abstractmethod
    def dimension(self) -> int:
        """The vector size; a remote model not told it (`dimensions`) asks the server once."""

    @property
    def known_dimension(self) -> int | None:
        """The vector size when known without calling the model, else None (a remote model
        learns it from its first reply). Opening a store reads this, never `dimension`: nothing
        reaches a model before the first operation that needs it."""
        return self.dimension

    @abstractmethod
    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dimension) float32, rows L2-normalised."""

    @abstractmethod
    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dimension) float32, rows L2-normalised."""

    async def aembed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_queries(texts)

    async def aembed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]

    def embed_queries_and_passages(self, queries: Sequence[str], passages: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """`(embed_queries(queries), embed_passages(passages))`; a remote model sends both in one
        request (a chat turn embeds its query and the message it will store)."""
        return self.embed_queries(queries), self.embed_passages(passages)


class RankModel(_Model):
    """Scores memories against a query; higher is more relevant."""

    role: ClassVar[str] = "rank"

    @abstractmethod
    def score(self, query: str, memories: Sequence[MemoryNode], query_time: datetime | None = None) -> list[float]:
        """One score per memory, in the order given."""


GENERATION_BACKENDS: Registry[type[GenerationModel]] = Registry(
    "generation backend", GenerationModel, ("memoryscope.models.generation",)
)
EMBEDDING_BACKENDS: Registry[type[EmbeddingModel]] = Registry(
    "embedding backend", EmbeddingModel, ("memoryscope.models.embedding",)
)
RANK_BACKENDS: Registry[type[RankModel]] = Registry("rank backend", RankModel, ("memoryscope.models.rank",))


class ModelParams(BaseModel):
    """Base of every backend's `Params` (the YAML keys of one `model:` entry, less `class`/`module_name`).

    Unknown keys are an error. Secrets never sit here: `api_key_env` names an environment variable.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=())

    model_name: str = Field(..., description="The model's name as its endpoint knows it.")
