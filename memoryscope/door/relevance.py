"""How well each found memory answers its query: a score in [0, 1] a caller can threshold.

A ranker's scores only compare the memories of one call: min-max scaled over the candidates,
a lone hit scores 0 and an unrelated query's best hit scores high. The door therefore scores
each memory a search answers with on its own, from two signals that do not depend on what else
was found:

- **meaning**: the cosine of the query and the memory's stored vector, against the query's
  *baseline*, its mean cosine with a few everyday sentences about nothing in particular
  (`NEUTRAL_TEXTS`, embedded once per embedding model). Embedding models differ in where their
  cosines lie (multilingual-e5 puts unrelated texts near 0.75, others near 0.3); how far above
  its own baseline a memory lies is comparable across models and queries.
  `(cosine - baseline) / (1 - baseline)` of `FULL_MEANING` or more counts as a full match.
- **words**: the share of the query's content words (`keyword_terms`: stemmed, no stop words)
  found in the memory, its key, or around a chat message (its speaker, the message it answers).

The two are averaged (a query without content words, or a memory without a vector, uses the
one there is). Along the ranked list a memory never scores above one ranked before it: the
ranker's order (which knows more: speakers, times, memory types) is kept, and the score says
how good the answer at that place is. A lone hit scores what it matches; an unrelated query's
best hit scores low. On LoCoMo (`benchmarks.locomo_scores`) an evidence turn scores above a
non-evidence turn of the same question's results in 0.88 of pairs (AUC).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from memoryscope.memory import parts_of, searchable_fields
from memoryscope.text import keyword_terms

if TYPE_CHECKING:
    from memoryscope.memory import MemoryNode
    from memoryscope.models.base import EmbeddingModel
    from memoryscope.stores.base import MemoryStore

__all__ = ["FULL_MEANING", "NEUTRAL_TEXTS", "Relevance", "capped_along"]

FULL_MEANING = 0.5

# Everyday sentences about nothing a user would ask about: the baseline a query's cosines are read against.
NEUTRAL_TEXTS: dict[str, tuple[str, ...]] = {
    "en": (
        "The meeting has been moved to Thursday afternoon.",
        "Please remember to water the plants while I am away.",
        "The train was ten minutes late this morning.",
        "She bought a new pair of shoes at the market.",
        "The weather forecast says it will rain tomorrow.",
        "He forgot his umbrella at the office again.",
        "The restaurant on the corner closes at nine.",
        "They painted the kitchen a pale shade of green.",
        "The package should arrive sometime next week.",
        "I need to renew my library card soon.",
        "The printer on the second floor is out of paper.",
        "We watched a documentary about volcanoes last night.",
        "The bakery sells fresh bread every morning.",
        "My phone battery drains faster than it used to.",
        "The museum is free on the first Sunday of the month.",
        "There is a long queue at the post office today.",
        "The neighbours adopted a small grey cat.",
        "The bus route changed because of the road works.",
        "He is learning how to bake sourdough bread.",
        "The concert tickets sold out within an hour.",
        "She keeps her notes in a blue notebook.",
        "The elevator in our building is being repaired.",
        "We ordered pizza for the team lunch.",
        "The river flooded the park after the storm.",
    ),
    "zh": (
        "会议改到了星期四下午。",
        "我不在的时候请记得给植物浇水。",
        "今天早上火车晚点了十分钟。",
        "她在市场上买了一双新鞋。",
        "天气预报说明天会下雨。",
        "他又把雨伞忘在办公室了。",
        "街角的餐厅九点关门。",
        "他们把厨房刷成了淡绿色。",
        "包裹应该下周某个时候到。",
        "我得尽快续办图书证。",
        "二楼的打印机没纸了。",
        "我们昨晚看了一部关于火山的纪录片。",
        "面包店每天早上卖新鲜面包。",
        "我的手机电池比以前掉电快。",
        "博物馆每月第一个星期天免费开放。",
        "今天邮局门口排着长队。",
        "邻居领养了一只灰色的小猫。",
        "因为修路，公交线路改了。",
        "他正在学做酸面包。",
        "音乐会的票一小时内就卖完了。",
        "她把笔记记在一个蓝色的本子里。",
        "我们楼的电梯正在维修。",
        "我们给团队午餐订了披萨。",
        "暴雨过后河水淹了公园。",
    ),
}


class Relevance:
    """Scores the memories a search of `store` answers with (see the module docstring)."""

    def __init__(self, store: MemoryStore, language: str = "en") -> None:
        self._store = store
        self._neutral = NEUTRAL_TEXTS.get(language, NEUTRAL_TEXTS["en"])

    @property
    def model(self) -> EmbeddingModel:
        return self._store.embedding_model

    def query_vector(self, query: str) -> np.ndarray:
        """The query embedded with the store's model, as the search embeds it (hand it on in
        `embedded`, so the search does not embed it again)."""
        return np.asarray(self.model.embed_queries([query])[0], dtype=np.float32)

    def scores(self, query: str, vector: np.ndarray | None, nodes: Sequence[MemoryNode]) -> list[float]:
        """Each node's relevance, in the order given (best ranked first), capped along it."""
        if not nodes:
            return []
        meaning = self._meaning(vector, nodes)
        words = _words(query, nodes)
        own = [_mean(m, w) for m, w in zip(meaning, words, strict=True)]
        return capped_along(own)

    def _meaning(self, vector: np.ndarray | None, nodes: Sequence[MemoryNode]) -> list[float | None]:
        store = self._store
        model = store.embedding_model
        if vector is None or store.recorded_embedding != (model.model_name, int(store.dimension)):
            return [None] * len(nodes)  # vectors of another model (before `reembed`): words only
        query = _unit(vector)
        baseline = float(np.mean(_neutral_vectors(model, self._neutral) @ query))
        span = (1.0 - baseline) * FULL_MEANING
        stored = store.get_vectors([node.memory_id for node in nodes])
        found = [node.memory_id in stored for node in nodes]
        if not any(found) or span <= 0:
            return [0.0 if held else None for held in found]
        rows = np.stack([stored[node.memory_id] for node, held in zip(nodes, found, strict=True) if held]).astype(np.float32)
        cosines = (rows @ query) / np.maximum(np.linalg.norm(rows, axis=1), 1e-12)
        above = np.clip((cosines - baseline) / span, 0.0, 1.0).tolist()
        return [above.pop(0) if held else None for held in found]


