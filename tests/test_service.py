"""The memory service: its scheduler settings, notifications and shutdown, on the shipped default config."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from memoryscope.app import MemoryScope
from memoryscope.config import load_config
from memoryscope.context import Message
from memoryscope.errors import ConfigError, MemoryScopeError

SERVICE = "memory_service.memoryscope_service"


def overrides(tmp_path: Path, **service: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"memory_store.path": str(tmp_path / "m.db")}
    values.update({f"{SERVICE}.{key}": value for key, value in service.items()})
    return values


@pytest.fixture
def scope(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryScope]:
    monkeypatch.delenv("MEMORYSCOPE_LLM_API_BASE", raising=False)
    with MemoryScope("default", overrides=overrides(tmp_path)) as built:
        yield built


def test_scheduler_settings_are_validated_with_their_yaml_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config("default", overrides(tmp_path, scheduler_threads=0, shutdown_timeout_s=-1, enable_schedular=True))
    message = str(caught.value)
    assert f"{SERVICE}.scheduler_threads" in message
    assert f"{SERVICE}.shutdown_timeout_s" in message
    assert f"{SERVICE}.enable_schedular: unknown key. Did you mean 'enable_scheduler'?" in message


def test_settings_reach_the_scheduler(tmp_path: Path) -> None:
    config = load_config("default", overrides(tmp_path, scheduler_threads=3, shutdown_timeout_s=1.5, enable_scheduler=False))
    with MemoryScope(config=config) as built:
        scheduler = built.default_service.scheduler
        assert (scheduler.threads, scheduler.shutdown_timeout_s, scheduler.enabled) == (3, 1.5, False)


def test_storing_messages_notifies_and_nothing_runs_without_triggered_operations(scope: MemoryScope) -> None:
    service = scope.default_service
    message = Message("user", "I keep bees", datetime(2024, 10, 26, tzinfo=timezone.utc), name="ann")
    service.run_operation("read_message", "ann", messages=(message,))
    service.notify_messages("bob")
    status = service.scheduler.status()
    assert service.scheduler.operations == []  # the default config has no backend operation (yet)
    assert not status.started and status.running == () and status.last_runs == {}
    assert service.scheduler.users() == ["ann", "bob"]  # seen, for interval triggers


def test_a_closed_service_refuses_runs_and_closing_twice_is_harmless(scope: MemoryScope) -> None:
    service = scope.default_service
    assert service.close() is True  # nothing was running
    assert service.close() is True
    assert service.scheduler.status().closed
    with pytest.raises(MemoryScopeError, match="service 'memoryscope_service' is closed"):
        service.run_operation("list_memory", "ann")
