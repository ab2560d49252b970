"""An example worker shipped in its own package: `class: shout` upper-cases the query.

The package's `pyproject.toml` registers it under the entry point group `memoryscope.workers`:

    [project.entry-points."memoryscope.workers"]
    shout = "shout_worker:ShoutWorker"

so, once installed, any config may name it, in `worker:` or straight in a workflow:

    worker:
      shout: {class: shout, mark: "!!"}
    memory_service:
      memoryscope_service:
        memory_operations:
          retrieve_memory: {workflow: "set_query,shout,[extract_time|retrieve_obs_ins,semantic_rank],fuse_rerank"}
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.worker import Worker, WorkerParams

__all__ = ["ShoutWorker"]


class ShoutWorker(Worker):
    """Upper-case `query` and end it with `mark`."""

    reads: ClassVar[tuple[str, ...]] = ("query",)
    writes: ClassVar[tuple[str, ...]] = ("query",)

    class Params(WorkerParams):
        mark: str = Field("!", max_length=10, description="What the shouted query ends with.")

    params: Params

    def run(self, ctx: MemoryContext) -> None:
        ctx.query = ctx.query.upper() + self.params.mark