def capped_along(scores: Sequence[float]) -> list[float]:
    """Each score capped by every score before it: a ranked list's scores never rise."""
    capped: list[float] = []
    ceiling = 1.0
    for score in scores:
        ceiling = min(ceiling, score)
        capped.append(round(ceiling, 4))
    return capped


def _words(query: str, nodes: Sequence[MemoryNode]) -> list[float | None]:
    wanted = set(keyword_terms(query))
    if not wanted:
        return [None] * len(nodes)
    return [len(wanted & _terms_of(searchable_fields(node))) / len(wanted) for node in nodes]


@lru_cache(maxsize=20_000)  # as many as the stores keep decoded memories: a memory's words are read once
def _terms_of(fields: tuple[object, ...]) -> frozenset[str]:
    """The content words of a memory's own text and around it (`searchable_parts`)."""
    own, around = parts_of(fields)
    return frozenset(keyword_terms(own)) | frozenset(keyword_terms(around) if around else ())


def _mean(meaning: float | None, words: float | None) -> float:
    known = [value for value in (meaning, words) if value is not None]
    return sum(known) / len(known) if known else 0.0


def _unit(vector: np.ndarray) -> np.ndarray:
    row = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(row))
    return row / norm if norm > 0 else row


_NEUTRAL_LOCK = threading.Lock()
_NEUTRAL: weakref.WeakKeyDictionary[EmbeddingModel, dict[tuple[str, ...], np.ndarray]] = weakref.WeakKeyDictionary()


def _neutral_vectors(model: EmbeddingModel, texts: tuple[str, ...]) -> np.ndarray:
    """The neutral texts embedded as passages by `model`, once per model (unit rows)."""
    with _NEUTRAL_LOCK:
        known = _NEUTRAL.get(model, {}).get(texts)
    if known is not None:
        return known
    rows = np.asarray(model.embed_passages(list(texts)), dtype=np.float32)
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    with _NEUTRAL_LOCK:
        _NEUTRAL.setdefault(model, {})[texts] = rows
    return rows
