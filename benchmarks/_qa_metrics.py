"""The scores of `benchmarks.locomo_qa`: LoCoMo's token F1, BLEU-1, and reading a judge's label.

Normalisation (LoCoMo's `normalize_answer`, snap-research/locomo `task_eval/evaluation.py`), in
this order: delete commas; lowercase; delete every ASCII punctuation character
(`string.punctuation`); replace the words `a`, `an`, `the` and `and` by spaces; split on
whitespace.

Token F1 (LoCoMo's `f1_score`): the normalised tokens of both texts, each Porter-stemmed (NLTK's
`PorterStemmer`, as LoCoMo; NLTK comes with llama-index-core and the stemmer needs no download);
`common` = the size of the multiset intersection; 0 when `common` is 0, else
`2·P·R / (P + R)` with `P = common / len(prediction)`, `R = common / len(gold)`. Per category as
LoCoMo's `eval_question_answering`: category 1 (multi-hop) splits the prediction and the gold
answer at commas and takes, for each gold part, the best F1 over the predicted parts, averaged
over the gold parts; category 3 keeps the gold answer up to its first `;`; categories 2 and 4
compare the whole texts.

BLEU-1: the normalised tokens, not stemmed (as a BLEU tokeniser gives them, less punctuation
tokens); `p1` = clipped unigram matches / candidate length (each reference word counted at most as
often as the reference has it); brevity penalty `BP = 1` when the candidate is longer than the
reference, else `exp(1 - r / c)`; BLEU-1 = `BP · p1`; 0 for an empty candidate or reference (no
smoothing). The whole texts, in every category.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["CORRECT", "WRONG", "bleu1", "judge_label", "locomo_f1", "normalise", "spread", "token_f1", "tokens"]

CORRECT, WRONG = "CORRECT", "WRONG"
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_LABEL = re.compile(r"\b(CORRECT|WRONG)\b", re.IGNORECASE)


def normalise(text: str) -> str:
    """LoCoMo's `normalize_answer`: `"The vase, and a bowl!"` -> `"vase bowl"`."""
    text = str(text).replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def tokens(text: str, stem: bool = False) -> list[str]:
    words = normalise(text).split()
    return [_stem(word) for word in words] if stem else words


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer().stem(word)


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    from nltk.stem.porter import PorterStemmer  # imported when first needed: it takes ~0.4 s

    return PorterStemmer()


def token_f1(prediction: str, gold: str) -> float:
    """LoCoMo's `f1_score`: F1 of the stemmed normalised tokens."""
    predicted, expected = tokens(prediction, stem=True), tokens(gold, stem=True)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def locomo_f1(prediction: str, gold: str, category: int) -> float:
    """Token F1 with LoCoMo's per-category rule (see the module docstring)."""
    if category == 3:
        gold = gold.split(";")[0].strip()
    if category != 1:
        return token_f1(prediction, gold)
    predictions = [part.strip() for part in prediction.split(",")]
    golds = [part.strip() for part in gold.split(",")]
    return float(np.mean([max(token_f1(p, g) for p in predictions) for g in golds]))


def bleu1(candidate: str, reference: str) -> float:
    """Unigram precision (clipped) times the brevity penalty, on the normalised tokens."""
    said, expected = tokens(candidate), tokens(reference)
    if not said or not expected:
        return 0.0
    matches = sum((Counter(said) & Counter(expected)).values())
    penalty = 1.0 if len(said) > len(expected) else math.exp(1 - len(expected) / len(said))
    return penalty * matches / len(said)


def judge_label(reply: str) -> str | None:
    """`CORRECT` or `WRONG` when the reply names exactly one of them (as a word, any case:
    `**Correct**`, `{"label": "WRONG"}`); None when it names neither or both (`INCORRECT`
    names neither: it is one word)."""
    found = {match.upper() for match in _LABEL.findall(reply or "")}
    return found.pop() if len(found) == 1 else None


def spread(values: Sequence[float]) -> dict[str, float | None]:
    """Mean and population standard deviation (numpy's default, ddof=0); None when empty."""
    if not values:
        return {"mean": None, "std": None}
    array = np.asarray(values, dtype=np.float64)
    return {"mean": round(float(array.mean()), 4), "std": round(float(array.std()), 4)}
