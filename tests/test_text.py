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
    for _ in range(2):  # the second time from the remembered stems
        assert text.keyword_terms("Painting movies") == ["paint", "movi"]
        assert text.keyword_terms("the hobbies of the running man") == ["hobbi", "run", "man"]
    assert len(text._STEMS) <= 3 + 3  # cleared when full, then one text's words added


def test_keyword_terms_are_the_stems_of_the_words_that_are_not_stopwords() -> None:
    """Whether their stems are remembered or not, the terms are those of the definition, in
    order, with repeats, for English, Chinese and mixed text."""
    import random

    from memoryscope.text import STOPWORDS, tokenize

    vocabulary = [*sorted(STOPWORDS)[:40], "Movies", "painted", "Jon's", "don't", "2023", "café", "我喜欢画画", "hobbies", "x"]
    rng = random.Random(3)
    texts = [" ".join(rng.choice(vocabulary) for _ in range(rng.randrange(0, 12))) for _ in range(400)]
    for text in texts + texts:
        assert keyword_terms(text) == [stem(word) for word in tokenize(text) if word not in STOPWORDS]


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
