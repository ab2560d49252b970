"""Re-score retrieved memories against the query with the rank model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.errors import ModelError
from memoryscope.models.base import RankModel
from memoryscope.worker import Worker, WorkerParams, register_worker

__all__ = ["SemanticRankWorker"]


@register_worker("semantic_rank")
class SemanticRankWorker(Worker):
    """Order `retrieved` by relevance to `query` and keep the best `top_k` as `ranked`.

    With `global.enable_ranker` the rank model scores every candidate (rank backends give
    scores in about [0, 1]; they are used as given). Without it, or for an empty query, the
    retrieval scores are kept, scaled so the best is 1 (dense cosines, BM25 and reciprocal-rank
    scores live on different scales); memories that were listed rather than searched (no score)
    count as 1. Either way `ranked` scores are in [0, 1], which `fuse_rerank`'s threshold assumes.
    """

    reads: ClassVar[tuple[str, ...]] = ("query", "query_time", "retrieved")
    writes: ClassVar[tuple[str, ...]] = ("ranked",)

    class Params(WorkerParams):
        rank_model: str = Field("rank_model", description="Key under `model:` of the rank model.")
        top_k: int = Field(100, gt=0, description="How many ranked memories to keep, best first.")

    params: Params

    def bind(self, env: Env) -> None:
        self._ranker: RankModel | None = None
        if env.settings.enable_ranker:
            self._ranker = env.rank_model(self.params.rank_model, where=f"worker.{self.name}.rank_model")

    def run(self, ctx: MemoryContext) -> None:
        candidates = ctx.retrieved
        if self._ranker is not None and ctx.query and candidates:
            scores = self._ranker.score(ctx.query, candidates, ctx.query_time)
            if len(scores) != len(candidates):
                ranker = self._ranker
                message = f"returned {len(scores)} scores for {len(candidates)} memories"
                raise ModelError(ranker.backend, ranker.model_name, ranker.endpoint, message)
        else:
            scores = _relative([node.score for node in candidates])
        order = sorted(range(len(candidates)), key=scores.__getitem__, reverse=True)[: self.params.top_k]
        ctx.ranked = tuple([candidates[index].with_score(float(scores[index])) for index in order])


def _relative(scores: Sequence[float | None]) -> list[float]:
    """Retrieval scores scaled into [0, 1] with the best at 1; unscored memories get 1."""
    top = max((score for score in scores if score is not None), default=0.0)
    if top <= 0:
        return [1.0 if score is None else 0.0 for score in scores]
    return [1.0 if score is None else max(score, 0.0) / top for score in scores]
