"""Fixtures of the MemoryOS tier tests: the scripted LLM (`memoryos_scripted_llm`), and `Memoryos`
facades over a real SQLite store in tmp_path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from memoryos_scripted_llm import Script  # helpers shared with the test modules

from memoryscope.memoryos import Memoryos
from memoryscope.testing.fake_openai import FakeOpenAIServer


@pytest.fixture
def script(fake_openai: FakeOpenAIServer) -> Script:
    return Script(fake_openai)


@pytest.fixture
def make_memoryos(tmp_path: Path, fake_openai: FakeOpenAIServer) -> Iterator[Callable[..., Memoryos]]:
    opened: list[Memoryos] = []

    def make(user_id: str = "ann", **kwargs: Any) -> Memoryos:
        kwargs.setdefault("short_term_capacity", 3)
        kwargs.setdefault("data_storage_path", tmp_path)
        memo = Memoryos(user_id, openai_api_key="test-key", openai_base_url=fake_openai.base_url, llm_model="fake", **kwargs)
        opened.append(memo)
        return memo

    yield make
    for memo in opened:
        memo.close()
