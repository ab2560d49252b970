"""read_message refuses an over-long message (`max_message_chars`) before storing anything."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from memoryscope.context import MemoryContext, Message
from memoryscope.errors import MemoryScopeError
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.builders import build_worker, make_env

SAID = datetime(2024, 10, 26, 13, 26, 20, tzinfo=timezone.utc)


def test_an_over_long_message_is_refused_and_nothing_of_its_batch_is_stored(store: Any) -> None:
    worker = build_worker("read_message", {"max_message_chars": 1000}, make_env(store=store))
    batch = (Message("user", "short and fine", SAID), Message("user", "x" * 1001, SAID, message_id="m2"))
    with pytest.raises(MemoryScopeError, match=r"message 2 \(id 'm2'\) has 1001 characters.*max_message_chars.*1000"):
        worker.run(MemoryContext(user_name="ann", messages=batch))
    assert store.count(MemoryFilter(user_name="ann")) == 0


def test_a_message_at_the_cap_is_stored_whole(store: Any) -> None:
    worker = build_worker("read_message", {"max_message_chars": 1000}, make_env(store=store))
    worker.run(MemoryContext(user_name="ann", messages=(Message("user", "y" * 1000, SAID),)))
    assert [node.content for node in store.scan(MemoryFilter(user_name="ann"))] == ["y" * 1000]


def test_the_default_cap_is_generous() -> None:
    from memoryscope.workers.read_message import ReadMessageWorker

    assert ReadMessageWorker.Params().max_message_chars == 100_000
