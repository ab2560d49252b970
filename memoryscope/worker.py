"""The worker contract, written once.

A worker is one step of a workflow. It declares the context fields it `reads` and `writes`, and
a `Params` model whose fields are its YAML keys (unknown keys are rejected, each field is
described). It is built once from config (`__init__`), looks up its models and store once
(`bind`), and then `run(ctx)` may be called many times, concurrently, on different contexts: it
only assigns the fields it declared and keeps no per-run state on `self`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from memoryscope.config.bounds import BoundedParams
from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.registry import Registry

__all__ = ["Worker", "WorkerParams", "LLMWorkerParams", "WORKERS", "register_worker"]


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


class Worker(ABC):
    reads: ClassVar[tuple[str, ...]] = ()
    writes: ClassVar[tuple[str, ...]] = ()
    # Fields used when an earlier step wrote them and ignored otherwise (e.g. `time_range`, which
    # `extract_time` may or may not provide); the check does not require them.
    optional_reads: ClassVar[tuple[str, ...]] = ()
    # LLM-only steps are skipped (with one notice) when no generation model is configured.
    needs_generation_model: ClassVar[bool] = False

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


WORKERS: Registry[type[Worker]] = Registry("worker", Worker, ("memoryscope.workers",))
register_worker = WORKERS.register
