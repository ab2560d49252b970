"""Startup never reaches a model: `MemoryScope(...)` and a server start while the embedding
endpoint is down; the vector size is learned by the first operation that needs it, and checked
against the store's then. Real SQLite files, the fake OpenAI server on 127.0.0.1 (or a closed
port where it is not running yet)."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memoryscope import MemoryScope
from memoryscope.errors import MemoryScopeError, ModelError, StoreError
from memoryscope.testing.fake_openai import FakeOpenAIServer

KEY_ENV = "MEMORYSCOPE_TEST_EMBEDDING_KEY"


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (free when asked: the fake server may take it later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def remote_overrides(store: Path, base_url: str, **embedding: Any) -> dict[str, Any]:
    """The default config with a remote (`bge_embedding`) embedding model at `base_url`, no retries."""
    overrides = {
        "memory_store.path": str(store),
        "model.embedding_model.module_name": "bge_embedding",
        "model.embedding_model.model_name": "fake-bge",
        "model.embedding_model.api_base": base_url,
        "model.embedding_model.api_key_env": KEY_ENV,
        "model.embedding_model.max_retries": 0,
    }
    return {**overrides, **{f"model.embedding_model.{key}": value for key, value in embedding.items()}}


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-embed")
    for name in ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH"):
        monkeypatch.delenv(name, raising=False)


def recorded(store: Path) -> dict[str, str]:
    with sqlite3.connect(store) as connection:
        return dict(connection.execute("SELECT key, value FROM store_meta").fetchall())


def test_building_sends_no_request_to_the_embedding_model(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    """A new store and then an existing one: opened without a call; the first search makes it."""
    for _ in range(2):
        with MemoryScope("default", overrides=remote_overrides(tmp_path / "m.db", fake_openai.base_url)) as scope:
            assert fake_openai.requests == []
            scope.search("tea", user_id="ann")
            assert [request.path for request in fake_openai.requests] == ["/v1/embeddings"]
            fake_openai.clear_requests()
    assert recorded(tmp_path / "m.db")["embedding_dimension"] == str(fake_openai.embedding_dimension)


def test_an_unreachable_endpoint_fails_the_first_search_not_the_start(tmp_path: Path) -> None:
    port = closed_port()
    overrides = remote_overrides(tmp_path / "m.db", f"http://127.0.0.1:{port}/v1")
    with MemoryScope("default", overrides=overrides) as scope:
        with pytest.raises(ModelError, match=rf"fake-bge.*127\.0\.0\.1:{port}.*cannot connect"):
            scope.search("tea", user_id="ann")
        with FakeOpenAIServer(port=port) as server:  # the endpoint comes up: the same object carries on
            scope.add("likes green tea", user_id="ann", infer=False)
            (found,) = scope.search("tea", user_id="ann")
            assert found.memory == "likes green tea"
            assert {request.path for request in server.requests} == {"/v1/embeddings"}


def test_a_stored_size_unlike_the_models_is_a_clear_error_at_first_use(tmp_path: Path) -> None:
    store = tmp_path / "m.db"
    with (
        FakeOpenAIServer(embedding_dimension=64) as server,
        MemoryScope("default", overrides=remote_overrides(store, server.base_url)) as scope,
    ):
        scope.add("likes green tea", user_id="ann", infer=False)
    with (
        FakeOpenAIServer(embedding_dimension=32) as server,
        MemoryScope("default", overrides=remote_overrides(store, server.base_url)) as scope,
    ):
        assert server.requests == []  # opened, even though the sizes differ: nothing was asked yet
        assert [record.memory for record in scope.get_all("ann")] == ["likes green tea"]  # no vectors needed
        with pytest.raises(MemoryScopeError) as raised:  # the store's StoreError, as the retrieving worker's
            scope.search("tea", user_id="ann")
    message = str(raised.value)
    assert str(store) in message and "'fake-bge'" in message
    assert "dimension 64" in message and "dimension 32" in message
    assert "memoryscope reembed" in message and "dimensions: 64" in message
    assert recorded(store)["embedding_dimension"] == "64"  # the file is as it was


def test_a_configured_dimensions_is_recorded_at_open_without_a_call(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    store = tmp_path / "m.db"
    with MemoryScope("default", overrides=remote_overrides(store, fake_openai.base_url, dimensions=128)):
        assert fake_openai.requests == []
        assert recorded(store)["embedding_dimension"] == "128"


def test_a_configured_dimensions_unlike_the_replies_names_the_setting(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    overrides = remote_overrides(tmp_path / "m.db", fake_openai.base_url, dimensions=96)
    expected = r"expected vectors of size 96 \(`dimensions` in its config\), got 128"
    with MemoryScope("default", overrides=overrides) as scope, pytest.raises(MemoryScopeError, match=expected):
        scope.search("tea", user_id="ann")


def test_another_model_in_the_file_is_still_refused_when_opened(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    """The model's name needs no call: a store of another model fails at once, as before."""
    store = tmp_path / "m.db"
    with MemoryScope("default", overrides=remote_overrides(store, fake_openai.base_url)) as scope:
        scope.add("likes green tea", user_id="ann", infer=False)
    fake_openai.clear_requests()
    with pytest.raises(StoreError, match=r"'fake-bge'.*opened with 'other-bge' \(dimension not known yet\).*store_path="):
        MemoryScope("default", overrides=remote_overrides(store, fake_openai.base_url, model_name="other-bge"))
    assert fake_openai.requests == []


def test_a_server_starts_while_the_embedding_endpoint_is_down(tmp_path: Path) -> None:
    """`memoryscope serve`'s app over a remote embedding model that is not up: it starts and
    answers; a search answers a clear error until the endpoint is up, then results."""
    pytest.importorskip("fastapi", reason="the server tests need the server extra: pip install 'memoryscope[server]'")
    import httpx

    from memoryscope.server.app import create_app
    from memoryscope.testing.live_server import LiveServer

    port = closed_port()
    scope = MemoryScope("default", overrides=remote_overrides(tmp_path / "m.db", f"http://127.0.0.1:{port}/v1"))
    live = LiveServer(create_app(scope)).start()
    try:
        assert httpx.get(f"{live.url}/healthz").status_code == 200
        added = httpx.post(f"{live.url}/v1/users/ann/memories", json={"texts": ["likes green tea"]})
        assert added.status_code >= 500 and "cannot connect" in added.text and f"127.0.0.1:{port}" in added.text
        with FakeOpenAIServer(port=port):
            added = httpx.post(f"{live.url}/v1/users/ann/memories", json={"texts": ["likes green tea"]})
            assert added.status_code == 201, added.text
            found = httpx.post(f"{live.url}/v1/users/ann/search", json={"query": "tea"})
            assert [memory["memory"] for memory in found.json()["memories"]] == ["likes green tea"]
    finally:
        live.stop()
        scope.close()


@pytest.mark.parametrize("config", ["siliconflow", "siliconflow_zh", "openai", "dashscope", "elasticsearch"])
def test_every_shipped_remote_config_builds_with_the_network_off(
    config: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite blocks every connection but loopback: building must not try one (it did: the
    store asked the embedding endpoint for its vector size)."""
    if config == "elasticsearch":
        pytest.importorskip("elasticsearch")
    for name in ("SILICONFLOW_API_KEY", "OPENAI_API_KEY", "DASHSCOPE_API_KEY"):
        monkeypatch.setenv(name, "sk-test")
    monkeypatch.setenv("MEMORYSCOPE_STORE_PATH", str(tmp_path / "m.db"))
    with MemoryScope(config) as scope:
        assert scope.store is not None and scope.store.embedding_model.known_dimension is None
