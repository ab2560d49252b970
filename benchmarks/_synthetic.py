"""Synthetic memories for load tests: text from a small Zipf-distributed vocabulary, random vectors.

The text only has to exercise keyword search realistically: a few very common words with long
posting lists and a long tail of rare ones, as in real chat. Words are made-up syllable strings
(no stopwords among them, so every word reaches the keyword index). Vectors are random unit
vectors passed to `store.upsert(vectors=...)`: the embedding model is never called.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np

from memoryscope.memory import MemoryNode, MemoryType

__all__ = ["SyntheticText", "synthetic_nodes", "unit_vectors"]

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
    """Sentences and queries over `vocabulary_size` made-up words with Zipf (s = 1) frequencies."""

    def __init__(self, vocabulary_size: int = 2000, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        words: list[str] = []
        seen: set[str] = set()
        while len(words) < vocabulary_size:
            word = "".join(rng.choice(_SYLLABLES, size=int(rng.integers(2, 4))))
            if word not in seen:
                seen.add(word)
                words.append(word)
        self.words = np.array(words)
        weights = 1.0 / np.arange(1, vocabulary_size + 1)
        self.probabilities = weights / weights.sum()

    def sentences(self, count: int, rng: np.random.Generator, low: int = 8, high: int = 24) -> list[str]:
        lengths = rng.integers(low, high + 1, size=count)
        picked = rng.choice(len(self.words), size=int(lengths.sum()), p=self.probabilities)
        out, start = [], 0
        for length in lengths:
            out.append(" ".join(self.words[picked[start : start + length]]))
            start += length
        return out

    def queries(self, count: int, rng: np.random.Generator) -> list[str]:
        return self.sentences(count, rng, low=3, high=8)


def unit_vectors(count: int, dimension: int, rng: np.random.Generator) -> np.ndarray:
    vectors = rng.standard_normal((count, dimension)).astype(np.float32)
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
