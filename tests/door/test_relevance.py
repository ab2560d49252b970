"""Search scores a caller can threshold (`memoryscope.door.relevance`): in [0, 1], the same
whatever else was found, a lone hit not 0, an unrelated query low — through the real door, the
offline embedding model and a real SQLite file."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest

from memoryscope import MemoryScope
from memoryscope.door.relevance import NEUTRAL_TEXTS, Relevance, capped_along

ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH")
GUITAR = "I play the guitar in a jazz band on Fridays"
OTHERS = (
    "My sister lives in Lisbon and works as an architect",
    "I am allergic to peanuts",
    "We adopted a dog called Biscuit last spring",
    "I run five kilometres every morning before work",
    "My favourite dish is mushroom risotto",
)


@pytest.fixture(scope="module")
def ms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryScope]:
    saved = {name: os.environ.pop(name, None) for name in ENV}
    try:
        path = tmp_path_factory.mktemp("relevance") / "scores.db"
        with MemoryScope("default", overrides={"memory_store.path": str(path)}) as scope:
            scope.add(GUITAR, user_id="lone", infer=False)
            scope.add([GUITAR, *OTHERS], user_id="crowd", infer=False)
            yield scope
    finally:
        for name, value in saved.items():
            if value is not None:
                os.environ[name] = value


def test_a_lone_hit_scores_what_it_matches_not_zero(ms: MemoryScope) -> None:
    [hit] = ms.search("what instrument do I play?", user_id="lone")
    assert hit.memory == GUITAR
    assert 0.3 < hit.score <= 1.0


def test_a_memory_scores_the_same_whatever_else_was_found(ms: MemoryScope) -> None:
    lone = ms.search("what instrument do I play?", user_id="lone")
    crowd = ms.search("what instrument do I play?", user_id="crowd")
    assert len(crowd) == 1 + len(OTHERS)
    assert crowd[0].memory == GUITAR
    assert crowd[0].score == lone[0].score


def test_scores_lie_in_0_1_and_never_rise_down_the_list(ms: MemoryScope) -> None:
    scores = [hit.score for hit in ms.search("where does my sister live?", user_id="crowd")]
    assert all(0.0 <= score <= 1.0 for score in scores)
    assert scores == sorted(scores, reverse=True)
    assert scores[0] > scores[-1]


def test_an_unrelated_query_scores_below_a_related_one(ms: MemoryScope) -> None:
    related = ms.search("what is my dog called?", user_id="crowd")[0]
    unrelated = ms.search("how do I configure a kubernetes ingress controller?", user_id="crowd")[0]
    assert related.memory == "We adopted a dog called Biscuit last spring"
    assert unrelated.score < 0.5 <= related.score


def test_threshold_semantics_follow_from_the_scores(ms: MemoryScope) -> None:
    """What a caller's threshold keeps: the relevant memory, not the rest."""
    hits = ms.search("am I allergic to anything?", user_id="crowd")
    kept = [hit.memory for hit in hits if hit.score >= 0.5]
    assert kept == ["I am allergic to peanuts"]


def test_words_alone_score_when_the_store_has_no_vector_of_the_memory(ms: MemoryScope) -> None:
    relevance = Relevance(ms.store)
    [node] = ms.store.get([ms.search("guitar", user_id="lone")[0].id])
    both = relevance.scores("guitar jazz", relevance.query_vector("guitar jazz"), [node])
    words_only = relevance.scores("guitar jazz", None, [node])
    assert words_only == [1.0]  # both content words are in the memory
    assert 0.0 < both[0] <= 1.0


def test_capped_along_keeps_a_ranked_list_from_rising() -> None:
    assert capped_along([0.4, 0.9, 0.2, 0.3]) == [0.4, 0.4, 0.2, 0.2]
    assert capped_along([]) == []


def test_every_language_has_as_many_neutral_texts() -> None:
    assert {len(texts) for texts in NEUTRAL_TEXTS.values()} == {24}
    assert np.all([len(set(texts)) == len(texts) for texts in NEUTRAL_TEXTS.values()])
