"""MemoryOS retrieval: embed the query once, for the tiers searched in parallel after it."""

from __future__ import annotations

from typing import ClassVar

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.stores.base import MemoryStore
from memoryscope.worker import Worker, register_worker

__all__ = ["MemoryosQueryWorker"]


@register_worker("memoryos_query")
class MemoryosQueryWorker(Worker):
    """`query_vector`: the caller's, else the vector of the query among the caller's `embedded`
    texts (a chat turn embeds it already), else the query embedded once with the store's model.
    Nothing when the query is empty."""

    reads: ClassVar[tuple[str, ...]] = ("query",)
    optional_reads: ClassVar[tuple[str, ...]] = ("query_vector", "embedded")
    writes: ClassVar[tuple[str, ...]] = ("query_vector",)

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")

    def run(self, ctx: MemoryContext) -> None:
        if ctx.query_vector is not None or not ctx.query.strip():
            return
        given = next((item.vector for item in ctx.embedded if item.is_query and item.text == ctx.query), None)
        ctx.query_vector = given if given is not None else self._store.embedding_model.embed_query(ctx.query)
