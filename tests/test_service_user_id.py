"""A blank user id names no user: the service refuses it, naming `user_id`, as the server and the door do."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryscope.app import MemoryScope
from memoryscope.errors import InvalidInputError
from memoryscope.stores.base import MemoryFilter


@pytest.fixture
def scope(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryScope]:
    monkeypatch.delenv("MEMORYSCOPE_LLM_API_BASE", raising=False)
    with MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "m.db")}) as built:
        yield built


@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
def test_a_blank_user_id_is_refused_by_name_and_nothing_is_written(scope: MemoryScope, blank: str) -> None:
    service = scope.default_service
    with pytest.raises(InvalidInputError, match=r"user_id is empty"):
        service.run_operation("add_memory", blank, new_memories=("I keep bees",))
    with pytest.raises(InvalidInputError, match=r"user_id is empty"):
        service.run_operation("add_memory", role_name=blank, new_memories=("I keep bees",))
    with pytest.raises(InvalidInputError, match=r"user_id is empty"):
        service.run_as_text("list_memory", role_name=blank)
    assert scope.store is not None
    assert scope.store.scan(MemoryFilter(user_name=service.params.human_name)) == []


def test_no_user_id_still_means_the_default_user(scope: MemoryScope) -> None:
    service = scope.default_service
    service.run_operation("add_memory", new_memories=("I keep bees",))
    assert scope.store is not None
    kept = scope.store.scan(MemoryFilter(user_name=service.params.human_name))
    assert [node.content for node in kept] == ["I keep bees"]


@pytest.mark.parametrize("blank", ["", "  "])
def test_the_chat_refuses_a_blank_role_name_too(scope: MemoryScope, blank: str) -> None:
    chat = scope.default_memory_chat
    with pytest.raises(InvalidInputError, match=r"user_id is empty"):
        chat.run_service_operation("list_memory", blank)
    with pytest.raises(InvalidInputError, match=r"user_id is empty \(role_name\)"):
        chat.chat_with_memory("I keep bees", role_name=blank)
    assert scope.store is not None
    assert scope.store.count(MemoryFilter(user_name=blank)) == 0
