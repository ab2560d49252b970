"""`python -m memoryscope.testing.es_contract`: the store contract against a cluster, as a user runs it.

The command runs in a child process against a `FakeElasticsearch` served from this one, so what is
checked is what a user sees: the report on stdout, one line on stderr, the exit status, and the
indices left on the cluster.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from memoryscope.testing.fake_elasticsearch import FakeElasticsearch

pytestmark = pytest.mark.slow  # the contract command in a subprocess; `-m "not slow"` leaves it out

pytest.importorskip("elasticsearch", reason='needs the Elasticsearch client: pip install "memoryscope[elasticsearch]"')

GROUPS = (
    "writing and reading",
    "update and delete",
    "scan, count, filters",
    "search",
    "metadata filters",
    "history",
    "leases",
    "the embedding model",
    "whole store, re-embedding",
)


@pytest.fixture
def server() -> Iterator[FakeElasticsearch]:
    with FakeElasticsearch() as running:
        yield running


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """The command as a user types it, without credentials from this machine's environment."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("MEMORYSCOPE_ES_")}
    command = [sys.executable, "-m", "memoryscope.testing.es_contract", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=180, check=False)


def test_the_whole_contract_passes_on_the_fake_and_leaves_no_index(server: FakeElasticsearch) -> None:
    done = run("--url", server.url)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr
    lines = done.stdout.splitlines()
    heading = rf"Store contract against {server.url} \(Elasticsearch 8\.13\.4\), indices memoryscope_check_[0-9a-f]{{8}}_\*"
    assert re.fullmatch(heading, lines[0]), lines[0]
    for group in GROUPS:
        assert re.search(rf"^  PASS  {re.escape(group)} +\d+ checks$", done.stdout, re.MULTILINE), group
    assert "FAIL" not in done.stdout and "Traceback" not in done.stdout
    assert "indices: no index left behind" in lines
    passed = re.fullmatch(rf"PASS: (\d+) checks against {server.url} \(Elasticsearch 8\.13\.4\)", lines[-1])
    assert passed is not None and int(passed.group(1)) >= 100, lines[-1]
    written = {request.path.split("/")[1] for request in server.requests if request.method == "PUT"}
    assert written and all(name.startswith("memoryscope_check_") for name in written)
    assert any(name.endswith("-history") for name in written) and any("-reembed-" in name for name in written)
    assert server.index_names() == [] and server.aliases() == {}


def test_a_failed_check_is_reported_with_its_reason_and_exit_1(server: FakeElasticsearch) -> None:
    server.fail_next(1, action="_delete_by_query")  # a cluster error: the store's StoreError is the reason
    server.script_search([], [])  # a wrong answer: the rewritten assert shows what was found
    selected = "keyword_search_finds_exact_words or (delete_by_filter_deletes_exactly_the_matches and user_only)"
    done = run("--url", server.url, "-k", selected)
    assert (done.returncode, done.stderr) == (1, ""), done.stdout + done.stderr
    assert re.search(r"^  FAIL  scan, count, filters +0 of 1 checks$", done.stdout, re.MULTILINE)
    assert re.search(r"^  FAIL  search +0 of 1 checks$", done.stdout, re.MULTILINE)
    failed_check = "scan, count, filters: test_delete_by_filter_deletes_exactly_the_matches[user_only]"
    assert f"{failed_check}\n    store_contract.py:" in done.stdout  # the contract's line, not the raising frame
    assert "delete by filter failed: HTTP 500 fake_failure: injected" in done.stdout
    assert "search: test_keyword_search_finds_exact_words\n    _store_contract_search.py:" in done.stdout
    assert "AssertionError: assert [] == [" in done.stdout
    assert "Traceback" not in done.stdout
    assert done.stdout.splitlines()[-1] == f"FAIL: 2 of 2 checks failed against {server.url} (Elasticsearch 8.13.4)"
    assert server.index_names() == []


def test_keep_leaves_the_indices_under_the_given_prefix(server: FakeElasticsearch) -> None:
    done = run("--url", server.url, "--index-prefix", "team_a.", "--keep", "-k", "lease")
    assert done.returncode == 0, done.stdout + done.stderr
    kept = server.index_names()
    assert kept and all(re.fullmatch(r"team_a\.[0-9a-f]{8}_\d+(-leases)?", name) for name in kept), kept
    assert f"indices: kept {len(kept)} indices {kept[0].rpartition('_')[0]}_*" in done.stdout
    assert done.stdout.splitlines()[-1] == f"PASS: 4 checks against {server.url} (Elasticsearch 8.13.4)"


def test_an_unreachable_cluster_is_one_line_and_exit_2() -> None:
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = run("--url", f"http://elastic:secret@127.0.0.1:{port}")
    assert (done.returncode, done.stdout) == (2, "")
    [line] = done.stderr.splitlines()  # one line, no traceback, no password
    assert line.startswith(f"es_contract: cannot reach http://127.0.0.1:{port}: cannot connect"), line
    assert "secret" not in line


def test_a_bad_prefix_is_refused_before_anything_runs(server: FakeElasticsearch) -> None:
    done = run("--url", server.url, "--index-prefix", "Memories")
    assert done.returncode == 2 and "--index-prefix: lowercase letters" in done.stderr
    assert server.requests == []
