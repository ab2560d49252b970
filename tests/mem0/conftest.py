"""Fixtures of the mem0 drop-in tests: an environment as a mem0 user's (no MemoryScope LLM
variables, the store in tmp_path), and an offline `Memory` over a real SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryscope.mem0 import Memory

ENVIRONMENT = (
    "MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL", "MEMORYSCOPE_STORE_PATH",
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE",
)  # fmt: skip


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No LLM in the environment; `Memory()` keeps its store in this file."""
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "mem0.db"
    monkeypatch.setenv("MEMORYSCOPE_STORE_PATH", str(path))
    return path


@pytest.fixture
def memory(store_path: Path) -> Iterator[Memory]:
    with Memory() as opened:
        yield opened


@pytest.fixture(scope="module")
def module_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    """An offline `Memory` shared by one module's tests (the environment as `store_path`'s only
    while it is built: it is read then)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ENVIRONMENT:
            patch.delenv(name, raising=False)
        patch.setenv("MEMORYSCOPE_STORE_PATH", str(tmp_path_factory.mktemp("mem0") / "mem0.db"))
        opened = Memory()
    with opened:
        yield opened
