"""`fusion_rank`: local ranking with no model weights and no network, the offline default.

Three signals, each min-max normalised to [0, 1] over the candidates being ranked, then mixed
by the weights in `Params` (a weighted mean, so only the weights' ratios matter):

- vector: the retrieval score already on each memory (`node.score`, e.g. cosine similarity from
  the store); a memory without one gets the lowest;
- keyword: BM25 of the query's stemmed content words (`memoryscope.text.keyword_terms`, English
  and Chinese) against what keyword search indexes of each memory (`searchable_parts`: content
  and key, and around a chat message its speaker, context and reply, whose words count
  `around_weight`), with document frequencies from the candidates themselves, so words shared
  by every candidate weigh little;
- recency: `0.5 ** (age_days / recency_half_life_days)`, the age measured from when the memory
  was said (`message_time`, else `created_at`) to `query_time` (else now). Future times count
  as age 0.

A signal that is equal for every candidate carries no information and adds 0 to all of them.
Scores lie in [0, 1] and compare memories within one call only.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timezone
from functools import lru_cache
from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from memoryscope.memory import searchable_parts
from memoryscope.models.base import RANK_BACKENDS, ModelParams, RankModel
from memoryscope.text import keyword_terms

if TYPE_CHECKING:
    from memoryscope.memory import MemoryNode

__all__ = ["FusionRank", "bm25_scores", "min_max"]

_BM25_K1 = 1.2  # term-frequency saturation, the usual BM25 defaults
_BM25_B = 0.75  # length normalisation
_SECONDS_PER_DAY = 86400.0


@RANK_BACKENDS.register("fusion_rank")
class FusionRank(RankModel):
    """Vector score + keyword overlap + recency, mixed by fixed weights."""

    backend = "fusion_rank"

    class Params(ModelParams):
        model_name: str = Field(default="fusion", description="Informational; there is no model.")
        vector_weight: float = Field(default=0.5, ge=0, description="Weight of the retrieval score on each memory.")
        keyword_weight: float = Field(default=0.3, ge=0, description="Weight of BM25 keyword overlap with the query.")
        recency_weight: float = Field(default=0.2, ge=0, description="Weight of how recently the memory was said.")
        recency_half_life_days: float = Field(default=30.0, gt=0, description="Age at which the recency signal halves.")
        around_weight: float = Field(
            default=0.5,
            ge=0,
            le=1,
            description="How much a word around a chat message (its speaker, context, reply) counts against one of its own.",
        )

        @model_validator(mode="after")
        def _some_weight(self) -> FusionRank.Params:
            if self.vector_weight + self.keyword_weight + self.recency_weight <= 0:
                raise ValueError("at least one of vector_weight, keyword_weight, recency_weight must be above 0")
            return self

    def __init__(self, params: Params | None = None) -> None:
        params = params or self.Params()
        super().__init__(params.model_name, endpoint="local")
        self.params = params

    def score(self, query: str, memories: Sequence[MemoryNode], query_time: datetime | None = None) -> list[float]:
        if not memories:
            return []
        with self.usage.measure():
            params = self.params
            signals = (
                (params.vector_weight, min_max([_vector_score(memory) for memory in memories])),
                (params.keyword_weight, min_max(self._keyword_scores(query, memories))),
                (params.recency_weight, min_max(self._recency(memories, query_time))),
            )
            total = sum(weight for weight, _ in signals)
            return [sum(weight * values[i] for weight, values in signals) / total for i in range(len(memories))]

    def _keyword_scores(self, query: str, memories: Sequence[MemoryNode]) -> list[float]:
        return bm25_scores(query, [searchable_parts(memory) for memory in memories], self.params.around_weight)

    def _recency(self, memories: Sequence[MemoryNode], query_time: datetime | None) -> list[float]:
        now = query_time or datetime.now(timezone.utc)
        if now.tzinfo is None:
            raise ValueError(f"query_time must be timezone-aware, got naive {now!r}")
        half_life = self.params.recency_half_life_days
        decays = []
        for memory in memories:
            said = memory.message_time or memory.created_at
            age_days = max(0.0, (now - said).total_seconds() / _SECONDS_PER_DAY)
            decays.append(0.5 ** (age_days / half_life))
        return decays


def _vector_score(memory: MemoryNode) -> float:
    return memory.score if memory.score is not None and math.isfinite(memory.score) else -math.inf


@lru_cache(maxsize=4096)
def _term_counts(document: tuple[str, str], around_weight: float) -> dict[str, float]:
    """The keyword terms of a memory's `(own, around)` text, counted, a word around it counting
    `around_weight`; cached since the same memories come back query after query. Callers only
    read the result."""
    own, around = document
    counts: dict[str, float] = dict(Counter(keyword_terms(own)))
    for term, count in Counter(keyword_terms(around)).items():
        counts[term] = counts.get(term, 0.0) + around_weight * count
    return counts


def min_max(values: Sequence[float]) -> list[float]:
    """`values` scaled to [0, 1]; -inf (no value) becomes 0; all equal becomes all 0."""
    finite = [value for value in values if math.isfinite(value)]
    if not finite:
        return [0.0] * len(values)
    low, high = min(finite), max(finite)
    if high == low:
        return [0.0] * len(values)
    return [(value - low) / (high - low) if math.isfinite(value) else 0.0 for value in values]


def bm25_scores(query: str, documents: Sequence[tuple[str, str]], around_weight: float = 1.0) -> list[float]:
    """BM25 of the query's content words in each `(own, around)` document (words around counting
    `around_weight`, as in BM25F), statistics taken over `documents`."""
    query_terms = set(keyword_terms(query))
    if not query_terms or not documents:
        return [0.0] * len(documents)
    counts = [_term_counts(document, around_weight) for document in documents]
    lengths = [sum(count.values()) for count in counts]
    average_length = (sum(lengths) / len(lengths)) or 1.0
    total = len(documents)
    idf = {}
    for term in query_terms:
        frequency = sum(1 for count in counts if term in count)
        idf[term] = math.log(1.0 + (total - frequency + 0.5) / (frequency + 0.5))
    scores = []
    for count, length in zip(counts, lengths, strict=True):
        norm = _BM25_K1 * (1.0 - _BM25_B + _BM25_B * length / average_length)
        scores.append(sum(idf[t] * count[t] * (_BM25_K1 + 1.0) / (count[t] + norm) for t in query_terms if t in count))
    return scores
