"""MemoryOS retrieval, mid term: the segments most like the query, and their pages most like it."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.memory import MemoryNode
from memoryscope.stores.base import MemoryStore, SearchMode
from memoryscope.stores.metadata import MetadataCondition
from memoryscope.worker import Worker, WorkerParams, register_worker
from memoryscope.workers._memoryos import PAGE, SEGMENT, scope_filter

__all__ = ["MemoryosRecallMidWorker", "query_vector_of"]


@register_worker("memoryos_recall_mid")
class MemoryosRecallMidWorker(Worker):
    """`mid_term_recall`: the `top_segments` segments whose summaries are most similar to the
    query (cosine on the store's vectors, at least `similarity_threshold`), best first, then the
    best pages of those segments (at least `similarity_threshold` too), at most
    `retrieval_queue_capacity` pages in all, best first. Scores are set. Reads only: the visits
    are counted by `memoryos_pack`."""

    reads: ClassVar[tuple[str, ...]] = ("query",)
    optional_reads: ClassVar[tuple[str, ...]] = ("query_vector",)
    writes: ClassVar[tuple[str, ...]] = ("mid_term_recall",)

    class Params(WorkerParams):
        similarity_threshold: float = Field(0.7, ge=-1, le=1, description="Least cosine similarity of a segment or page kept.")
        retrieval_queue_capacity: int = Field(7, gt=0, le=1000, description="At most this many mid-term pages retrieved.")
        top_segments: int = Field(5, gt=0, le=1000, description="At most this many segments searched for pages.")

    params: Params

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")

    def run(self, ctx: MemoryContext) -> None:
        if not ctx.query.strip():
            ctx.mid_term_recall = ()
            return
        vector = query_vector_of(self._store, ctx)
        p = self.params
        found = self._store.search(scope_filter(ctx, SEGMENT), vector=vector, mode=SearchMode.DENSE, top_k=p.top_segments)
        segments = [node for node in found if (node.score or 0.0) >= p.similarity_threshold]
        pages: list[MemoryNode] = []
        if segments:
            ids = tuple(node.memory_id for node in segments)
            memory_filter = scope_filter(ctx, PAGE, metadata=(MetadataCondition("memoryos_segment_id", "in", ids),))
            hits = self._store.search(memory_filter, vector=vector, mode=SearchMode.DENSE, top_k=p.retrieval_queue_capacity)
            pages = [node for node in hits if (node.score or 0.0) >= p.similarity_threshold]
        # each segment followed by its pages (best first), so the pack reads topic by topic
        ordered: list[MemoryNode] = []
        for segment in segments:
            ordered.append(segment)
            ordered += [page for page in pages if page.meta.get("memoryos_segment_id") == segment.memory_id]
        ctx.mid_term_recall = tuple(ordered)


def query_vector_of(store: MemoryStore, ctx: MemoryContext) -> np.ndarray:
    """The caller's query vector, else the query embedded once with the store's model."""
    if ctx.query_vector is not None:
        return ctx.query_vector
    return store.embedding_model.embed_query(ctx.query)
