"""The worker contract, written once.

A worker is one step of a workflow. It declares the context fields it `reads` and `writes`, and
a `Params` model whose fields are its YAML keys (unknown keys are rejected, each field is
described). It is built once from config (`__init__`), looks up its models and store once
(`bind`), and then `run(ctx)` may be called many times, concurrently, on different contexts: it
only assigns the fields it declared and keeps no per-run state on `self`. A worker that asks the
generation model subclasses `LLMWorker`, which binds the model and the prompts and asks with the
repair-once policy: such a worker is its prompt and its parse.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar
from zoneinfo import ZoneInfo

from pydantic import ConfigDict, Field

from memoryscope.config.bounds import BoundedParams
from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.errors import MemoryScopeError
from memoryscope.llm_output import ask as ask_with_repair
from memoryscope.models.base import ChatMessage, GenerationModel
from memoryscope.prompts import load_prompts
from memoryscope.registry import Registry

__all__ = ["Worker", "WorkerParams", "LLMWorker", "LLMWorkerParams", "WORKERS", "register_worker"]

T = TypeVar("T")


class WorkerParams(BoundedParams):
    """Base of every worker's `Params`: unknown keys are an error, numbers are bounded
    (`memoryscope.config.bounds`: at most 10,000,000 unless a field sets its own `le=`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class LLMWorkerParams(WorkerParams):
    """Base of the `Params` of a worker that calls an LLM."""

    generation_model_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Options sent with every LLM call of this worker (temperature, max_tokens, top_p, ...); "
        "MemoryScope 0.1's key of the same name.",
    )
    generation_model: str = Field("generation_model", description="Key under `model:` of the LLM this worker calls.")


