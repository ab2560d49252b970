"""The served playground every browser test drives (see playground_stage.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the playground tests need the server extra: pip install 'memoryscope[server]'")

from playground_stage import PlaygroundStage


@pytest.fixture
def stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PlaygroundStage]:
    """The server and the fake LLM, replies streamed word by word 40 ms apart."""
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-playground-llm")
    with PlaygroundStage(tmp_path, stream_chunk_delay_s=0.04) as served:
        yield served
