"""`threshold` on search, decided at the door: kept results score at least it, and a threshold
outside 0..1 is an error naming it — alike in Python, REST, the HTTP client and the CLI. And the
`reset` verb on the command line (`delete --all-users --yes`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryscope import MemoryScope
from memoryscope.cli import main
from memoryscope.errors import InvalidInputError

pytestmark = pytest.mark.slow  # every face, the CLI and a real uvicorn included; `-m "not slow"` leaves it out

ENVIRONMENT = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL", "MEMORYSCOPE_STORE_PATH")
TEXTS = ["I keep bees on the roof", "My brother collects stamps"]
QUERY = "bees on the roof"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    path = str(tmp_path / "threshold.db")
    with MemoryScope("default", overrides={"memory_store.path": path}) as scope:
        scope.add(TEXTS, user_id="lin", infer=False)
    yield path


def _cut(scores: list[float]) -> float:
    """A threshold between the best score and the others (a threshold is 0 to 1)."""
    return min(1.0, max(scores))


def test_the_door_and_the_python_api_keep_scores_at_least_the_threshold(store: str) -> None:
    with MemoryScope("default", overrides={"memory_store.path": store}) as scope:
        everything = scope.search(QUERY, user_id="lin")
        cut = _cut([record.score or 0.0 for record in everything])
        kept = scope.search(QUERY, user_id="lin", threshold=cut)
        at_door = scope.door.search(scope.door.caller("lin"), QUERY, threshold=cut)
        assert len(everything) == 2 and [record.memory for record in kept] == [TEXTS[0]] == [r.memory for r in at_door]
        assert scope.search(QUERY, user_id="lin", threshold=0) == everything  # 0 cuts nothing
        for wrong in (-0.1, 1.01, float("nan"), "0.5", True):
            with pytest.raises(InvalidInputError, match="threshold"):
                scope.search(QUERY, user_id="lin", threshold=wrong)  # type: ignore[arg-type]  # a wrong type on purpose


def test_the_command_line_takes_threshold(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--store", store, "--user", "lin", "--json"]
    assert main(["search", QUERY, *base]) == 0
    scores = [json.loads(line)["score"] for line in capsys.readouterr().out.splitlines()]
    assert main(["search", QUERY, "--threshold", str(_cut(scores)), *base]) == 0
    assert [json.loads(line)["memory"] for line in capsys.readouterr().out.splitlines()] == [TEXTS[0]]
    assert main(["search", QUERY, "--threshold", "2", *base]) == 2
    assert "threshold 2.0 is out of range" in capsys.readouterr().err


def test_rest_and_the_client_take_threshold(store: str) -> None:
    pytest.importorskip("fastapi", reason="the server extra: pip install 'memoryscope[server]'")
    import httpx

    from memoryscope.client import MemoryScopeClient
    from memoryscope.server.app import create_app
    from memoryscope.testing.live_server import LiveServer

    with MemoryScope("default", overrides={"memory_store.path": store}) as scope:
        live = LiveServer(create_app(scope)).start()
        try:
            with MemoryScopeClient(live.url) as client:
                everything = client.search(QUERY, "lin")
                cut = _cut([memory.score or 0.0 for memory in everything])
                assert [memory.memory for memory in client.search(QUERY, "lin", threshold=cut)] == [TEXTS[0]]
            answer = httpx.post(f"{live.url}/v1/users/lin/search", json={"query": QUERY, "threshold": cut}).json()
            assert [memory["memory"] for memory in answer["memories"]] == [TEXTS[0]]
            wrong = httpx.post(f"{live.url}/v1/users/lin/search", json={"query": QUERY, "threshold": -1})
            assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "invalid_threshold"
        finally:
            live.stop()


def test_delete_all_users_resets_the_store(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    with MemoryScope("default", overrides={"memory_store.path": store}) as scope:
        scope.add("bob likes jazz", user_id="bob", infer=False, workspace="work")
    assert main(["delete", "--all-users", "--store", store]) == 2  # only with --yes
    assert main(["delete", "--all-users", "--yes", "--store", store]) == 0
    assert "deleted 3 memories" in capsys.readouterr().out
    with MemoryScope("default", overrides={"memory_store.path": store}) as scope:
        assert scope.get_all("lin") == [] and scope.get_all("bob", workspace="work") == []
