"""MemoryOS retrieval, long term: the user profile and the knowledge entries most like the query."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.memory import MemoryNode, MemoryStatus
from memoryscope.stores.base import MemoryStore, SearchMode
from memoryscope.worker import Worker, WorkerParams, register_worker
from memoryscope.workers._memoryos import KNOWLEDGE, profile_id, scope_filter
from memoryscope.workers.memoryos_recall_mid import query_vector_of

__all__ = ["MemoryosRecallLongWorker"]


@register_worker("memoryos_recall_long")
class MemoryosRecallLongWorker(Worker):
    """`long_term_recall`: the profile (when there is one), then the `knowledge_top_k` user
    knowledge entries and the `knowledge_top_k` assistant knowledge entries most similar to the
    query (at least `knowledge_similarity_threshold`), best first. Reads only."""

    reads: ClassVar[tuple[str, ...]] = ("query",)
    optional_reads: ClassVar[tuple[str, ...]] = ("query_vector",)
    writes: ClassVar[tuple[str, ...]] = ("long_term_recall",)

    class Params(WorkerParams):
        knowledge_top_k: int = Field(5, ge=0, le=1000, description="Knowledge entries of each kind retrieved; 0 for none.")
        knowledge_similarity_threshold: float = Field(0.0, ge=-1, le=1, description="Least cosine similarity of an entry kept.")

    params: Params

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")

    def run(self, ctx: MemoryContext) -> None:
        found: list[MemoryNode] = [
            node
            for node in self._store.get([profile_id(ctx.user_name, ctx.target_name, ctx.workspace)])
            if node.status is MemoryStatus.VALID and _owner(node) == (ctx.user_name, ctx.target_name, ctx.workspace)
        ]
        p = self.params
        if p.knowledge_top_k and ctx.query.strip():
            vector = query_vector_of(self._store, ctx)
            memory_filter = scope_filter(ctx, KNOWLEDGE)
            # one search for both kinds; enough candidates that neither kind crowds the other out
            hits = self._store.search(memory_filter, vector=vector, mode=SearchMode.DENSE, top_k=p.knowledge_top_k * 4)
            for about in ("user", "assistant"):
                kept = [node for node in hits if node.key == about and (node.score or 0.0) >= p.knowledge_similarity_threshold]
                found += kept[: p.knowledge_top_k]
        ctx.long_term_recall = tuple(found)


def _owner(node: MemoryNode) -> tuple[str, str, str]:
    return node.user_name, node.target_name, node.workspace
