"""Show memories to a person: time-stamped lines grouped by kind, each with its id."""

from __future__ import annotations

from typing import ClassVar
from zoneinfo import ZoneInfo

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.listing import memory_listing
from memoryscope.worker import Worker, WorkerParams, register_worker

__all__ = ["PrintMemoryWorker"]


@register_worker("print_memory")
class PrintMemoryWorker(Worker):
    """Render `memories` as `result`, for `/list_memory` and the like.

    One section per kind (insight, added, observation, conversation, expired; empty kinds are
    left out), in the order given within a section:

        ----- observation memory (1) -----
        [2024-10-26 21:26:20 Sat] user plays the guitar (id: 6f1c...)

    Times are shown in `global.timezone`, weekday and headers in `global.language`; the id is
    what `/delete_memory` takes.
    """

    reads: ClassVar[tuple[str, ...]] = ("memories",)
    writes: ClassVar[tuple[str, ...]] = ("result",)

    class Params(WorkerParams):
        pass

    def bind(self, env: Env) -> None:
        self._language: str = env.settings.language
        self._zone: ZoneInfo = env.settings.tzinfo

    def run(self, ctx: MemoryContext) -> None:
        ctx.result = memory_listing(ctx.memories, self._language, self._zone)
