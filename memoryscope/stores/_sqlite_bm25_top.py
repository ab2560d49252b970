"""Which of a user's rows can be among the best `limit` of a keyword search, and their scores
(for `_sqlite_bm25_lists.UserWords.ranked`: FTS5's `bm25()` over posting lists in memory).

A query's words can be in a fifth of a large user's rows, and a search asks for ~170 of them.
A row holding only some of the query's phrases scores at most the sum of those phrases' best
terms (MaxScore): once enough rows holding the rarest words are scored, the rows holding only
common words are known to be out, and are never read. Scores are summed phrase by phrase, in
the query's order, from 0.0, as FTS5 sums them, so they are FTS5's float64 numbers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["Part", "reachable", "scores", "union"]

Part = tuple[np.ndarray, np.ndarray]  # a phrase's rows (positions, ascending) and its term of each row's score
SPARSE_UP_TO = 0.25  # share of a query's postings past which every row holding a phrase is scored


def reachable(
    parts: list[Part], limit: int | None, every: Callable[[], tuple[np.ndarray, np.ndarray]]
) -> tuple[np.ndarray, np.ndarray, float]:
    """The rows (positions, ascending) that may be among the best `limit`, their scores, and a
    lower bound of the limit-th best score (0.0 when none is known); `every()` scores every row
    holding a phrase.

    A row holding only some phrases scores at most the sum of those phrases' best terms
    (MaxScore). So the rows holding one of the phrases with the highest best terms (the rarest
    words, the shortest lists) are scored first; once the limit-th best of them is above what a
    row holding none of those phrases could reach, the others are out, unread. At most two
    rounds: the first round's limit-th best says how many phrases the second must take, and
    when those hold more than `SPARSE_UP_TO` of the postings, `every()` is cheaper."""
    if limit is None or len(parts) == 1:
        return (*every(), 0.0)
    best = [float(terms.max()) for _, terms in parts]
    by_best = sorted(range(len(parts)), key=lambda index: -best[index])
    sizes = [parts[index][0].size for index in by_best]
    sparse_up_to = SPARSE_UP_TO * sum(sizes)
    # what a row holding none of the first `taken` phrases scores at most, widened past any
    # rounding of a sum of a few float64 terms
    beyond = [sum(best[index] for index in by_best[taken:]) * (1.0 + 1e-9) for taken in range(len(parts) + 1)]
    taken = next((count for count in range(1, len(parts)) if sum(sizes[:count]) >= limit), len(parts))
    if taken == len(parts) or sum(sizes[:taken]) > sparse_up_to:
        return (*every(), 0.0)
    candidates = union([parts[index][0] for index in by_best[:taken]])
    score = scores(candidates, parts)
    if candidates.size < limit:
        return (*every(), 0.0)
    least = float(np.partition(score, candidates.size - limit)[candidates.size - limit])
    if beyond[taken] < least:
        return candidates, score, least
    # the fewest phrases whose rows reach past the others' bound (more rows only raise `least`)
    taken = next(count for count in range(taken + 1, len(parts) + 1) if beyond[count] < least)
    if taken == len(parts) or sum(sizes[:taken]) > sparse_up_to:
        return (*every(), least)
    candidates = union([parts[index][0] for index in by_best[:taken]])
    return candidates, scores(candidates, parts), least


def union(lists: list[np.ndarray]) -> np.ndarray:
    """The distinct values of ascending arrays, ascending (a stable sort merges sorted runs)."""
    if len(lists) == 1:
        return lists[0]
    values = np.sort(np.concatenate(lists), kind="stable")
    first = np.empty(values.size, dtype=bool)
    first[:1] = True
    np.not_equal(values[1:], values[:-1], out=first[1:])
    return values[first]


def scores(candidates: np.ndarray, parts: list[Part]) -> np.ndarray:
    """Each candidate's score: its terms summed phrase by phrase, in order, from 0.0, as FTS5
    sums them (the same float64 numbers). Each phrase's rows are looked up in the candidates or
    the other way round, whichever is shorter."""
    score = np.zeros(candidates.size)
    last = candidates.size - 1
    for docs, terms in parts:
        if docs is candidates:
            score += terms
        elif docs.size <= candidates.size:
            at = np.minimum(np.searchsorted(candidates, docs), last)
            held = candidates[at] == docs
            score[at[held]] += terms[held]
        else:
            at = np.minimum(np.searchsorted(docs, candidates), docs.size - 1)
            held = np.flatnonzero(docs[at] == candidates)
            score[held] += terms[at[held]]
    return score
