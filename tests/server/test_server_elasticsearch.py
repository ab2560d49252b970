"""Scale-out over Elasticsearch: two `memoryscope serve` processes on one index behave as one
service. The index is served by the fake Elasticsearch (`memoryscope.testing.fake_elasticsearch`,
real HTTP on 127.0.0.1), so the real Elasticsearch store code runs in each server process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("elasticsearch", reason="the Elasticsearch store needs: pip install 'memoryscope[elasticsearch]'")
httpx = pytest.importorskip("httpx", reason="the server extra is not installed")

from memoryscope.app import MemoryScope  # noqa: E402
from memoryscope.leases import lease_name  # noqa: E402
from memoryscope.testing.fake_elasticsearch import FakeElasticsearch  # noqa: E402
from memoryscope.testing.fake_openai import FakeOpenAIServer  # noqa: E402

pytestmark = pytest.mark.slow  # two server processes; `-m "not slow"` leaves it out

CONFIG = """\
extends: default
memory_store:
  class: elasticsearch_memory_store
  hosts: ["${MEMORYSCOPE_ES_URL}"]
  index_name: scale_out
  embedding_model: embedding_model
  refresh: wait_for
memory_service:
  memoryscope_service:
    lease_wait_s: 0.5
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> Iterator[Path]:
    with FakeElasticsearch() as elastic:
        monkeypatch.setenv("MEMORYSCOPE_ES_URL", elastic.url)
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", fake_openai.base_url)
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-test-llm")
        path = tmp_path / "es.yaml"
        path.write_text(CONFIG, encoding="utf-8")
        yield path


@pytest.fixture
def two_servers(config: Path, tmp_path: Path) -> Iterator[list[str]]:
    ports = [_free_port(), _free_port()]
    processes = []
    for port in ports:
        with (tmp_path / f"serve-{port}.log").open("w") as log:  # the child keeps its own copy of the descriptor
            command = [sys.executable, "-m", "memoryscope.cli", "serve", "--config", str(config), "--port", str(port)]
            processes.append(subprocess.Popen(command, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT))
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for url, process in zip(urls, processes, strict=True):
            _wait_ready(url, process, tmp_path)
        yield urls
        for process in processes:
            process.send_signal(signal.SIGTERM)
        assert [process.wait(timeout=60) for process in processes] == [0, 0]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)


def _wait_ready(url: str, process: subprocess.Popen[bytes], logs: Path, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            shown = "\n".join(path.read_text(errors="replace") for path in logs.glob("serve-*.log"))
            pytest.fail(f"memoryscope serve exited with {process.returncode}:\n{shown}")
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail(f"{url} did not get ready within {timeout_s:g}s")


@pytest.mark.timeout(300)
def test_two_servers_over_one_index_are_one_service_and_share_the_user_lease(two_servers: list[str], config: Path) -> None:
    first, second = two_servers
    with httpx.Client(timeout=60) as client:
        added = client.post(f"{first}/v1/users/ann/memories", json={"texts": ["ann keeps bees in Lyon"]})
        assert added.status_code == 201, added.text
        memory_id = added.json()["added"][0]["id"]
        assert client.get(f"{second}/v1/memories/{memory_id}").json()["memory"] == "ann keeps bees in Lyon"
        found = client.post(f"{second}/v1/users/ann/search", json={"query": "bees"}).json()["memories"]
        assert [record["id"] for record in found] == [memory_id]

        # a third process (this test) holds ann's backend lease, as a replica mid-run would: neither
        # server may start ann's consolidation until it is released
        with MemoryScope(str(config)) as other_replica:
            store = other_replica.store
            assert store is not None
            name = lease_name("ann")
            assert store.acquire_lease(name, "other-replica", 60.0)
            for url in (first, second):
                busy = client.post(f"{url}/v1/users/ann/operations/consolidate_memory", json={})
                assert busy.status_code == 409, busy.text
                assert busy.json()["error"]["code"] == "busy" and busy.headers["Retry-After"] == "5"
            store.release_lease(name, "other-replica")
        ran = client.post(f"{second}/v1/users/ann/operations/consolidate_memory", json={})
        assert ran.status_code == 200, ran.text
        assert client.delete(f"{first}/v1/memories/{memory_id}").json()["deleted"]
        assert client.get(f"{second}/v1/memories/{memory_id}").status_code == 404
