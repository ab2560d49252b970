"""Reciprocal rank fusion: merge ranked result lists without comparing their scores.

Dense (cosine) and keyword (BM25) scores live on different scales, so hybrid search fuses the
*ranks* instead: an item at rank r (1-based) in a list earns `weight / (k + r)`, and its fused
score is the sum over lists (Cormack, Clarke and Büttcher, SIGIR 2009; k = 60 as there).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

__all__ = ["reciprocal_rank_fusion"]

ItemId = TypeVar("ItemId", bound=Hashable)


def reciprocal_rank_fusion(
    ranked_lists: Sequence[Sequence[ItemId]], k: int = 60, weights: Sequence[float] | None = None
) -> list[tuple[ItemId, float]]:
    """Fuse lists of ids (best first) into one list of `(id, fused score)`, best first.

    An id repeated inside one list counts at its first (best) rank only. Equal fused scores keep
    the order in which the ids were first met, so the result is deterministic.
    """
    if k <= 0:
        raise ValueError(f"reciprocal_rank_fusion: k must be positive, got {k}")
    if weights is None:
        weights = [1.0] * len(ranked_lists)
    elif len(weights) != len(ranked_lists):
        raise ValueError(f"reciprocal_rank_fusion: {len(weights)} weights for {len(ranked_lists)} ranked lists")
    fused: dict[ItemId, float] = {}
    for ranked, weight in zip(ranked_lists, weights, strict=True):
        seen: set[ItemId] = set()
        for rank, item in enumerate(ranked, start=1):
            if item in seen:
                continue
            seen.add(item)
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    # sorted() is stable, so ties keep first-met order (dicts keep insertion order)
    return sorted(fused.items(), key=lambda pair: pair[1], reverse=True)
