"""Shared fixtures: the offline embedding model (loaded once), a real SQLite store per test, and
the checking mode for workers run directly."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.context import MemoryContext
from memoryscope.memory import MemoryNode
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.worker import WORKERS
from memoryscope.workflow.io_check import checked_run, checking_worker_io

SHANGHAI = ZoneInfo("Asia/Shanghai")


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


@pytest.fixture(autouse=True)
def checked_worker_io(monkeypatch: pytest.MonkeyPatch) -> None:
    """In checking mode (tests/conftest.py), a built-in worker's `run` called directly, as most
    tests here do, is held to its declarations as the runner holds its steps."""
    if not checking_worker_io():
        return
    for name in WORKERS.names():
        cls = WORKERS.get(name)
        if "run" in vars(cls):  # a subclass that inherits `run` is checked through its parent's, as itself
            monkeypatch.setattr(cls, "run", _checked(cls.run))


def _checked(run: Callable[[Any, MemoryContext], None]) -> Callable[[Any, MemoryContext], None]:
    def checked(worker: Any, ctx: MemoryContext) -> None:
        checked_run(worker, functools.partial(run, worker))(ctx)

    return checked
