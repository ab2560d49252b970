"""Keyword terms: stopwords out, English inflections folded, other scripts untouched."""

from __future__ import annotations

import pytest

from memoryscope.text import index_terms, keyword_terms, stem


@pytest.mark.parametrize(
    ("words", "stemmed"),
    [
        (("hobby", "hobbies"), "hobbi"),
        (("movie", "movies"), "movi"),
        (("paint", "painting", "painted", "paints"), "paint"),
        (("class", "classes"), "class"),
        (("run", "running"), "run"),
        (("like", "likes", "liked", "liking"), "like"),
        (("carry", "carried", "carries"), "carri"),
        (("beach", "beaches"), "beach"),
        (("jon", "jon's"), "jon"),
    ],
)
def test_inflections_share_a_stem(words: tuple[str, ...], stemmed: str) -> None:
    assert {stem(word) for word in words} == {stemmed}


@pytest.mark.parametrize("word", ["bus", "this", "gas", "2023", "的", "café", "yes"])
def test_short_words_numbers_and_other_scripts_are_kept(word: str) -> None:
    assert stem(word) == word


def test_query_and_index_terms_meet() -> None:
    """A query's terms are found among the index terms of a text that inflects them differently."""
    assert keyword_terms("What are Melanie's hobbies?") == keyword_terms("Melanie hobby")
    assert set(keyword_terms("painted sunsets")) <= set(index_terms("I love painting a sunset"))


def test_remembered_stems_stay_bounded_and_right(monkeypatch: pytest.MonkeyPatch) -> None:
    import memoryscope.text as text

    monkeypatch.setattr(text, "_STEMS", {})
    monkeypatch.setattr(text, "_STEMS_KEPT", 3)
    words = ["movies", "painting", "hobbies", "running", "studied"]
    assert [text.stem(word) for word in words] == ["movi", "paint", "hobbi", "run", "studi"]
    assert len(text._STEMS) <= 3
    assert text.keyword_terms("Painting movies") == ["paint", "movi"]


def test_ascii_text_splits_exactly_as_the_token_pattern_does() -> None:
    """`tokenize`'s fast path for ASCII text (bytes translate + split) gives the very tokens of
    the pattern every store indexed with: a different split would silently mismatch old indexes."""
    import random
    import string

    from memoryscope.text import _TOKEN, tokenize

    alphabet = string.ascii_letters + string.digits + "''''  ,.;:-_/\"!?()[]\t\n@#$%&*+=<>|~`^{}\\"
    rng = random.Random(7)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60))) for _ in range(3000)]
    texts += ["rock'n'roll", "'quoted'", "don't I'M", "ok''x 12ab", "a-b_c.d/e", "'", "x'", "x'1", "ÄÖ is not ascii"]
    for text in texts:
        assert tokenize(text) == _TOKEN.findall(text.lower()), text
