"""Synthetic memories for load tests: text from a Zipf-distributed vocabulary, random vectors.

The text only has to load keyword search the way real chat does. Calibrated on the LoCoMo turns
(content words, i.e. after stopwords): there, a turn has ~14 content words, the most common word
is in 23% of turns, and a question's words together appear in ~8% of turns (summed document
frequency). Here: 8-20 words a memory from 20,000 made-up words with Zipf-Mandelbrot frequencies
(1 / (rank + 5)), so the most common word is in ~25% of memories; queries of 3-8 words from the
same distribution without its 10 most common words (questions are not made of chat filler),
summed document frequency ~0.1. Vectors are random unit vectors passed to
`store.upsert(vectors=...)`: the embedding model is never called.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import lru_cache

import numpy as np

from memoryscope.memory import MemoryNode, MemoryType

__all__ = ["SyntheticText", "clustered_unit_vectors", "synthetic_nodes", "unit_vectors"]

_SYLLABLES = (
    "ka",
    "ri",
    "to",
    "mu",
    "se",
    "na",
    "lo",
    "vi",
    "pe",
    "du",
    "ga",
    "shi",
    "ro",
    "ne",
    "ba",
    "tu",
    "mi",
    "zo",
    "fe",
    "la",
    "qua",
    "bri",
    "sto",
    "kle",
    "dra",
    "mon",
    "vel",
    "tas",
    "cor",
    "fin",
    "gal",
    "hur",
    "jen",
    "lix",
    "pol",
    "rud",
    "sam",
    "ter",
    "yun",
    "zek",
)
_TYPES = (MemoryType.CONVERSATION, MemoryType.OBSERVATION, MemoryType.INSIGHT)
_TYPE_SHARE = (0.5, 0.35, 0.15)
BASE_TIME = datetime(2024, 1, 1, tzinfo=timezone.utc)


class SyntheticText:
    """Sentences and queries over `vocabulary_size` made-up words with Zipf-Mandelbrot frequencies."""

    def __init__(self, vocabulary_size: int = 20_000, seed: int = 0, offset: float = 5.0, query_skip: int = 10) -> None:
        self.words = _vocabulary(vocabulary_size, seed)
        weights = 1.0 / (np.arange(1, vocabulary_size + 1) + offset)
        self.probabilities = weights / weights.sum()
        query_weights = weights.copy()
        query_weights[:query_skip] = 0.0
        self.query_probabilities = query_weights / query_weights.sum()

    def sentences(self, count: int, rng: np.random.Generator, low: int = 8, high: int = 20) -> list[str]:
        return self._draw(count, rng, low, high, self.probabilities)

    def queries(self, count: int, rng: np.random.Generator) -> list[str]:
        return self._draw(count, rng, 3, 8, self.query_probabilities)

    def _draw(self, count: int, rng: np.random.Generator, low: int, high: int, probabilities: np.ndarray) -> list[str]:
        lengths = rng.integers(low, high + 1, size=count)
        picked = rng.choice(len(self.words), size=int(lengths.sum()), p=probabilities)
        out, start = [], 0
        for length in lengths:
            out.append(" ".join(self.words[picked[start : start + length]]))
            start += length
        return out


@lru_cache(maxsize=4)
def _vocabulary(size: int, seed: int) -> np.ndarray:
    """`size` distinct made-up words of 2-4 syllables, the same for the same seed."""
    rng = np.random.default_rng(seed)
    words: dict[str, None] = {}
    while len(words) < size:
        count = 2 * (size - len(words)) + 16
        syllables = rng.choice(_SYLLABLES, size=(count, 4))
        lengths = rng.integers(2, 5, size=count)
        for row, length in zip(syllables, lengths, strict=True):
            words.setdefault("".join(row[:length]), None)
    return np.array(list(words)[:size])


def unit_vectors(count: int, dimension: int, rng: np.random.Generator) -> np.ndarray:
    vectors = rng.standard_normal((count, dimension)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


CLUSTERS = 1000  # topics of `clustered_unit_vectors`
_CLUSTER_NOISE = 0.8  # per dimension, against centres of unit variance: a cosine of ~0.6 to the centre


def clustered_unit_vectors(count: int, dimension: int, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors around `CLUSTERS` fixed centres (the same for every call of a dimension), as
    text embeddings cluster by topic. Random unit vectors (`unit_vectors`) have no neighbours to
    speak of: every vector is about as far from a query as every other, which no approximate
    index can rank (nor needs to: no embedding model makes them)."""
    centres = np.random.default_rng(12345).standard_normal((CLUSTERS, dimension)).astype(np.float32)
    vectors = (
        centres[rng.integers(0, CLUSTERS, count)] + rng.standard_normal((count, dimension)).astype(np.float32) * _CLUSTER_NOISE
    )
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def synthetic_nodes(user_name: str, texts: list[str], rng: np.random.Generator) -> list[MemoryNode]:
    """One node per text, of mixed kinds (conversation / observation / insight), said over a year."""
    kinds = rng.choice(len(_TYPES), size=len(texts), p=_TYPE_SHARE)
    minutes = rng.integers(0, 365 * 24 * 60, size=len(texts))
    nodes = []
    for text, kind, minute in zip(texts, kinds, minutes, strict=True):
        moment = BASE_TIME + timedelta(minutes=int(minute))
        nodes.append(
            MemoryNode(
                user_name=user_name,
                content=text,
                memory_type=_TYPES[kind],
                created_at=moment,
                updated_at=moment,
                message_time=moment,
            )
        )
    return nodes
