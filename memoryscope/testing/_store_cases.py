"""Data for the store contract: node and vector builders, sentences with known meanings, filter
cases (a mixed population and, per filter, what it must select), and `ContractHelpers`, the
helpers every part of the contract uses.

Each filter case states its expectation as a plain Python predicate over nodes, so a backend's
answer (SQL, numpy masks, Elasticsearch queries) is checked against an independent reading of
`MemoryFilter`'s documented meaning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from memoryscope.history import ChangeSource
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.models.base import EmbeddingModel
from memoryscope.stores.base import MemoryFilter, MemoryStore, TimeRange

__all__ = [
    "BASE_TIME",
    "CHINESE",
    "ENGLISH",
    "ContractHelpers",
    "FILTER_CASES",
    "FilterCase",
    "RenamedEmbedding",
    "embedding_calls",
    "filter_population",
    "ids",
    "make_node",
    "unit_vectors",
]

_TYPES = (MemoryType.OBSERVATION, MemoryType.INSIGHT, MemoryType.CONVERSATION, MemoryType.OBS_CUSTOMIZED)
BASE_TIME = datetime(2024, 10, 26, 21, 26, 20, 123456, tzinfo=timezone(timedelta(hours=8)))
_BASE = BASE_TIME

ENGLISH = {
    "guitar": "I play the guitar in a jazz band on weekends",
    "pasta": "My favourite food is homemade Italian pasta",
    "cat": "My cat is called Zorblax",
    "running": "I go running every morning before work",
    "kyoto": "We visited Kyoto in Japan last spring",
}
CHINESE = {"guitar": "我喜欢弹吉他", "running": "我每天早上跑步", "hiking": "周末和朋友去爬山", "hotpot": "我最喜欢吃四川火锅"}


def make_node(content: str = "likes green tea", user_name: str = "ann", **fields: Any) -> MemoryNode:
    """A node with a fixed creation time (`BASE_TIME`) unless `fields` say otherwise."""
    fields.setdefault("created_at", BASE_TIME)
    fields.setdefault("updated_at", BASE_TIME)
    return MemoryNode(user_name=user_name, content=content, **fields)


def unit_vectors(count: int, dimension: int, seed: int = 0) -> np.ndarray:
    """`count` random unit vectors (float32), reproducible by `seed`."""
    vectors = np.random.default_rng(seed).standard_normal((count, dimension)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def clustered_vectors(count: int, dimension: int, seed: int) -> np.ndarray:
    """`count` unit vectors around 20 fixed topics, as embeddings are (random ones have no
    neighbours worth finding, so an approximate index cannot be judged on them)."""
    centres = np.random.default_rng(99).standard_normal((20, dimension)).astype(np.float32)
    rng = np.random.default_rng(seed)
    vectors = centres[rng.integers(0, 20, count)] + rng.standard_normal((count, dimension)).astype(np.float32) * 0.8
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class RenamedEmbedding(EmbeddingModel):
    """A real model under another name (and, when `dimension` is smaller, truncated vectors):
    stands in for "a different embedding model" in the model-mismatch tests."""

    backend = "renamed"

    def __init__(self, inner: EmbeddingModel, model_name: str, dimension: int | None = None) -> None:
        super().__init__(model_name)
        self._inner = inner
        self._dimension = dimension or inner.dimension

    @property
    def dimension(self) -> int:
        return self._dimension

    def _cut(self, vectors: np.ndarray) -> np.ndarray:
        cut = vectors[:, : self._dimension]
        return cut / np.maximum(np.linalg.norm(cut, axis=1, keepdims=True), 1e-12)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._cut(self._inner.embed_queries(texts))

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._cut(self._inner.embed_passages(texts))


def filter_population(base: datetime = _BASE) -> list[MemoryNode]:
    """12 memories of ann and 4 of bob whose fields vary independently; every content has "memo"."""
    nodes = []
    for user_name, count in (("ann", 12), ("bob", 4)):
        for index in range(count):
            nodes.append(
                MemoryNode(
                    user_name=user_name,
                    memory_id=f"{user_name}-{index:02d}",
                    content=f"memo number {index} of {user_name}",
                    target_name="friend" if index % 3 == 0 else "",
                    workspace="w2" if index % 2 == 1 else "",
                    memory_type=_TYPES[index % 4],
                    status=MemoryStatus.EXPIRED if index % 5 == 4 else MemoryStatus.VALID,
                    reflected=index % 2 == 0,
                    updated=index % 3 == 1,
                    created_at=base + timedelta(hours=index),
                    updated_at=base + timedelta(hours=2 * index + 1),
                    event_time=None if index % 3 == 2 else base - timedelta(days=index),
                    message_time=None if index % 4 == 3 else base + timedelta(minutes=index),
                )
            )
    return nodes


@dataclass(frozen=True)
class FilterCase:
    name: str
    memory_filter: MemoryFilter
    predicate: Callable[[MemoryNode], bool]

    def matches(self, node: MemoryNode) -> bool:
        return node.user_name == self.memory_filter.user_name and self.predicate(node)


def _in_range(field: str, start: datetime | None, end: datetime | None) -> Callable[[MemoryNode], bool]:
    def predicate(node: MemoryNode) -> bool:
        moment = getattr(node, field)
        if moment is None:
            return False
        return (start is None or moment >= start) and (end is None or moment < end)

    return predicate


def _case(name: str, predicate: Callable[[MemoryNode], bool], **fields: object) -> FilterCase:
    return FilterCase(name, MemoryFilter(user_name="ann", **fields), predicate)  # type: ignore[arg-type]  # fields typed by MemoryFilter


FILTER_CASES: list[FilterCase] = [
    _case("user_only", lambda node: True),
    _case("target_name", lambda node: node.target_name == "friend", target_name="friend"),
    _case("empty_target_name", lambda node: node.target_name == "", target_name=""),
    _case("workspace", lambda node: node.workspace == "w2", workspace="w2"),
    _case("one_type", lambda node: node.memory_type is MemoryType.INSIGHT, memory_types=(MemoryType.INSIGHT,)),
    _case(
        "two_types",
        lambda node: node.memory_type in (MemoryType.OBSERVATION, MemoryType.OBS_CUSTOMIZED),
        memory_types=(MemoryType.OBSERVATION, MemoryType.OBS_CUSTOMIZED),
    ),
    _case("no_types", lambda node: False, memory_types=()),
    _case("status_expired", lambda node: node.status is MemoryStatus.EXPIRED, status=MemoryStatus.EXPIRED),
    _case("status_valid", lambda node: node.status is MemoryStatus.VALID, status=MemoryStatus.VALID),
    _case("reflected", lambda node: node.reflected, reflected=True),
    _case("not_reflected", lambda node: not node.reflected, reflected=False),
    _case("updated", lambda node: node.updated, updated=True),
    _case("not_updated", lambda node: not node.updated, updated=False),
    _case(
        "memory_ids",
        lambda node: node.memory_id in ("ann-01", "ann-07"),
        memory_ids=("ann-01", "ann-07", "bob-01", "unknown"),
    ),
    _case(
        "event_time_between",
        _in_range("event_time", _BASE - timedelta(days=7), _BASE - timedelta(days=1)),
        time_range=TimeRange("event_time", _BASE - timedelta(days=7), _BASE - timedelta(days=1)),
    ),
    _case(
        "event_time_before",
        _in_range("event_time", None, _BASE - timedelta(days=5)),
        time_range=TimeRange("event_time", end=_BASE - timedelta(days=5)),
    ),
    _case("event_time_known", _in_range("event_time", None, None), time_range=TimeRange("event_time")),
    _case(
        "message_time_from",
        _in_range("message_time", _BASE + timedelta(minutes=4), None),
        time_range=TimeRange("message_time", start=_BASE + timedelta(minutes=4)),
    ),
    _case(
        "created_at_between",
        _in_range("created_at", _BASE + timedelta(hours=2), _BASE + timedelta(hours=6)),
        time_range=TimeRange("created_at", _BASE + timedelta(hours=2), _BASE + timedelta(hours=6)),
    ),
    _case(
        "updated_at_from",
        _in_range("updated_at", _BASE + timedelta(hours=10), None),
        time_range=TimeRange("updated_at", start=_BASE + timedelta(hours=10)),
    ),
    _case(
        "combined",
        lambda node: node.target_name == "friend" and node.status is MemoryStatus.VALID and node.reflected,
        target_name="friend",
        status=MemoryStatus.VALID,
        reflected=True,
    ),
]


def ids(nodes: Sequence[MemoryNode]) -> list[str]:
    return [node.memory_id for node in nodes]


def embedding_calls(model: EmbeddingModel) -> float:
    return model.usage.snapshot()["calls"]


class ContractHelpers:
    """What the contract's test cases share: the user they write as, and writing with vectors."""

    ann = MemoryFilter(user_name="ann")

    @pytest.fixture(autouse=True)
    def _remember_dimension(self, embedding_model: EmbeddingModel) -> None:
        self.dimension = int(embedding_model.dimension)  # pytest makes one instance per test

    def upsert_with_random_vectors(
        self,
        store: MemoryStore,
        nodes: Sequence[MemoryNode],
        seed: int = 0,
        change: ChangeSource | None = None,
        expected: Mapping[str, datetime | None] | None = None,
    ) -> np.ndarray:
        vectors = unit_vectors(len(nodes), self.dimension, seed)
        store.upsert(nodes, vectors=vectors, change=change, expected=expected)
        return vectors

    def upsert_sentences(self, store: MemoryStore, sentences: dict[str, str], user_name: str = "ann") -> dict[str, MemoryNode]:
        nodes = {name: make_node(text, user_name=user_name, memory_id=f"{user_name}-{name}") for name, text in sentences.items()}
        store.upsert(list(nodes.values()))
        return nodes

    @staticmethod
    def assert_best_first(found: Sequence[MemoryNode], count: int) -> None:
        assert len(found) == count
        scores = [node.score for node in found]
        assert all(score is not None for score in scores)
        assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]  # None ruled out just above
