"""`fusion_rank`: local ranking with no model weights and no network, the offline default.

Three signals, each min-max normalised to [0, 1] over the candidates being ranked, then mixed
by the weights in `Params` (a weighted mean, so only the weights' ratios matter):

- vector: the retrieval score already on each memory (`node.score`, e.g. cosine similarity from
  the store); a memory without one gets the lowest;
- keyword: BM25 of the query's stemmed content words (`memoryscope.text.keyword_terms`, English
  and Chinese) against what keyword search indexes of each memory (`searchable_parts`: content
  and key, and around a chat message its speaker, context and reply, whose words count
  `around_weight`), with document frequencies from the candidates themselves, so words shared
  by every candidate weigh little. A memory's terms are those its store kept when it was
  written (`MemoryNode.rank_terms`, `memoryscope.text.rank_terms`), parsed here only for a
  memory without them: the same numbers either way;
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

import numpy as np
from pydantic import Field, model_validator

from memoryscope.memory import parts_of, searchable_fields
from memoryscope.models.base import RANK_BACKENDS, ModelParams, RankModel
from memoryscope.text import keyword_terms, rank_terms_parts

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
            now = query_time or datetime.now(timezone.utc)
            if now.tzinfo is None:
                raise ValueError(f"query_time must be timezone-aware, got naive {now!r}")
            # One array per signal, mixed in numpy: ~100 candidates a query, ranked on the
            # latency path. Every operation is the one a loop over floats would do, in the same
            # order, so the scores are the same numbers to the last bit.
            mixed = params.vector_weight * _scaled(_vector_scores(memories))
            # a signal weighted 0 adds exactly 0 to every score: not worth computing
            if params.keyword_weight:
                mixed += params.keyword_weight * _scaled(self._keyword_scores(query, memories))
            if params.recency_weight:
                mixed += params.recency_weight * _scaled(self._recency(memories, now))
            mixed /= params.vector_weight + params.keyword_weight + params.recency_weight
            return mixed.tolist()

    def _keyword_scores(self, query: str, memories: Sequence[MemoryNode]) -> np.ndarray:
        around_weight = self.params.around_weight
        # terms the store parsed when the memory was written, else parsed here (kept: see below)
        return _bm25(
            query,
            [
                _document_of(searchable_fields(memory), around_weight)
                if (terms := memory.rank_terms) is None
                else _document_of_terms(terms, around_weight)
                for memory in memories
            ],
        )

    def _recency(self, memories: Sequence[MemoryNode], now: datetime) -> np.ndarray:
        """`0.5 ** (age / half_life)`, the day conversion folded into the scale; age 0 and the
        future give 1."""
        # In UTC, as stores decode times: a difference of two times of one zone object is plain
        # arithmetic, of two zones a call to each zone's offset (2-3x dearer).
        now = now.astimezone(timezone.utc)
        scale = _SECONDS_PER_DAY * self.params.recency_half_life_days
        return np.array(
            [
                0.5 ** (age / scale) if (age := (now - (memory.message_time or memory.created_at)).total_seconds()) > 0 else 1.0
                for memory in memories
            ]
        )


def _vector_scores(memories: Sequence[MemoryNode]) -> np.ndarray:
    """Each memory's retrieval score; -inf (the lowest, once scaled) for one without it."""
    scores = np.array([memory.score for memory in memories], dtype=float)  # None becomes nan
    scores[~np.isfinite(scores)] = -math.inf
    return scores


# As many as `sqlite_memory_store` keeps decoded nodes (`node_cache_size`): a memory decoded once
# is parsed once. ~0.8-2.2 KB each (a chat message with its context and reply the most).
_DOCUMENTS_KEPT = 20_000


@lru_cache(maxsize=_DOCUMENTS_KEPT)
def _document_of(fields: tuple[object, ...], around_weight: float) -> tuple[dict[str, float], float]:
    """`_document` of a memory's `searchable_fields` (a cheaper cache key than the joined parts)."""
    return _document(*parts_of(fields), around_weight)


