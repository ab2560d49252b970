"""Model tests talk to a real HTTP fake server on 127.0.0.1, with every other address blocked.

The block proves nothing reaches the internet at run time: a tokenizer or data download
attempted by any library during these tests fails loudly instead of passing by luck.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from memoryscope.testing.fake_openai import FakeOpenAIServer

LOOPBACK = {"127.0.0.1", "localhost", "::1", b"127.0.0.1", b"localhost"}


class NetworkBlocked(OSError):
    pass


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in LOOPBACK:
            raise NetworkBlocked(f"network is off in tests: lookup of {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    def check(address: Any) -> None:
        if isinstance(address, tuple) and address[0] not in LOOPBACK:
            raise NetworkBlocked(f"network is off in tests: connect to {address!r}")

    def connect(self: socket.socket, address: Any) -> None:
        check(address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


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