class Worker(ABC):
    reads: ClassVar[tuple[str, ...]] = ()
    writes: ClassVar[tuple[str, ...]] = ()
    # Fields used when an earlier step wrote them and ignored otherwise (e.g. `time_range`, which
    # `extract_time` may or may not provide); the check does not require them.
    optional_reads: ClassVar[tuple[str, ...]] = ()
    # LLM-only steps are skipped (with one notice) when no generation model is configured.
    needs_generation_model: ClassVar[bool] = False
    # The memory types this worker writes or reads by name: each must be registered
    # (`memoryscope.memory_types.register_memory_type`, in the worker's own package), or the plan
    # check refuses the workflow.
    memory_types: ClassVar[tuple[str, ...]] = ()

    class Params(WorkerParams):
        pass

    def __init__(self, name: str, params: WorkerParams) -> None:
        self.name = name
        self.params = params

    def bind(self, env: Env) -> None:
        """Look up models and the store once, before any run."""

    @abstractmethod
    def run(self, ctx: MemoryContext) -> None:
        """Do the step: read declared fields of `ctx`, assign declared fields."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class LLMWorker(Worker):
    """A worker that asks the generation model. A new one is its prompt and its parse::

        # workers/prompts/name_mood.yaml (one block per language; `global.language` picks one,
        # English when the file has none for it; literal braces are doubled)
        en:
          system: |
            You read what {user} said and name their mood in one word.
          user: |
            {messages}
            Mood:
        zh:
          ...

        # workers/name_mood.py
        @register_worker("name_mood")
        class NameMoodWorker(LLMWorker):
            # Set `result` to the mood of the pending messages.
            reads = ("pending_messages",)
            writes = ("result",)
            prompt_name = "name_mood"
            expected_format = {"en": "one word, e.g. cheerful", "zh": "一个词，例如 开心"}
            answer_name = "mood"

            def run(self, ctx: MemoryContext) -> None:
                said = "\n".join(node.content for node in ctx.pending_messages)
                mood = self.ask(self.prompt_messages(user=ctx.user_name, messages=said), parse_mood)
                ctx.result = mood or ""


        def parse_mood(reply: str) -> str | None:
            # The one word of the reply; None (ask again, once) when it is anything else.
            words = reply.strip().strip(".").split()
            return words[0].casefold() if len(words) == 1 else None

    What every LLM worker gets from here:

    - `Params` from `LLMWorkerParams`: `generation_model` (a key under `model:`) and
      `generation_model_kwargs` (options sent with every call: temperature, max_tokens, ...).
    - `bind` looks the model up once, wrapped so that every call sends those options (`None`
      when the config has no such model: then `needs_generation_model` makes the service skip
      the step; a key naming an embedding or rank model is a `ConfigError` at its YAML path), and
      reads the prompt texts in `global.language` once. A worker whose params can turn its LLM
      off says so in `llm_enabled()`; a worker for which the LLM is only a hint sets
      `needs_generation_model = False`.
    - `ask(messages, parse)`: the repair-once policy of `memoryscope.llm_output.ask`. The reply
      goes through `parse`; when that gives None, ONE repair request names `expected_format` (in
      the language), then None is returned and a warning names `answer_name`. What None means
      (skip the item, keep the input pending, ...) is the worker's decision. A failing endpoint
      raises its `ModelError`: the run fails and its input stays pending.
    - Without its model, `require_model()` and `ask` raise `missing_model_error()`.
    - Usage (calls, tokens, latency) is counted on the configured model, which the options
      wrapper shares: every request a worker makes, repairs included, shows in the app's usage.
    """

    needs_generation_model: ClassVar[bool] = True
    # The prompt file, `workers/prompts/<prompt_name>.yaml`.
    prompt_name: ClassVar[str] = ""
    # A worker shipped outside `memoryscope.workers` gives its prompts here instead, in the
    # layout of those files: {"en": {"system": ..., "user": ...}, "zh": {...}}.
    prompt_texts: ClassVar[Mapping[str, Mapping[str, str]]] = {}
    # What the repair request asks for: one text, or one per language (English when missing).
    expected_format: ClassVar[str | Mapping[str, str]] = "the requested format"
    # The answer, as the warning about an unreadable one names it ("message scores").
    answer_name: ClassVar[str] = "answer"

    class Params(LLMWorkerParams):
        pass

    params: LLMWorkerParams

    def bind(self, env: Env) -> None:
        super().bind(env)
        self._language: str = env.settings.language
        self._zone: ZoneInfo = env.settings.tzinfo
        self._model: GenerationModel | None = None
        if self.llm_enabled():
            params = self.params
            self._model = env.generation_model(params.generation_model, self.model_where, params.generation_model_kwargs)
        self._prompts: dict[str, str] = self._read_prompts()

    def llm_enabled(self) -> bool:
        """Whether this worker's params let it call its LLM at all (a switch or a count of 0 may not)."""
        return True

    @property
    def model_where(self) -> str:
        """The YAML path of this worker's model key."""
        return f"worker.{self.name}.generation_model"

    def require_model(self) -> GenerationModel:
        """The generation model, or `missing_model_error()`."""
        if self._model is None:
            raise self.missing_model_error()
        return self._model

    def missing_model_error(self) -> MemoryScopeError:
        """An LLM step run without its LLM fails the run (its input stays pending), never passes
        the input on unexamined. Without any LLM configured, the service skips such steps."""
        key = self.params.generation_model
        return MemoryScopeError(f"worker {self.name!r} needs the generation model `model.{key}`, which is not configured")

    def prompt_messages(self, **values: Any) -> list[ChatMessage]:
        """The `system` and `user` prompts filled with `values` (a text ignores those it does not name)."""
        return [
            ChatMessage("system", self._prompts["system"].format(**values)),
            ChatMessage("user", self._prompts["user"].format(**values)),
        ]

    def ask(self, messages: Sequence[ChatMessage], parse: Callable[[str], T | None]) -> T | None:
        """`parse(the model's reply)`; when None, one repair request; then None (logged)."""
        formats = self.expected_format
        wanted = formats if isinstance(formats, str) else formats.get(self._language, formats["en"])
        return ask_with_repair(
            self.require_model(), messages, parse, expected_format=wanted, language=self._language, what=self.answer_name
        )

    def _read_prompts(self) -> dict[str, str]:
        if self.prompt_texts:
            return dict(self.prompt_texts.get(self._language) or self.prompt_texts["en"])
        if not self.prompt_name:
            raise MemoryScopeError(f"{type(self).__name__} names no prompts: set `prompt_name` (or `prompt_texts`)")
        return load_prompts(self.prompt_name, self._language)


WORKERS: Registry[type[Worker]] = Registry("worker", Worker, ("memoryscope.workers",))
register_worker = WORKERS.register
