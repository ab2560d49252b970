"""Model tests talk to a real HTTP fake server on 127.0.0.1 (`server`, from tests/conftest.py),
with every other address blocked for the whole suite (`no_network`, also there)."""

from __future__ import annotations

import socket
from typing import Any

import pytest


@pytest.fixture
def fast_retry() -> dict[str, Any]:
    """Retry params with millisecond waits, so retry tests stay fast; tests override what they check."""
    return {"max_retries": 2, "retry_backoff_s": 0.001, "retry_max_wait_s": 0.05, "timeout": 5.0}


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on: connections to it are refused."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = int(probe.getsockname()[1])
    probe.close()
    return port


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """A test key in MEMORYSCOPE_TEST_KEY; its last 4 characters are `9xyz`."""
    key = "sk-test-secret-9xyz"
    monkeypatch.setenv("MEMORYSCOPE_TEST_KEY", key)
    return key
