"""MemoryScope's pytest plugin: its fixtures, and the network block this suite turns on for every test."""

from __future__ import annotations

import socket

import pytest
import requests

from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.testing.pytest_plugin import NetworkBlocked

pytest_plugins = ["pytester"]


def test_fake_openai_is_started_and_answers(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.add_rule("ping", "pong")
    body = {"model": "m", "messages": [{"role": "user", "content": "ping"}]}
    response = requests.post(f"{fake_openai.base_url}/chat/completions", json=body, timeout=5)
    assert response.json()["choices"][0]["message"]["content"] == "pong"


def test_local_embedding_is_shared_for_the_session(local_embedding: LocalEmbedding, embedding: LocalEmbedding) -> None:
    assert isinstance(local_embedding, LocalEmbedding)
    assert embedding is local_embedding


def test_the_suite_blocks_lookups_and_connections_beyond_loopback() -> None:
    with pytest.raises(NetworkBlocked, match=r"example\.com"):
        socket.create_connection(("example.com", 80), timeout=1)
    with pytest.raises(NetworkBlocked, match=r"192\.0\.2\.1"):
        socket.create_connection(("192.0.2.1", 80), timeout=1)
    with pytest.raises(requests.ConnectionError, match=r"example\.com"):
        requests.get("http://example.com/", timeout=1)


def test_loopback_stays_open(fake_openai: FakeOpenAIServer) -> None:
    with socket.create_connection(("127.0.0.1", fake_openai.port), timeout=5):
        pass
    with socket.create_connection(("localhost", fake_openai.port), timeout=5):
        pass


def test_users_opt_in_with_the_marker(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loaded in another project, the plugin gives the fixtures; the block applies only when asked."""
    pytester.makepyfile(
        """
        import socket
        import pytest
        from memoryscope.testing.pytest_plugin import NetworkBlocked

        def test_open():
            assert socket.getaddrinfo.__module__ == "socket"  # not blocked unless asked

        @pytest.mark.no_network
        def test_marked():
            with pytest.raises(NetworkBlocked, match="example.org"):
                socket.getaddrinfo("example.org", 80)

        def test_fixture(no_network):
            with pytest.raises(NetworkBlocked, match="203.0.113.5"):
                socket.create_connection(("203.0.113.5", 80), timeout=1)

        def test_server(fake_openai):
            assert fake_openai.base_url.startswith("http://127.0.0.1:")
        """
    )
    # a subprocess: in this process the suite's own block is on. Plugins load by `-p` only, so the
    # run is the same whether or not memoryscope's pytest11 entry point is installed.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_subprocess("-p", "memoryscope.testing.pytest_plugin", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
