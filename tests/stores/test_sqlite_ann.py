"""`sqlite_memory_store` with its approximate vector index (`_sqlite_ann`) forced on: the whole
store contract, then what only the index has (filters applied exactly to its candidates, writes
keeping it current, the background build, the doctor's check)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryscope.models.base import EmbeddingModel
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores.base import MemoryStore
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.store_contract import StoreContract


@pytest.fixture
def store(tmp_path: Path, embedding_model: LocalEmbedding) -> Iterator[SqliteMemoryStore]:
    with SqliteMemoryStore(path=tmp_path / "memories.db", embedding_model=embedding_model, ann_min_memories=1) as opened:
        yield opened


class TestSqliteStoreContractWithIndex(StoreContract):
    """Every user gets the approximate index (`ann_min_memories=1`), so every dense search goes through it."""

    def reopen(self, store: MemoryStore, embedding_model: LocalEmbedding) -> MemoryStore:  # type: ignore[override]
        assert isinstance(store, SqliteMemoryStore)
        return SqliteMemoryStore(path=store.path, embedding_model=embedding_model, ann_min_memories=1)

    def reopen_to_reembed(self, store: MemoryStore, embedding_model: EmbeddingModel) -> MemoryStore:
        assert isinstance(store, SqliteMemoryStore)
        return SqliteMemoryStore(path=store.path, embedding_model=embedding_model, allow_model_change=True, ann_min_memories=1)
