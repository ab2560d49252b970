"""How hybrid search merges its dense and keyword lists (a store's `hybrid_fusion`).

- `rrf`, reciprocal rank fusion: dense (cosine) and keyword (BM25) scores live on different
  scales, so fuse the *ranks*: an item at rank r (1-based) in a list earns `weight / (k + r)`,
  and its fused score is the sum over lists (Cormack, Clarke and Büttcher, SIGIR 2009; k = 60).
- `scores`, score fusion: each list's scores min-max scaled to [0, 1] over its own hits, then
  summed with the lists' weights (a convex combination, as Bruch, Gai and Ingber, "An Analysis
  of Fusion Functions for Hybrid Retrieval", TOIS 2023, recommend over RRF). It keeps how much
  better one hit is than the next, which ranks throw away: on LoCoMo, recall@10 0.784 -> 0.802
  and open-domain questions 0.435 -> 0.534 (benchmarks/README.md, §1).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal, TypeVar

from pydantic import BaseModel, Field

__all__ = ["FUSIONS", "HybridFusionSettings", "fuse", "reciprocal_rank_fusion", "score_fusion"]

ItemId = TypeVar("ItemId", bound=Hashable)
Fusion = Literal["rrf", "scores"]
FUSIONS: tuple[Fusion, ...] = ("rrf", "scores")


class HybridFusionSettings(BaseModel):
    """The YAML keys of a store's hybrid fusion, the same for every store that fuses in the client."""

    hybrid_fusion: Fusion = Field(
        default="rrf",
        description="How hybrid search merges its lists: `rrf` (reciprocal rank) or `scores` (each list's "
        "scores scaled to [0, 1], weighted, summed; see `memoryscope.stores.fusion`).",
    )
    hybrid_keyword_weight: float = Field(
        default=1.0,
        gt=0,
        description="Weight of the keyword list against the dense list (weight 1) in hybrid fusion; "
        "above 1 trusts exact words more than meaning.",
    )


def reciprocal_rank_fusion(
    ranked_lists: Sequence[Sequence[ItemId]], k: int = 60, weights: Sequence[float] | None = None
) -> list[tuple[ItemId, float]]:
    """Fuse lists of ids (best first) into one list of `(id, fused score)`, best first.

    An id repeated inside one list counts at its first (best) rank only. Equal fused scores keep
    the order in which the ids were first met, so the result is deterministic.
    """
    if k <= 0:
        raise ValueError(f"reciprocal_rank_fusion: k must be positive, got {k}")
    weights = _weights(weights, len(ranked_lists), "reciprocal_rank_fusion")
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


def score_fusion(
    scored_lists: Sequence[Sequence[tuple[ItemId, float]]], weights: Sequence[float] | None = None
) -> list[tuple[ItemId, float]]:
    """Fuse lists of `(id, score)` (best first, higher is better) into one list of `(id, fused
    score)`, best first: each list's scores min-max scaled to [0, 1] over its own items (a list
    whose items all score the same gives each 1), weighted, summed. An id missing from a list
    gets 0 from it; repeated inside one list, it counts at its best score. Ties keep first-met
    order."""
    weights = _weights(weights, len(scored_lists), "score_fusion")
    fused: dict[ItemId, float] = {}
    for scored, weight in zip(scored_lists, weights, strict=True):
        best: dict[ItemId, float] = {}
        for item, score in scored:
            if item not in best or score > best[item]:
                best[item] = score
        if not best:
            continue
        low, high = min(best.values()), max(best.values())
        span = high - low
        for item, score in best.items():
            fused[item] = fused.get(item, 0.0) + weight * ((score - low) / span if span > 0 else 1.0)
    return sorted(fused.items(), key=lambda pair: pair[1], reverse=True)


def fuse(
    fusion: Fusion, scored_lists: Sequence[Sequence[tuple[ItemId, float]]], weights: Sequence[float] | None = None
) -> list[tuple[ItemId, float]]:
    """`score_fusion` or `reciprocal_rank_fusion` (k = 60) of `(id, score)` lists, by name."""
    if fusion == "scores":
        return score_fusion(scored_lists, weights)
    if fusion == "rrf":
        return reciprocal_rank_fusion([[item for item, _ in scored] for scored in scored_lists], weights=weights)
    raise ValueError(f"unknown hybrid fusion {fusion!r}; use one of {', '.join(FUSIONS)}")


def _weights(weights: Sequence[float] | None, lists: int, caller: str) -> Sequence[float]:
    if weights is None:
        return [1.0] * lists
    if len(weights) != lists:
        raise ValueError(f"{caller}: {len(weights)} weights for {lists} ranked lists")
    return weights
