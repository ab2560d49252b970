"""mem0's REST paths on a real uvicorn: mem0's bodies and answers, through the same API keys,
browser guard and error bodies as /v1 (a key scoped to one user reaches no other; reset is admin's)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the server tests need the server extra: pip install 'memoryscope[server]'")

import httpx

from memoryscope.app import MemoryScope
from memoryscope.server.access import ApiKey, KeyRing
from memoryscope.server.app import create_app
from memoryscope.testing.live_server import LiveServer

pytestmark = pytest.mark.slow  # a real uvicorn; `-m "not slow"` leaves it out

ALICE_KEY, ADMIN_KEY = "alice-secret-key", "admin-secret-key"


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


@pytest.fixture
def server(store_path: Path) -> Iterator[LiveServer]:
    scope = MemoryScope("default")
    keys = KeyRing.of(
        ApiKey("alice-app", _digest(ALICE_KEY), users=frozenset({"alice"})), ApiKey("ops", _digest(ADMIN_KEY), admin=True)
    )
    live = LiveServer(create_app(scope, keys=keys)).start()
    try:
        yield live
    finally:
        live.stop()
        scope.close(timeout=5)


def client(live: LiveServer, key: str) -> httpx.Client:
    return httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def test_mem0_paths_add_search_list_get_update_history_delete(server: LiveServer) -> None:
    with client(server, ALICE_KEY) as alice:
        body = {"messages": [{"role": "user", "content": "I keep bees on the roof"}], "user_id": "alice", "infer": False,
                "metadata": {"source": "app"}}  # fmt: skip
        added = alice.post("/memories", json=body)
        assert added.status_code == 200, added.text
        (item,) = added.json()["results"]
        assert (item["memory"], item["event"]) == ("I keep bees on the roof", "ADD")
        memory_id = item["id"]

        found = alice.post("/search", json={"query": "bees", "filters": {"user_id": "alice"}, "top_k": 3}).json()
        older = alice.post("/search", json={"query": "bees", "user_id": "alice", "top_k": 3}).json()
        assert found == older and [hit["id"] for hit in found["results"]] == [memory_id]
        hit = found["results"][0]
        assert hit["metadata"] == {"source": "app"} and hit["user_id"] == "alice" and isinstance(hit["score"], float)
        none_kept = alice.post("/search", json={"query": "bees", "filters": {"user_id": "alice"}, "threshold": 1.0}).json()
        assert all(hit["score"] >= 1.0 for hit in none_kept["results"])

        listed = alice.get("/memories", params={"user_id": "alice"}).json()
        assert [entry["id"] for entry in listed["results"]] == [memory_id] and "score" not in listed["results"][0]
        assert alice.get(f"/memories/{memory_id}").json()["memory"] == "I keep bees on the roof"

        updated = alice.put(f"/memories/{memory_id}", json={"text": "I keep two hives of bees"})
        assert updated.json() == {"message": "Memory updated successfully!"}
        history = alice.get(f"/memories/{memory_id}/history").json()
        assert [(row["event"], row["new_memory"]) for row in history] == [
            ("ADD", "I keep bees on the roof"),
            ("UPDATE", "I keep two hives of bees"),
        ]
        assert alice.delete(f"/memories/{memory_id}").json() == {"message": "Memory deleted successfully"}
        assert alice.get(f"/memories/{memory_id}").json() is None  # as mem0: null for an unknown id
        assert alice.delete(f"/memories/{memory_id}").status_code == 404

        alice.post("/memories", json={**body, "messages": [{"role": "user", "content": "I like tea"}]})
        assert alice.delete("/memories", params={"user_id": "alice"}).json() == {"message": "All relevant memories deleted"}
        assert alice.get("/memories", params={"user_id": "alice"}).json() == {"results": []}


def _error(response: httpx.Response) -> tuple[int, Any]:
    return response.status_code, response.json()["error"]["code"]


def test_the_same_keys_scopes_and_errors_as_v1(server: LiveServer) -> None:
    with client(server, ADMIN_KEY) as admin:
        bob = admin.post("/memories", json={"messages": [{"role": "user", "content": "bob likes jazz"}], "user_id": "bob",
                                            "infer": False}).json()["results"][0]  # fmt: skip
    with client(server, ALICE_KEY) as alice:
        assert _error(alice.post("/search", json={"query": "jazz", "filters": {"user_id": "bob"}})) == (403, "forbidden")
        assert _error(alice.get("/memories", params={"user_id": "bob"})) == (403, "forbidden")
        assert alice.get(f"/memories/{bob['id']}").json() is None  # another user's memory is not found
        assert _error(alice.delete(f"/memories/{bob['id']}")) == (404, "unknown_memory")
        assert _error(alice.post("/reset")) == (403, "forbidden")  # reset is the admin's
        missing = alice.post("/memories", json={"messages": [{"role": "user", "content": "hi"}]})
        assert missing.status_code == 422 and "at least one of 'user_id'" in missing.text
        assert _error(alice.post("/search", json={"query": "x", "user_id": "alice", "threshold": 2})) == (
            422,
            "invalid_threshold",
        )
    anonymous = httpx.post(f"{server.url}/search", json={"query": "jazz", "user_id": "bob"})
    assert anonymous.status_code == 401
    cross_site = httpx.post(
        f"{server.url}/memories", headers={"Origin": "https://evil.example", "Authorization": f"Bearer {ADMIN_KEY}"},
        json={"messages": [{"role": "user", "content": "x"}], "user_id": "bob"},
    )  # fmt: skip
    assert _error(cross_site) == (403, "origin_not_allowed")  # the browser guard, before any key is read
    with client(server, ADMIN_KEY) as admin:
        assert admin.post("/reset").json() == {"message": "All memories reset"}
        assert admin.get("/memories", params={"user_id": "bob"}).json() == {"results": []}


TRIP_KEY, TWO_KEY = "trip-secret-key", "two-workspaces-key"


@pytest.fixture
def scoped_server(store_path: Path) -> Iterator[LiveServer]:
    scope = MemoryScope("default")
    keys = KeyRing.of(
        ApiKey("alice-app", _digest(ALICE_KEY), users=frozenset({"alice"})),
        ApiKey("trip-app", _digest(TRIP_KEY), workspaces=frozenset({"trip"})),
        ApiKey("two-app", _digest(TWO_KEY), workspaces=frozenset({"trip", "home"})),
        ApiKey("ops", _digest(ADMIN_KEY), admin=True),
    )
    live = LiveServer(create_app(scope, keys=keys)).start()
    try:
        yield live
    finally:
        live.stop()
        scope.close(timeout=5)


def _texts(response: httpx.Response) -> set[str]:
    assert response.status_code == 200, response.text
    return {item["memory"] for item in response.json()["results"]}


def test_reads_and_delete_all_match_every_memory_with_the_ids_and_keys_keep_their_workspaces(
    scoped_server: LiveServer,
) -> None:
    added = {
        "alice likes tea": {"user_id": "alice"},
        "alice plans a trip to Kyoto": {"user_id": "alice", "run_id": "trip"},
        "alice asked the bot for hotels": {"user_id": "alice", "agent_id": "bot", "run_id": "trip"},
        "alice waters the plants": {"user_id": "alice", "run_id": "home"},
        "the bot answers in English": {"agent_id": "bot"},
    }
    with client(scoped_server, ADMIN_KEY) as admin:
        for text, ids in added.items():
            body = {"messages": [{"role": "user", "content": text}], "infer": False, **ids}
            assert admin.post("/memories", json=body).status_code == 200
        # no user named: the memories added with no user_id (alice's of the bot are read by naming her)
        assert _texts(admin.get("/memories", params={"agent_id": "bot"})) == {"the bot answers in English"}
    alices = {text for text, ids in added.items() if ids.get("user_id") == "alice"}
    with client(scoped_server, ALICE_KEY) as alice:  # a key of users, any workspace: mem0's filters
        assert _texts(alice.get("/memories", params={"user_id": "alice"})) == alices
        assert _texts(alice.post("/search", json={"query": "what does alice do?", "filters": {"user_id": "alice"}})) == alices
        with_bot = alice.get("/memories", params={"user_id": "alice", "agent_id": "bot"})
        assert _texts(with_bot) == {"alice asked the bot for hotels"}
    trip = {"alice plans a trip to Kyoto", "alice asked the bot for hotels"}
    for key in (TRIP_KEY, TWO_KEY):
        with client(scoped_server, key) as scoped:  # a key of workspaces never reads outside them
            assert _error(scoped.get("/memories", params={"user_id": "alice"})) == (403, "forbidden")
            refused = scoped.post("/search", json={"query": "tea", "filters": {"user_id": "alice"}})
            assert _error(refused) == (403, "forbidden") and "trip" in refused.json()["error"]["message"]
            assert _error(scoped.delete("/memories", params={"user_id": "alice"})) == (403, "forbidden")
            assert _texts(scoped.get("/memories", params={"user_id": "alice", "run_id": "trip"})) == trip
            found = scoped.post("/search", json={"query": "tea or Kyoto", "user_id": "alice", "run_id": "trip"})
            assert _texts(found) == trip
    with client(scoped_server, TRIP_KEY) as scoped:
        assert _error(scoped.get("/memories", params={"user_id": "alice", "run_id": "home"})) == (403, "forbidden")
        deleted = scoped.delete("/memories", params={"user_id": "alice", "run_id": "trip"})
        assert deleted.json() == {"message": "All relevant memories deleted"}  # both, whatever their agent
    with client(scoped_server, ALICE_KEY) as alice:
        assert _texts(alice.get("/memories", params={"user_id": "alice"})) == alices - trip
        assert alice.delete("/memories", params={"user_id": "alice"}).status_code == 200
        assert _texts(alice.get("/memories", params={"user_id": "alice"})) == set()
    with client(scoped_server, ADMIN_KEY) as admin:
        assert _texts(admin.get("/memories", params={"agent_id": "bot"})) == {"the bot answers in English"}
