"""Shared fixtures: the offline embedding model (loaded once) and a real SQLite store per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.memory import MemoryNode
from memoryscope.models.embedding.local_embedding import LocalEmbedding

SHANGHAI = ZoneInfo("Asia/Shanghai")


@pytest.fixture(scope="session")
def embedding() -> LocalEmbedding:
    return LocalEmbedding()


@pytest.fixture
def store(tmp_path: Path, embedding: LocalEmbedding) -> Iterator[Any]:
    from memoryscope.stores.sqlite_store import SqliteMemoryStore

    with SqliteMemoryStore(path=tmp_path / "memories.db", embedding_model=embedding) as opened:
        yield opened


@pytest.fixture
def make_node() -> Callable[..., MemoryNode]:
    """`make_node("user plays the guitar", user_name="ann", memory_type="insight", ...)`."""

    def make(content: str, **fields: Any) -> MemoryNode:
        fields.setdefault("user_name", "ann")
        fields.setdefault("created_at", datetime(2024, 10, 26, 13, 0, tzinfo=SHANGHAI))
        return MemoryNode(content=content, **fields)

    return make
