"""Export, delete, import: the history comes back once and in time order, followed by the
import's own change; importing the file again adds nothing. Real app, real SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

from memoryscope import MemoryScope
from memoryscope.history import MemoryChange

LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH")


@pytest.fixture
def ms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryScope]:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    with MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "history.db")}) as scope:
        yield scope


def steps(changes: list[MemoryChange]) -> list[tuple[str, str]]:
    return [(change.action, change.operation) for change in changes]


def in_time_order(changes: list[MemoryChange]) -> bool:
    return all(earlier.at <= later.at for earlier, later in pairwise(changes))


def test_export_delete_import_restores_the_history_once_in_time_order(ms: MemoryScope, tmp_path: Path) -> None:
    (tea,) = ms.add("prefers green tea", user_id="lin", infer=False)
    ms.update(tea.id, text="prefers oolong tea")
    out = tmp_path / "lin.jsonl"
    ms.export(out, user_id="lin")
    ms.delete_all(user_id="lin")
    before = ms.history(tea.id)
    assert steps(before) == [("created", "add_memory"), ("updated", "update_memory"), ("deleted", "delete_all")]

    ms.import_memories(out)
    after = ms.history(tea.id)
    assert steps(after) == [*steps(before), ("created", "import")]
    assert after[:3] == before  # the same changes, not copies of them
    assert in_time_order(after)
    restored = ms.get(tea.id)
    assert restored is not None and restored.memory == "prefers oolong tea"

    ms.import_memories(out)  # again: nothing of the file's history twice
    again = ms.history(tea.id)
    assert steps(again)[:4] == steps(after) and steps(again).count(("updated", "update_memory")) == 1
    assert in_time_order(again)


def test_an_import_into_a_fresh_store_keeps_the_file_history_before_its_own(tmp_path: Path, ms: MemoryScope) -> None:
    (tea,) = ms.add("prefers green tea", user_id="lin", infer=False)
    ms.update(tea.id, text="prefers oolong tea")
    out = tmp_path / "lin.jsonl"
    ms.export(out, user_id="lin")
    with MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "fresh.db")}) as fresh:
        fresh.import_memories(out)
        history = fresh.history(tea.id)
    assert steps(history) == [("created", "add_memory"), ("updated", "update_memory"), ("created", "import")]
    assert in_time_order(history)