@lru_cache(maxsize=_DOCUMENTS_KEPT)
def _document_of_terms(terms: str, around_weight: float) -> tuple[dict[str, float], float]:
    """`_document` of a memory's stored `rank_terms` (no parsing: ~10x cheaper than `_document`,
    and the same numbers). Cached too: a store hands back the same string object for a memory it
    keeps decoded, whose hash Python keeps."""
    own, around = rank_terms_parts(terms)
    return _counted(own, around, around_weight)


def _document(own: str, around: str, around_weight: float) -> tuple[dict[str, float], float]:
    """The keyword terms of a memory's `own` and `around` text, counted (a word around it
    counting `around_weight`), and their total: the document's length. Cached since the same
    memories come back query after query. Callers only read the result."""
    return _counted(keyword_terms(own), keyword_terms(around) if around else [], around_weight)


def _counted(own: list[str], around: list[str], around_weight: float) -> tuple[dict[str, float], float]:
    """`_document` of term lists already parsed."""
    counts: dict[str, float] = {}
    for term in own:  # a plain loop: about twice as fast as Counter for ~15 words
        counts[term] = counts.get(term, 0.0) + 1.0
    if around:
        for term, count in Counter(around).items():
            counts[term] = counts.get(term, 0.0) + around_weight * count
    return counts, sum(counts.values())


def min_max(values: Sequence[float]) -> list[float]:
    """`values` scaled to [0, 1]; -inf (no value) becomes 0; all equal becomes all 0."""
    return _scaled(np.array(values, dtype=float)).tolist()


def _scaled(values: np.ndarray) -> np.ndarray:
    """`min_max` of an array (a new one)."""
    finite = np.isfinite(values)
    if not finite.any():
        return np.zeros(len(values))
    every = finite.all()
    kept = values if every else values[finite]
    low, high = kept.min(), kept.max()
    if high == low:
        return np.zeros(len(values))
    scaled = (values - low) / (high - low)
    if not every:
        scaled[~finite] = 0.0
    return scaled


def bm25_scores(query: str, documents: Sequence[tuple[str, str]], around_weight: float = 1.0) -> list[float]:
    """BM25 of the query's content words in each `(own, around)` document (words around counting
    `around_weight`, as in BM25F), statistics taken over `documents`."""
    return _bm25(query, [_document(own, around, around_weight) for own, around in documents]).tolist()


def _bm25(query: str, parsed: Sequence[tuple[dict[str, float], float]]) -> np.ndarray:
    """`bm25_scores` over documents already counted by `_document`."""
    query_terms = set(keyword_terms(query))
    if not query_terms or not parsed:
        return np.zeros(len(parsed))
    total = len(parsed)
    lengths = [length for _, length in parsed]
    average_length = (sum(lengths) / total) or 1.0  # summed in order, as the scores always were
    # a column of counts per query term (in the set's order, as always), filled where a document
    # holds one: most candidates share one word or none with the query, and a set intersection
    # per document is 2x cheaper than a lookup per term and document
    column = {term: index for index, term in enumerate(query_terms)}
    rows: list[int] = []
    columns: list[int] = []
    found: list[float] = []
    for row, (document, _) in enumerate(parsed):
        # most candidates share no term: a test without a new set, then the terms of the others
        if not document.keys().isdisjoint(query_terms):
            for term in document.keys() & query_terms:
                rows.append(row)
                columns.append(column[term])
                found.append(document[term])
    counts = np.zeros((total, len(column)))
    if rows:  # one numpy store for all the counts found
        counts[rows, columns] = found
    held = np.count_nonzero(counts, axis=0)
    idf = np.array([math.log(1.0 + (total - frequency + 0.5) / (frequency + 0.5)) for frequency in held.tolist()])
    norm = _BM25_K1 * (1.0 - _BM25_B + _BM25_B * np.array(lengths) / average_length)
    # a term a document lacks adds exactly 0.0: the sums are those of its terms alone
    return (idf * counts * (_BM25_K1 + 1.0) / (counts + norm[:, None])).sum(axis=1)
