"""MemoryScope's pytest plugin: the fake OpenAI-compatible server, the offline embedding model
and a network block, for MemoryScope's own tests and for users testing their own workers.

Installing MemoryScope next to pytest registers this plugin (the `pytest11` entry point
`memoryscope`), so these fixtures are there in any test suite without imports:

- `fake_openai`: a started `FakeOpenAIServer` on 127.0.0.1, stopped after the test. Point a
  model at `fake_openai.base_url`; script it with `fake_openai.add_rule(...)` or set
  `fake_openai.default_reply`; read what was sent in `fake_openai.requests`.
- `local_embedding`: the offline `LocalEmbedding` model, loaded once per session (it keeps no
  state between calls and serialises use of its engine behind a lock).
- `no_network`: blocks every outbound connection and name lookup except to loopback
  (127.0.0.0/8, ::1, `localhost`); a blocked attempt raises `NetworkBlocked` naming the host.

For users the network block is opt-in: request the `no_network` fixture, or mark tests with
`@pytest.mark.no_network` (a module can set `pytestmark = pytest.mark.no_network`). MemoryScope's
own suite turns it on for every test in `tests/conftest.py`.

Without the entry point (or with `-p no:memoryscope`), a conftest can load it by hand:
`pytest_plugins = ["memoryscope.testing.pytest_plugin"]`.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from memoryscope.testing.fake_openai import FakeOpenAIServer

if TYPE_CHECKING:  # the model loads numpy: import it only when a test asks for it
    from memoryscope.models.embedding.local_embedding import LocalEmbedding

__all__ = ["NetworkBlocked", "fake_openai", "local_embedding", "no_network"]


class NetworkBlocked(OSError):
    """A test tried to reach a host other than this machine's loopback."""


def _is_loopback(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "no_network: block connections to anything but loopback (127.0.0.1, ::1, localhost)")


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Block name lookups and connections to anything but loopback for this test."""
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not _is_loopback(host):
            raise NetworkBlocked(f"network is off in tests: lookup of {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    def check(address: Any) -> None:
        if isinstance(address, tuple) and not _is_loopback(address[0]):
            raise NetworkBlocked(f"network is off in tests: connect to {address[0]!r} (port {address[1]!r})")

    def connect(self: socket.socket, address: Any) -> None:
        check(address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture(autouse=True)
def _memoryscope_no_network_marker(request: pytest.FixtureRequest) -> None:
    """Apply `no_network` to tests marked `@pytest.mark.no_network`."""
    if request.node.get_closest_marker("no_network") is not None:
        request.getfixturevalue("no_network")


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A started fake OpenAI-compatible server on 127.0.0.1, stopped after the test."""
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture(scope="session")
def local_embedding() -> LocalEmbedding:
    """The offline embedding model, loaded once for the session."""
    from memoryscope.models.embedding.local_embedding import LocalEmbedding

    return LocalEmbedding()
