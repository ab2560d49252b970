"""`memoryscope doctor --config C` checks what starting does not reach: each model's key and one
real call (the embedding model's vector size against the store's), the store writable, an
Elasticsearch cluster answering; one line per check, exit 1 on any failure. Real configs in
YAML files, the fake OpenAI server (or a closed port), `FakeElasticsearch`, SQLite in tmp_path."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from memoryscope.cli import main
from memoryscope.testing.fake_openai import FakeOpenAIServer

KEY_ENV = "MEMORYSCOPE_TEST_EMBEDDING_KEY"


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-embed")
    for name in ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH", "MEMORYSCOPE_ES_URL"):
        monkeypatch.delenv(name, raising=False)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def config_file(tmp_path: Path, base_url: str, *, store: str = "", name: str = "c.yaml") -> Path:
    """The default config with a remote embedding model at `base_url` (and `store`'s YAML, else a SQLite file)."""
    store = store or f"memory_store:\n  path: {tmp_path / 'm.db'}\n"
    path = tmp_path / name
    path.write_text(
        "extends: default\n"
        "model:\n"
        "  embedding_model:\n"
        "    module_name: bge_embedding\n"
        "    model_name: fake-bge\n"
        f"    api_base: {base_url}\n"
        f"    api_key_env: {KEY_ENV}\n" + store,
        encoding="utf-8",
    )
    return path


def doctor(config: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    status = main(["doctor", "--config", str(config)])
    return status, capsys.readouterr().out.splitlines()


def line(lines: list[str], start: str) -> str:
    (found,) = [text for text in lines if text.strip().startswith(start)]
    return found


def remember(config: Path) -> None:
    """One memory written through MemoryScope, so the store holds a vector of the model's size."""
    from memoryscope import MemoryScope

    with MemoryScope(str(config)) as scope:
        scope.add("likes green tea", user_id="ann", infer=False)


def test_everything_reachable_passes_line_by_line(
    tmp_path: Path, fake_openai: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path, fake_openai.base_url)
    remember(config)
    status, lines = doctor(config, capsys)
    assert status == 0, lines
    assert line(lines, "ok   model.embedding_model: key") == f"  ok   model.embedding_model: key {KEY_ENV} is set"
    reached = line(lines, "ok   model.embedding_model: bge_embedding")
    assert f"'fake-bge' at {fake_openai.base_url}/embeddings" in reached and "dimension 128" in reached
    assert line(lines, "skip model.generation_model").endswith("the steps that need it are skipped")
    assert f"{tmp_path / 'm.db'} opens and is writable" in line(lines, "ok   /")
    matched = line(lines, "ok   embedding model")
    assert "dimension 128, as the store's vectors" in matched
    assert "1 memories of 1 users" in lines[lines.index(matched) + 1]
    assert lines[-1] == "ok: nothing wrong found"


def test_an_unreachable_endpoint_is_one_failed_line_and_the_store_is_still_checked(
    tmp_path: Path, fake_openai: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    remember(config_file(tmp_path, fake_openai.base_url))
    port = closed_port()
    status, lines = doctor(config_file(tmp_path, f"http://127.0.0.1:{port}/v1", name="down.yaml"), capsys)
    assert status == 1
    failed = line(lines, "FAIL model.embedding_model")
    assert f"127.0.0.1:{port}" in failed and "cannot connect" in failed
    assert "check that the server is up and api_base is right" in failed
    assert "opens and is writable" in line(lines, "ok   /")  # opening the store needs no model call
    assert "1 memories of 1 users" in "\n".join(lines)
    assert not any("embedding model 'fake-bge': dimension" in text for text in lines)  # nothing to match it with
    assert lines[-1] == "something is wrong: see above"


def test_a_missing_key_fails_naming_the_variable(
    tmp_path: Path, fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path, fake_openai.base_url)
    remember(config)
    monkeypatch.delenv(KEY_ENV)
    fake_openai.clear_requests()
    status, lines = doctor(config, capsys)
    assert status == 1
    failed = line(lines, "FAIL model.embedding_model")
    assert f"environment variable {KEY_ENV} is not set" in failed and f"export {KEY_ENV}=" in failed
    assert fake_openai.requests == []  # nothing called without the key
    assert "opens and is writable" in line(lines, "ok   /")


def test_a_refused_key_says_to_check_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAIServer(api_key="sk-the-right-one") as server:
        status, lines = doctor(config_file(tmp_path, server.base_url), capsys)
    assert status == 1
    failed = line(lines, "FAIL model.embedding_model")
    assert "401" in failed and f"check the key in {KEY_ENV}" in failed
    assert "sk-test-embed" not in "\n".join(lines)


def test_an_embedding_size_unlike_the_stores_fails_naming_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAIServer(embedding_dimension=64) as server:
        remember(config_file(tmp_path, server.base_url))
    with FakeOpenAIServer(embedding_dimension=32) as server:
        status, lines = doctor(config_file(tmp_path, server.base_url), capsys)
    assert status == 1
    assert "dimension 32" in line(lines, "ok   model.embedding_model: bge_embedding")
    failed = line(lines, "FAIL cannot open it: memory store")
    assert "dimension 64" in failed and "dimension 32" in failed and "memoryscope reembed" in failed


def test_a_generation_model_is_called_once(
    tmp_path: Path, fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", fake_openai.base_url)
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-test-llm")
    config = config_file(tmp_path, fake_openai.base_url)
    remember(config)
    fake_openai.clear_requests()
    status, lines = doctor(config, capsys)
    assert status == 0, lines
    assert "answers" in line(lines, "ok   model.generation_model: openai_like")
    assert [request.path for request in fake_openai.requests].count("/v1/chat/completions") == 1


@pytest.mark.skipif(os.environ.get("MEMORYSCOPE_ES_URL") is not None, reason="uses the fake cluster")
def test_elasticsearch_reachable_without_an_index_is_not_created(
    tmp_path: Path, fake_openai: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("elasticsearch")
    from memoryscope.testing.fake_elasticsearch import FakeElasticsearch

    with FakeElasticsearch() as cluster:
        store = f"memory_store:\n  class: elasticsearch_memory_store\n  hosts: ['{cluster.url}']\n"
        status, lines = doctor(config_file(tmp_path, fake_openai.base_url, store=store), capsys)
        assert status == 0, lines
        found = line(lines, "ok   Elasticsearch")
        assert "8.13.4" in found and "'memoryscope_memory' does not exist yet (the first write creates it)" in found
        assert all(request.method in ("GET", "HEAD") for request in cluster.requests)  # nothing created


def test_an_unreachable_elasticsearch_is_one_failed_line(
    tmp_path: Path, fake_openai: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("elasticsearch")
    port = closed_port()
    store = f"memory_store:\n  class: elasticsearch_memory_store\n  hosts: ['http://127.0.0.1:{port}']\n"
    status, lines = doctor(config_file(tmp_path, fake_openai.base_url, store=store), capsys)
    assert status == 1
    failed = line(lines, "FAIL Elasticsearch")
    assert f"127.0.0.1:{port}" in failed and "reaching the cluster failed: cannot connect" in failed
