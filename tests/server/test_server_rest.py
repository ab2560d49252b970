"""The REST API of `memoryscope serve`, over real HTTP: a real uvicorn on 127.0.0.1, a real
MemoryScope on a temp SQLite file. Most tests share one server (module-scoped, no LLM, the config
zone Asia/Shanghai so a time read in the wrong zone shows); each test uses users of its own."""

from __future__ import annotations

import io
import json
import socket
import sqlite3
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import requests

from memoryscope.app import MemoryScope
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.server.app import create_app
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.testing.live_server import LiveServer
from memoryscope.transfer import import_memories

pytestmark = pytest.mark.slow  # a real uvicorn; `-m "not slow"` leaves it out

ZONE = "Asia/Shanghai"  # +08:00 all year: a naive time read as UTC lands 8 hours off
LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL", "MEMORYSCOPE_STORE_PATH")
NINE_AM = datetime(2024, 10, 21, 1, 0, tzinfo=timezone.utc)  # 09:00 in ZONE
LIMITS = {"max_body_bytes": 20_000, "max_messages_per_request": 5, "max_query_chars": 300, "max_top_k": 20}


@dataclass
class Api:
    """The shared server: its URL, the scope behind it (to check the store), a keep-alive session."""

    url: str
    scope: MemoryScope
    path: Path
    session: requests.Session

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.session.request(method, self.url + path, timeout=60, **kwargs)

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("POST", path, **kwargs)

    def add(self, user: str, *texts: str, **fields: Any) -> list[dict[str, Any]]:
        """POST /memories; the records added."""
        params = {name: fields.pop(name) for name in ("workspace", "target") if name in fields}
        response = self.post(f"/v1/users/{user}/memories", json={"texts": list(texts), **fields}, params=params)
        assert response.status_code == 201, response.text
        added: list[dict[str, Any]] = response.json()["added"]
        return added

    def listed(self, user: str, **params: Any) -> list[str]:
        """The texts GET /memories lists (404 for an unknown user: an empty list)."""
        response = self.get(f"/v1/users/{user}/memories", params=params)
        if response.status_code == 404:
            assert response.json()["error"]["code"] == "unknown_user"
            return []
        assert response.status_code == 200, response.text
        return [record["memory"] for record in response.json()["memories"]]


def clean_environment(patch: pytest.MonkeyPatch) -> None:
    for name in (*LLM_ENV, "MEMORYSCOPE_TIMEZONE"):
        patch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    path = tmp_path_factory.mktemp("rest") / "rest.db"
    with pytest.MonkeyPatch.context() as patch:
        clean_environment(patch)
        scope = MemoryScope("default", overrides={"memory_store.path": str(path), "global.timezone": ZONE})
    settings = scope.config.server.model_copy(update=LIMITS)
    with LiveServer(create_app(scope, settings=settings)) as live, requests.Session() as session:
        yield Api(live.url, scope, path, session)


@pytest.fixture
def user() -> str:
    """A user no other test touches (the server is shared)."""
    return f"u-{uuid.uuid4().hex[:10]}"


def assert_error(response: requests.Response, status: int, code: str) -> str:
    """The response is the API's JSON error with this status and code; returns its message."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert list(body) == ["error"] and set(body["error"]) == {"code", "message", "type"}
    assert body["error"]["code"] == code
    assert body["error"]["message"] and body["error"]["type"]
    message: str = body["error"]["message"]
    return message


def instant(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    assert moment.tzinfo is not None
    return moment


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- messages ------------------------------------------------------------------------------------


def test_messages_are_stored_with_roles_times_metadata_and_time_stamped_text(api: Api, user: str) -> None:
    """Naive times are read in the config's zone (+08:00); a message sent again is not stored twice."""
    said = [
        {"role": "user", "content": "I moved to Hangzhou last week", "time": "2024-10-21T09:00:00"},
        {"role": "assistant", "content": "How do you like it?", "time": "2024-10-21T09:00:05+08:00"},
    ]
    response = api.post(f"/v1/users/{user}/messages", json={"messages": said, "metadata": {"channel": "web"}})
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["count"] == 2
    assert [(r["memory"], r["role"], r["memory_type"], r["metadata"], r["user_id"]) for r in body["stored"]] == [
        ("I moved to Hangzhou last week", "user", "conversation", {"channel": "web"}, user),
        ("How do you like it?", "assistant", "conversation", {"channel": "web"}, user),
    ]
    assert [instant(r["message_time"]) for r in body["stored"]] == [NINE_AM, NINE_AM + timedelta(seconds=5)]
    assert body["stored"][0]["text"] == "[2024-10-21 09:00:00 Mon] I moved to Hangzhou last week"

    again = api.post(f"/v1/users/{user}/messages", json={"messages": said[:1]})
    assert again.status_code == 201 and again.json() == {"stored": [], "count": 0}
    assert sorted(api.listed(user)) == ["How do you like it?", "I moved to Hangzhou last week"]


def test_a_message_without_time_is_said_now_and_role_defaults_to_user(api: Api, user: str) -> None:
    response = api.post(f"/v1/users/{user}/messages", json={"messages": [{"content": "I keep bees"}]})
    (record,) = response.json()["stored"]
    said_at = instant(record["message_time"])
    assert record["role"] == "user" and abs(datetime.now(timezone.utc) - said_at) < timedelta(minutes=5)
    assert record["text"].startswith(f"[{said_at.astimezone(ZoneInfo(ZONE)):%Y-%m-%d %H:%M}")  # shown in the config's zone


# -- search --------------------------------------------------------------------------------------


@pytest.fixture
def market(api: Api, user: str) -> dict[str, str]:
    """Three memories of `user` said on three days, with metadata, and one conversation message."""
    kai, lu, bees = (
        api.add(user, text, time=time, metadata=meta)[0]["id"]
        for text, time, meta in [
            ("went to the market with Kai", "2024-10-20T10:00:00", {"source": "crm", "rating": 5}),
            ("went to the market with Lu", "2024-10-21T10:00:00", {"source": "app", "rating": 2}),
            ("keeps bees in the garden", "2024-10-01T10:00:00", {"source": "crm", "rating": 3}),
        ]
    )
    said = {"messages": [{"content": "I bought apples at the market", "time": "2024-10-21T11:00:00"}]}
    assert api.post(f"/v1/users/{user}/messages", json=said).status_code == 201
    return {"kai": kai, "lu": lu, "bees": bees}


def search(api: Api, user: str, **body: Any) -> list[dict[str, Any]]:
    response = api.post(f"/v1/users/{user}/search", json=body)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["memories"]
    return found


def test_search_returns_the_best_top_k_with_scores_and_time_stamped_text(api: Api, user: str, market: dict[str, str]) -> None:
    found = search(api, user, query="who did I go to the market with?")
    assert len(found) == 4
    scores = [record["score"] for record in found]
    assert scores == sorted(scores, reverse=True) and all(isinstance(score, float) for score in scores)
    (best,) = search(api, user, query="bees in the garden", top_k=1)
    assert best["id"] == market["bees"]
    assert best["text"] == "[2024-10-01 10:00:00 Tue] keeps bees in the garden"


def test_search_narrows_by_type_and_metadata(api: Api, user: str, market: dict[str, str]) -> None:
    query = "market"
    assert [r["memory"] for r in search(api, user, query=query, types=["conversation"])] == ["I bought apples at the market"]
    assert {r["id"] for r in search(api, user, query=query, types=["obs_customized"])} == set(market.values())
    assert {r["id"] for r in search(api, user, query=query, filters={"source": "crm"})} == {market["kai"], market["bees"]}
    assert {r["id"] for r in search(api, user, query=query, filters={"rating": {"gte": 3}})} == {market["kai"], market["bees"]}
    assert search(api, user, query=query, types=["insight"]) == []


def test_search_since_and_until_read_naive_times_in_the_config_zone(api: Api, user: str, market: dict[str, str]) -> None:
    """Kai's memory was said at 10:00 +08:00 (02:00 UTC): read as UTC, `since 08:30` would exclude it."""
    found = search(api, user, query="market", since="2024-10-20T08:30:00", until="2024-10-20T23:00:00")
    assert [r["id"] for r in found] == [market["kai"]]
    assert {r["id"] for r in search(api, user, query="market", until="2024-10-20T00:00:00")} == {market["bees"]}
    aware = search(api, user, query="market", since="2024-10-21T02:00:00+00:00", types=["obs_customized"])
    assert [r["id"] for r in aware] == [market["lu"]]


def test_query_time_says_when_yesterday_was_in_the_config_zone(api: Api, user: str, market: dict[str, str]) -> None:
    """At 20:00 on the 21st (+08:00) yesterday is the 20th: Kai's day. Read as UTC it would be
    04:00 on the 22nd here, and yesterday Lu's day."""
    query = "who did I go to the market with yesterday?"
    on_21st = search(api, user, query=query, query_time="2024-10-21T20:00:00", types=["obs_customized"])
    on_22nd = search(api, user, query=query, query_time="2024-10-22T12:00:00", types=["obs_customized"])
    assert on_21st[0]["id"] == market["kai"]
    assert on_22nd[0]["id"] == market["lu"]


# -- a user's memories ---------------------------------------------------------------------------


def test_add_memories_stores_each_text_as_given(api: Api, user: str) -> None:
    response = api.post(
        f"/v1/users/{user}/memories",
        json={"texts": ["prefers green tea", "keeps bees"], "metadata": {"source": "crm"}, "time": "2024-10-21T09:00:00"},
    )
    assert response.status_code == 201
    body = response.json()
    assert body["count"] == 2
    assert [(r["memory"], r["memory_type"], r["metadata"], instant(r["time"])) for r in body["added"]] == [
        ("prefers green tea", "obs_customized", {"source": "crm"}, NINE_AM),
        ("keeps bees", "obs_customized", {"source": "crm"}, NINE_AM),
    ]
    assert body["added"][0]["text"] == "[2024-10-21 09:00:00 Mon] prefers green tea"
    assert sorted(api.listed(user)) == ["keeps bees", "prefers green tea"]


def test_list_filters_by_type_limits_and_shows_expired_only_when_asked(api: Api, user: str) -> None:
    _, second, _ = api.add(user, "likes tea", "likes coffee", "likes cocoa")
    api.post(f"/v1/users/{user}/messages", json={"messages": [{"content": "hello there"}]})
    assert api.scope.store is not None
    api.scope.store.update(second["id"], status=MemoryStatus.EXPIRED)

    assert sorted(api.listed(user)) == ["hello there", "likes cocoa", "likes tea"]
    assert sorted(api.listed(user, type="obs_customized")) == ["likes cocoa", "likes tea"]
    assert api.listed(user, type="conversation") == ["hello there"]
    assert sorted(api.listed(user, type=["conversation", "obs_customized"])) == ["hello there", "likes cocoa", "likes tea"]
    assert len(api.listed(user, limit=2)) == 2
    assert api.listed(user, limit=0) == []
    response = api.get(f"/v1/users/{user}/memories", params={"include_expired": "true", "type": "obs_customized"})
    statuses = {r["memory"]: r["status"] for r in response.json()["memories"]}
    assert statuses == {"likes tea": "valid", "likes coffee": "expired", "likes cocoa": "valid"}
    assert_error(api.get(f"/v1/users/{user}/memories", params={"type": "memo"}), 422, "invalid_request")


def test_list_filters_on_metadata_given_as_json(api: Api, user: str) -> None:
    api.add(user, "likes tea", metadata={"source": "crm", "rating": 2})
    api.add(user, "likes coffee", metadata={"source": "crm", "rating": 5})
    api.add(user, "likes cocoa", metadata={"source": "chat"})
    assert sorted(api.listed(user, filters=json.dumps({"source": "crm"}))) == ["likes coffee", "likes tea"]
    assert api.listed(user, filters=json.dumps({"rating": {"gte": 3}})) == ["likes coffee"]
    assert_error(api.get(f"/v1/users/{user}/memories", params={"filters": "{not json"}), 422, "invalid_filter")
    assert_error(api.get(f"/v1/users/{user}/memories", params={"filters": "[1]"}), 422, "invalid_filter")
    assert_error(api.get(f"/v1/users/{user}/memories", params={"filters": '{"rating": {"bogus": 1}}'}), 422, "invalid_filter")


def test_a_deleted_memory_keeps_its_history_for_its_owner_only(api: Api, user: str) -> None:
    memory = api.add(user, "likes jazz")[0]
    assert api.request("DELETE", f"/v1/memories/{memory['id']}").status_code == 200
    response = api.get(f"/v1/memories/{memory['id']}/history")
    assert response.status_code == 200, response.text
    assert [change["action"] for change in response.json()["changes"]] == ["created", "deleted"]
    assert_error(api.get("/v1/memories/no-such-id/history"), 404, "unknown_memory")


def test_delete_all_deletes_every_memory_of_the_user_only(api: Api, user: str) -> None:
    api.add(user, "likes tea", "likes coffee")
    other = f"{user}-other"
    api.add(other, "likes cocoa")
    response = api.request("DELETE", f"/v1/users/{user}/memories")
    assert response.status_code == 200 and response.json()["deleted"] == 2 and response.json()["run_id"]
    assert api.listed(user) == []
    assert api.listed(other) == ["likes cocoa"]
    assert_error(api.request("DELETE", f"/v1/users/{user}/memories"), 404, "unknown_user")


# -- one memory ----------------------------------------------------------------------------------


def test_get_patch_delete_one_memory_and_its_history(api: Api, user: str) -> None:
    (added,) = api.add(user, "keeps bees", metadata={"source": "crm", "hives": 1})
    memory = f"/v1/memories/{added['id']}"
    got = api.get(memory)
    assert got.status_code == 200
    assert (got.json()["memory"], got.json()["metadata"], got.json()["user_id"]) == (
        "keeps bees",
        {"source": "crm", "hives": 1},
        user,
    )
    assert instant(got.json()["message_time"]) == instant(added["message_time"])

    patched = api.request("PATCH", memory, json={"text": "keeps three hives of bees", "metadata": {"hives": 3, "source": None}})
    assert patched.status_code == 200, patched.text
    assert (patched.json()["memory"], patched.json()["metadata"]) == ("keeps three hives of bees", {"hives": 3})
    assert api.get(memory).json()["memory"] == "keeps three hives of bees"
    metadata_only = api.request("PATCH", memory, json={"metadata": {"source": "app"}}).json()
    assert (metadata_only["memory"], metadata_only["metadata"]) == ("keeps three hives of bees", {"hives": 3, "source": "app"})

    changes = api.get(f"{memory}/history").json()["changes"]
    assert [change["action"] for change in changes] == ["created", "updated", "updated"]
    assert changes[1]["before"]["content"] == "keeps bees" and changes[1]["after"]["content"] == "keeps three hives of bees"
    assert all(change["memory_id"] == added["id"] for change in changes)

    deleted = api.request("DELETE", memory)
    run_id = deleted.json()["run_id"]
    assert deleted.status_code == 200 and deleted.json() == {"deleted": True, "id": added["id"], "run_id": run_id}
    assert api.get(f"{memory}/history").json()["changes"][-1]["run_id"] == deleted.json()["run_id"]
    assert_error(api.get(memory), 404, "unknown_memory")
    assert api.listed(user) == []


def test_patch_refuses_an_empty_change(api: Api, user: str) -> None:
    (added,) = api.add(user, "keeps bees")
    assert "text= or metadata=" in assert_error(
        api.request("PATCH", f"/v1/memories/{added['id']}", json={}), 422, "invalid_request"
    )
    assert_error(api.request("PATCH", f"/v1/memories/{added['id']}", json={"text": " "}), 422, "invalid_request")
    assert api.get(f"/v1/memories/{added['id']}").json()["memory"] == "keeps bees"


# -- operations ----------------------------------------------------------------------------------


def test_operations_lists_the_service_operations(api: Api) -> None:
    body = api.get("/v1/operations").json()
    assert body["service"] == "memoryscope_service"
    named = {operation["name"]: operation for operation in body["operations"]}
    assert {"list_memory", "retrieve_memory", "add_memory", "delete_memory", "consolidate_memory"} <= set(named)
    assert named["consolidate_memory"]["backend"] is True and named["list_memory"]["backend"] is False
    assert named["retrieve_memory"]["description"] == "the memories that best answer a query"


def run(api: Api, user: str, name: str, body: dict[str, Any] | None = None, **params: str) -> dict[str, Any]:
    response = api.post(f"/v1/users/{user}/operations/{name}", json=body, params=params)
    assert response.status_code == 200, response.text
    summary: dict[str, Any] = response.json()
    assert summary["operation"] == name and summary["run_id"]
    return summary


def test_add_list_retrieve_and_delete_by_operation(api: Api, user: str) -> None:
    added = run(api, user, "add_memory", {"new_memories": ["plays the cello", "grows tomatoes"]})
    assert added["result"] == "added 2 memories"
    assert [worker for worker, _ in added["timings"]] == ["add_memory"] and added["total_seconds"] >= 0
    cello, tomatoes = added["added_memory_ids"]
    assert api.get(f"/v1/memories/{tomatoes}").json()["memory"] == "grows tomatoes"
    assert api.get(f"/v1/memories/{cello}").json()["memory"] == "plays the cello"

    listed = run(api, user, "list_memory")  # no body at all
    assert {memory["content"] for memory in listed["memories"]} == {"plays the cello", "grows tomatoes"}
    assert f"plays the cello (id: {cello})" in listed["result"]

    retrieved = run(api, user, "retrieve_memory", {"query": "what instrument does the user play?"})
    assert retrieved["memories"][0]["content"] == "plays the cello"
    assert [worker for worker, _ in retrieved["timings"]][:1] == ["set_query"]
    assert "fuse_rerank" in [worker for worker, _ in retrieved["timings"]]

    deleted = run(api, user, "delete_memory", {"memory_ids": [cello, "no-such-id"]})
    assert deleted["deleted_memory_ids"] == [cello] and deleted["unknown_memory_ids"] == ["no-such-id"]
    assert deleted["result"] == "deleted 1 memory; no memory of yours has the id no-such-id"
    assert api.listed(user) == ["grows tomatoes"]
    assert_error(api.get(f"/v1/memories/{cello}"), 404, "unknown_memory")


def test_consolidate_memory_learns_facts_through_the_fake_llm(make_scope: Any, serve: Any, fake_openai: FakeOpenAIServer) -> None:
    script = ConsolidationScript(user="lin")
    script.say("I play the guitar every evening", score=3, facts=[("lin plays the guitar", "guitar")])
    script.install(fake_openai)
    live = serve(make_scope())
    said = {"messages": [{"content": "I play the guitar every evening"}, {"content": "ok", "role": "assistant"}]}
    assert requests.post(f"{live.url}/v1/users/lin/messages", json=said, timeout=60).status_code == 201

    response = requests.post(f"{live.url}/v1/users/lin/operations/consolidate_memory", timeout=60)
    assert response.status_code == 200, response.text
    summary = response.json()
    assert [memory["content"] for memory in summary["memories"]] == ["lin plays the guitar"]
    assert summary["memories"][0]["memory_type"] == "observation"
    workers = [worker for worker, _ in summary["timings"]]
    assert workers[0] == "info_filter" and workers[-1] == "store_memory" and "contra_repeat" in workers
    assert summary["result"] and not summary["stopped"]
    assert script.calls["info_filter"] == 1
    listed = requests.get(f"{live.url}/v1/users/lin/memories", params={"type": "observation"}, timeout=60).json()
    assert [record["memory"] for record in listed["memories"]] == ["lin plays the guitar"]


# -- profile, status, export ---------------------------------------------------------------------


def test_profile_lists_insights_only(api: Api, user: str) -> None:
    api.add(user, "plays the cello")
    assert api.scope.store is not None
    api.scope.store.upsert([MemoryNode(user_name=user, content="a devoted musician", memory_type=MemoryType.INSIGHT)])
    body = api.get(f"/v1/users/{user}/profile").json()
    assert body["user"] == user
    assert [(r["memory"], r["memory_type"]) for r in body["insights"]] == [("a devoted musician", "insight")]


def test_status_counts_the_user_pending_messages(api: Api, user: str) -> None:
    said = {"messages": [{"content": "I moved to Hangzhou"}, {"content": "I work at a bakery"}]}
    api.post(f"/v1/users/{user}/messages", json=said)
    body = api.get(f"/v1/users/{user}/status").json()
    assert body["user"] == user
    assert set(body["scheduler"]) == {"enabled", "started", "closed"} and body["scheduler"]["closed"] is False
    assert body["running"] == [] and body["last_errors"] == {}
    assert body["pending_messages"]["ready"] == 2
    assert_error(api.get(f"/v1/users/{user}-nobody/status"), 404, "unknown_user")


def test_export_streams_json_lines_that_import_reads_back(
    api: Api, user: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    added = api.add(user, "plays the cello", "grows tomatoes", metadata={"source": "crm"})
    api.add(user, "in another workspace", workspace="work")
    assert api.scope.store is not None
    api.scope.store.update(added[1]["id"], status=MemoryStatus.EXPIRED)  # an export keeps every status

    response = api.get(f"/v1/users/{user}/export", stream=True)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    assert response.headers["content-disposition"] == f'attachment; filename="memories-{user}.jsonl"'
    text = b"".join(response.iter_content(chunk_size=None)).decode("utf-8")
    lines = [json.loads(line) for line in text.splitlines()]
    header, *rest, end = lines
    memories = [line for line in rest if "change" not in line]
    changes = [line["change"] for line in rest if "change" in line]
    assert (header["format"], header["user_name"], header["workspace"], header["vectors"]) == (
        "memoryscope.memories", user, "", False
    )  # fmt: skip
    assert {memory["content"]: memory["status"] for memory in memories} == {
        "plays the cello": "valid",
        "grows tomatoes": "expired",
    }
    # the history comes along (the other workspace's stays out): two adds and one expiry
    assert end == {"format": "memoryscope.memories", "end": True, "count": 2, "changes": 3, "states": 0}
    assert [change["action"] for change in changes] == ["created", "created", "expired"]

    clean_environment(monkeypatch)
    with MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "fresh.db")}) as fresh:
        assert fresh.store is not None
        assert import_memories(fresh.store, io.StringIO(text)) == 2
        back = fresh.get_all(user, include_expired=True)
    assert {(r.id, r.memory, r.status, tuple(r.metadata.items())) for r in back} == {
        (added[0]["id"], "plays the cello", "valid", (("source", "crm"),)),
        (added[1]["id"], "grows tomatoes", "expired", (("source", "crm"),)),
    }


def test_workspace_and_target_keep_memories_apart(api: Api, user: str) -> None:
    api.add(user, "own fact about tea")
    api.add(user, "work fact about tea", workspace="work")
    api.add(user, "fact about Kai and tea", target="kai")
    assert api.listed(user) == ["own fact about tea"]
    assert api.listed(user, workspace="work") == ["work fact about tea"]
    assert api.listed(user, target="kai") == ["fact about Kai and tea"]
    found = api.post(f"/v1/users/{user}/search", json={"query": "tea"}, params={"workspace": "work"}).json()
    assert [r["memory"] for r in found["memories"]] == ["work fact about tea"]
    listed = run(api, user, "list_memory", target="kai")
    assert [memory["content"] for memory in listed["memories"]] == ["fact about Kai and tea"]
    assert_error(api.get(f"/v1/users/{user}/memories", params={"workspace": "home"}), 404, "unknown_user")

    deleted = api.request("DELETE", f"/v1/users/{user}/memories", params={"workspace": "work"})
    assert deleted.json()["deleted"] == 1
    assert api.listed(user) == ["own fact about tea"] and api.listed(user, target="kai") == ["fact about Kai and tea"]


# -- health, docs --------------------------------------------------------------------------------


def test_healthz_and_readyz(api: Api) -> None:
    assert api.get("/healthz").json() == {"status": "ok"}
    ready = api.get("/readyz")
    assert ready.status_code == 200
    body = ready.json()
    assert body["ready"] is True and body["checks"]["store"]["ok"] is True
    assert all(check["ok"] for check in body["checks"].values())


def test_readyz_names_an_unreachable_model_host(make_scope: Any, serve: Any) -> None:
    port = closed_port()
    scope = make_scope(llm=False, **{"model.generation_model.api_base": f"http://127.0.0.1:{port}/v1"})
    live = serve(scope)
    response = requests.get(f"{live.url}/readyz", timeout=30)
    assert response.status_code == 503
    body = response.json()
    assert body["ready"] is False
    assert body["checks"]["model.generation_model"]["ok"] is False
    assert "refused" in body["checks"]["model.generation_model"]["error"].lower()
    assert body["checks"]["store"]["ok"] is True
    assert requests.get(f"{live.url}/healthz", timeout=30).status_code == 200  # alive, not ready


def test_docs_and_openapi(api: Api) -> None:
    spec = api.get("/openapi.json").json()
    assert spec["info"]["title"] == "MemoryScope"
    assert {
        "/v1/users/{user}/messages", "/v1/users/{user}/search", "/v1/users/{user}/memories", "/v1/memories/{memory_id}",
        "/v1/memories/{memory_id}/history", "/v1/operations", "/v1/users/{user}/operations/{name}",
        "/v1/users/{user}/profile", "/v1/users/{user}/status", "/v1/users/{user}/export", "/healthz", "/readyz",
    } <= set(spec["paths"])  # fmt: skip
    assert set(spec["paths"]["/v1/memories/{memory_id}"]) == {"get", "patch", "delete"}
    docs = api.get("/docs")
    assert docs.status_code == 200 and docs.headers["content-type"].startswith("text/html")
    assert "/openapi.json" in docs.text and "swagger" in docs.text.lower()


# -- errors --------------------------------------------------------------------------------------


def test_malformed_json_is_invalid_json(api: Api, user: str) -> None:
    response = api.post(f"/v1/users/{user}/messages", data='{"messages": [', headers={"content-type": "application/json"})
    assert "not valid JSON" in assert_error(response, 422, "invalid_json")
    assert api.listed(user) == []


@pytest.mark.parametrize(
    "body",
    [b'{"texts": ["\xff\xfe"]}', b'{"texts": ["x"], "metadata": {"deep": ' + b"[" * 5000 + b"]" * 5000 + b"}}"],
    ids=["not-utf8", "nested-too-deep"],
)
def test_a_body_that_cannot_be_decoded_is_invalid_json(api: Api, user: str, body: bytes) -> None:
    """FastAPI answers these with its own 400; the API's answer is its stable 422 `invalid_json`."""
    response = api.post(f"/v1/users/{user}/memories", data=body, headers={"content-type": "application/json"})
    assert "UTF-8 JSON" in assert_error(response, 422, "invalid_json")
    assert api.listed(user) == []


def test_a_bad_metadata_filter_is_the_caller_422_not_a_store_503(api: Api, user: str) -> None:
    api.add(user, "likes tea", metadata={"rating": 3})
    bad = api.post(f"/v1/users/{user}/search", json={"query": "tea", "filters": {"rating": {"bogus": 1}}})
    assert "unknown operator 'bogus'" in assert_error(bad, 422, "invalid_filter")
    assert_error(api.post(f"/v1/users/{user}/search", json={"query": "tea", "filters": {"rating": {}}}), 422, "invalid_filter")


@pytest.mark.parametrize(
    ("path", "body", "named"),
    [
        ("messages", {"messages": "hello"}, "messages"),
        ("messages", {"messages": []}, "messages"),
        ("messages", {"messages": [{"content": "hi", "role": "system"}]}, "messages.0.role"),
        ("messages", {"messages": [{"content": 5}]}, "messages.0.content"),
        ("search", {"query": "tea", "top_k": "many"}, "top_k"),
        ("search", {"query": "tea", "top_k": 0}, "top_k"),
        ("search", {"query": "tea", "types": ["memo"]}, "types.0"),
        ("search", {"top_k": 3}, "query"),
        ("memories", {"texts": "tea"}, "texts"),
    ],
)
def test_wrong_types_are_refused_naming_the_field(api: Api, user: str, path: str, body: dict[str, Any], named: str) -> None:
    api.add(user, "likes tea")
    message = assert_error(api.post(f"/v1/users/{user}/{path}", json=body), 422, "invalid_request")
    assert message.startswith(f"{named}: ")
    assert api.listed(user) == ["likes tea"]


@pytest.mark.parametrize(
    ("path", "body", "named"),
    [
        ("messages", {"messages": [{"content": "hi"}], "colour": "red"}, "colour"),
        ("messages", {"messages": [{"content": "hi", "mood": "happy"}]}, "messages.0.mood"),
        ("search", {"query": "tea", "k": 3}, "k"),
        ("memories", {"texts": ["tea"], "memory_type": "insight"}, "memory_type"),
        ("operations/list_memory", {"querry": "tea"}, "querry"),
    ],
)
def test_unknown_fields_are_refused(api: Api, user: str, path: str, body: dict[str, Any], named: str) -> None:
    api.add(user, "likes tea")
    message = assert_error(api.post(f"/v1/users/{user}/{path}", json=body), 422, "invalid_request")
    assert message.startswith(f"{named}: unknown field")
    assert api.listed(user) == ["likes tea"]


def test_a_body_that_is_not_an_object_is_refused(api: Api, user: str) -> None:
    message = assert_error(api.post(f"/v1/users/{user}/messages", json=["hi"]), 422, "invalid_request")
    assert "JSON object" in message


def test_a_body_over_the_limit_is_refused_by_its_length(api: Api, user: str) -> None:
    body = json.dumps({"texts": ["x" * LIMITS["max_body_bytes"]]})
    response = api.post(f"/v1/users/{user}/memories", data=body, headers={"content-type": "application/json"})
    assert "20000 bytes" in assert_error(response, 413, "body_too_large")
    assert api.listed(user) == []


def test_a_chunked_body_over_the_limit_is_refused_as_it_streams(api: Api, user: str) -> None:
    """No Content-Length: the body is counted as it arrives."""

    def chunks() -> Iterator[bytes]:
        yield b'{"texts": ['
        for _ in range(30):
            yield b'"' + b"y" * 1000 + b'", '
        yield b'"z"]}'

    response = api.post(f"/v1/users/{user}/memories", data=chunks(), headers={"content-type": "application/json"})
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert_error(response, 413, "body_too_large")
    assert api.listed(user) == []
    small = api.post(
        f"/v1/users/{user}/memories", data=iter([b'{"texts": ', b'["fits"]}']), headers={"content-type": "application/json"}
    )
    assert small.status_code == 201 and api.listed(user) == ["fits"]


def test_too_many_messages_or_texts(api: Api, user: str) -> None:
    six = [{"content": f"message {n}"} for n in range(6)]
    assert "at most 5" in assert_error(api.post(f"/v1/users/{user}/messages", json={"messages": six}), 413, "too_many_messages")
    texts = [f"text {n}" for n in range(6)]
    assert_error(api.post(f"/v1/users/{user}/memories", json={"texts": texts}), 413, "too_many_messages")
    assert_error(api.post(f"/v1/users/{user}/operations/add_memory", json={"new_memories": texts}), 413, "too_many_messages")
    assert api.listed(user) == []


def test_a_query_or_text_over_the_limit_is_refused(api: Api, user: str) -> None:
    api.add(user, "likes tea")
    long = "tea " * 100
    message = assert_error(api.post(f"/v1/users/{user}/search", json={"query": long}), 422, "query_too_long")
    assert "at most 300" in message
    retrieve = api.post(f"/v1/users/{user}/operations/retrieve_memory", json={"query": long})
    assert_error(retrieve, 422, "query_too_long")
    assert_error(api.post(f"/v1/users/{user}/messages", json={"messages": [{"content": long}]}), 422, "query_too_long")
    assert_error(api.post(f"/v1/users/{user}/memories", json={"texts": [long]}), 422, "query_too_long")
    assert_error(api.post(f"/v1/users/{user}/operations/add_memory", json={"new_memories": [long]}), 422, "query_too_long")
    assert api.listed(user) == ["likes tea"]


def test_top_k_over_the_maximum(api: Api, user: str) -> None:
    api.add(user, "likes tea")
    message = assert_error(api.post(f"/v1/users/{user}/search", json={"query": "tea", "top_k": 21}), 422, "top_k_too_large")
    assert "over 20" in message
    assert len(search(api, user, query="tea", top_k=20)) == 1


def test_unknown_operation_lists_the_known_ones(api: Api, user: str) -> None:
    message = assert_error(api.post(f"/v1/users/{user}/operations/consolidate"), 404, "unknown_operation")
    assert "consolidate_memory" in message and "list_memory" in message


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "search", {"query": "tea"}),
        ("GET", "memories", None),
        ("DELETE", "memories", None),
        ("GET", "profile", None),
        ("GET", "export", None),
    ],
)
def test_unknown_user(api: Api, user: str, method: str, path: str, body: dict[str, Any] | None) -> None:
    message = assert_error(api.request(method, f"/v1/users/{user}/{path}", json=body), 404, "unknown_user")
    assert repr(user) in message


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [("GET", "", None), ("PATCH", "", {"text": "x"}), ("DELETE", "", None), ("GET", "/history", None)],
)
def test_unknown_memory(api: Api, method: str, suffix: str, body: dict[str, Any] | None) -> None:
    message = assert_error(api.request(method, f"/v1/memories/no-such-id{suffix}", json=body), 404, "unknown_memory")
    assert "'no-such-id'" in message


def test_unknown_endpoint_and_method(api: Api) -> None:
    assert "/docs" in assert_error(api.get("/v1/nothing/here"), 404, "unknown_endpoint")
    assert_error(api.request("DELETE", "/v1/operations"), 405, "method_not_allowed")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("messages", {"messages": [{"content": "hi", "time": "next tuesday"}]}),
        ("memories", {"texts": ["tea"], "time": "2024-13-45T10:00:00"}),
        ("search", {"query": "tea", "since": "yesterday"}),
        ("search", {"query": "tea", "query_time": "noon"}),
        ("operations/retrieve_memory", {"query": "tea", "query_time": "noon"}),
    ],
)
def test_an_invalid_time_is_refused(api: Api, user: str, path: str, body: dict[str, Any]) -> None:
    api.add(user, "likes tea")
    assert_error(api.post(f"/v1/users/{user}/{path}", json=body), 422, "invalid_request")
    assert api.listed(user) == ["likes tea"]


def test_reserved_metadata_keys_are_refused(api: Api, user: str) -> None:
    (added,) = api.add(user, "likes tea", metadata={"source": "crm"})
    said = {"messages": [{"content": "hi"}], "metadata": {"role": "admin"}}
    assert "'role'" in assert_error(api.post(f"/v1/users/{user}/messages", json=said), 422, "invalid_request")
    texts = {"texts": ["likes coffee"], "metadata": {"speaker": "x"}}
    assert "'speaker'" in assert_error(api.post(f"/v1/users/{user}/memories", json=texts), 422, "invalid_request")
    patch = api.request("PATCH", f"/v1/memories/{added['id']}", json={"metadata": {"context": "x"}})
    assert "'context'" in assert_error(patch, 422, "invalid_request")
    assert api.listed(user) == ["likes tea"]
    assert api.get(f"/v1/memories/{added['id']}").json()["metadata"] == {"source": "crm"}


def test_a_store_failure_mid_request_is_a_json_503_and_writes_nothing(api: Api, user: str) -> None:
    """The store refuses the third message of a batch (an SQLite trigger): nothing of it is kept."""
    poison = f"poison {user}"
    with sqlite3.connect(api.path) as connection:
        connection.execute(
            f"CREATE TRIGGER IF NOT EXISTS refuse_{user.replace('-', '_')} BEFORE INSERT ON memories "
            f"WHEN new.content = '{poison}' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
        )
    connection.close()
    said = {"messages": [{"content": "first fine message"}, {"content": "second fine message"}, {"content": poison}]}
    message = assert_error(api.post(f"/v1/users/{user}/messages", json=said), 503, "store_error")
    assert "refused by the test" in message
    assert_error(api.post(f"/v1/users/{user}/memories", json={"texts": ["fine text", poison]}), 503, "store_error")
    assert_error(api.post(f"/v1/users/{user}/operations/add_memory", json={"new_memories": ["fine", poison]}), 503, "store_error")
    assert api.listed(user) == []
    assert api.scope.store is not None and api.scope.get_all(user, include_expired=True) == []


def test_a_closed_store_is_a_json_503(make_scope: Any, serve: Any) -> None:
    scope = make_scope(llm=False)
    live = serve(scope)
    assert requests.post(f"{live.url}/v1/users/ann/memories", json={"texts": ["likes tea"]}, timeout=30).status_code == 201
    assert scope.store is not None
    scope.store.close()
    for response in (
        requests.post(f"{live.url}/v1/users/ann/memories", json={"texts": ["likes coffee"]}, timeout=30),
        requests.get(f"{live.url}/v1/users/ann/memories", timeout=30),
        requests.post(f"{live.url}/v1/users/ann/search", json={"query": "tea"}, timeout=30),
    ):
        assert "closed" in assert_error(response, 503, "store_error")
    ready = requests.get(f"{live.url}/readyz", timeout=30)
    assert ready.status_code == 503 and ready.json()["checks"]["store"]["ok"] is False


def test_out_of_range_times_and_reversed_windows_are_refused(api: Api, user: str) -> None:
    year_one = {"messages": [{"content": "an old story", "time": "0001-01-01T00:00:00"}]}
    message = assert_error(api.post(f"/v1/users/{user}/messages", json=year_one), 422, "invalid_request")
    assert "year 1 is out of range" in message
    assert api.listed(user) == []  # nothing half-written
    api.add(user, "likes tea")
    reversed_window = {"query": "tea", "since": "2024-10-02T00:00:00", "until": "2024-10-01T00:00:00"}
    assert_error(api.post(f"/v1/users/{user}/search", json=reversed_window), 422, "invalid_time_range")


def test_a_memory_added_shows_the_same_times_as_when_it_is_read_back(api: Api, user: str) -> None:
    added = api.add(user, "likes oolong", time="2024-10-21T09:00:00")[0]
    read = api.get(f"/v1/memories/{added['id']}").json()
    assert {name: added[name] for name in ("time", "created_at", "message_time")} == {
        name: read[name] for name in ("time", "created_at", "message_time")
    }


def test_memory_types_come_from_the_registry_in_listing_order(api: Api) -> None:
    """What the playground groups the memory viewer by; the agent records of an older version are not listed."""
    response = api.get("/v1/memory-types")
    assert response.status_code == 200
    types = {item["name"]: item for item in response.json()["memory_types"]}
    ours = [name for name in types if types[name]["owner"] == "memoryscope" and types[name]["listed"]]
    assert ours == ["insight", "obs_customized", "observation", "conversation"]
    assert types["insight"]["labels"] == {"en": "insight memory", "zh": "洞察记忆"} and types["insight"]["listed"]
    assert types["core_memory"]["listed"] is False and types["insight"]["owner"] == "memoryscope"


def _raw_json(api: Api, method: str, path: str, text: str) -> requests.Response:
    """A body sent as written (NaN, a lone surrogate's escape: what `json=` would not produce)."""
    return api.request(method, path, data=text.encode(), headers={"Content-Type": "application/json"})


def test_nothing_is_stored_that_could_not_be_read_back(api: Api, user: str) -> None:
    """Each refused with a 422 naming the field; the user's memories and reads stay whole."""
    api.add(user, "likes tea")
    memories = f"/v1/users/{user}/memories"
    for metadata, code in (
        ('{"score": NaN}', "not_finite"),
        ('{"score": Infinity}', "not_finite"),
        ('{"deep": ' + "[" * 500 + "]" * 500 + "}", "metadata_too_deep"),
        ('{"note": "\\ud800"}', "invalid_unicode"),
    ):
        response = _raw_json(api, "POST", memories, '{"texts": ["planted"], "metadata": ' + metadata + "}")
        message = assert_error(response, 422, code)
        assert "metadata" in message, message
    said = _raw_json(api, "POST", f"/v1/users/{user}/messages", '{"messages": [{"content": "half \\udc00 a pair"}]}')
    # a declared text field is refused by the request's schema; the door refuses the rest alike
    assert said.status_code == 422 and "unicode" in said.json()["error"]["message"].lower()
    search = _raw_json(api, "POST", f"/v1/users/{user}/search", '{"query": "tea \\ud83d"}')
    assert search.status_code == 422 and "unicode" in search.json()["error"]["message"].lower()
    chat = _raw_json(api, "POST", "/v1/chat/completions", '{"model": "memoryscope", "user": "' + user + '", "messages": '
                     '[{"role": "user", "content": "\\ud800"}]}')  # fmt: skip
    assert chat.status_code == 422, chat.text
    assert api.listed(user) == ["likes tea"]
    found = api.post(f"/v1/users/{user}/search", json={"query": "tea"})
    assert found.status_code == 200 and [m["memory"] for m in found.json()["memories"]] == ["likes tea"]


def test_top_k_must_be_a_number_not_a_text(api: Api, user: str) -> None:
    api.add(user, "likes tea")
    response = api.post(f"/v1/users/{user}/search", json={"query": "tea", "top_k": "5"})
    assert "top_k" in assert_error(response, 422, "invalid_request")


def test_a_row_poisoned_before_these_checks_is_skipped_not_fatal(api: Api, user: str, caplog: pytest.LogCaptureFixture) -> None:
    """A meta holding NaN (written by an older version): that memory is left out with a warning;
    the user's other memories are still listed, searched and exported."""
    (poisoned,) = api.add(user, "keeps bees")
    api.add(user, "likes tea")
    with sqlite3.connect(api.path) as connection:
        connection.execute("UPDATE memories SET meta = ? WHERE memory_id = ?", ('{"score": NaN}', poisoned["id"]))
    with caplog.at_level("WARNING"):
        assert api.listed(user) == ["likes tea"]
    assert any(poisoned["id"] in record.getMessage() for record in caplog.records)
    assert api.post(f"/v1/users/{user}/search", json={"query": "bees"}).status_code == 200
    exported = api.get(f"/v1/users/{user}/export")
    assert exported.status_code == 200 and all(json.loads(line) for line in exported.text.splitlines())


def test_the_same_add_sent_again_with_its_key_stores_nothing_twice(api: Api, user: str) -> None:
    """A client that timed out sends the request again: with the same Idempotency-Key, the
    messages (no time given: each send is "now") and the texts are stored once."""
    said = {"messages": [{"content": "I keep bees"}, {"content": "and two goats"}]}
    for _ in range(3):
        response = api.post(f"/v1/users/{user}/messages", json=said, headers={"Idempotency-Key": "req-41"})
        assert response.status_code == 201, response.text
    texts = {"texts": ["likes tea"]}
    for _ in range(2):
        assert api.post(f"/v1/users/{user}/memories", json=texts, headers={"Idempotency-Key": "req-42"}).status_code == 201
    assert sorted(api.listed(user)) == ["I keep bees", "and two goats", "likes tea"]
    api.post(f"/v1/users/{user}/memories", json=texts, headers={"Idempotency-Key": "req-43"})  # another request: another memory
    assert api.listed(user).count("likes tea") == 2
    bad = api.post(f"/v1/users/{user}/memories", json=texts, headers={"Idempotency-Key": "bad\tkey"})
    assert_error(bad, 422, "invalid_idempotency_key")


def test_a_write_with_wait_false_is_accepted_at_once_and_done_in_the_background(api: Api, user: str) -> None:
    said = {"messages": [{"content": f"fact number {n}"} for n in range(5)]}
    response = api.post(f"/v1/users/{user}/messages", params={"wait": "false"}, json=said)
    assert response.status_code == 202, response.text
    accepted = response.json()
    key = accepted["idempotency_key"]
    assert accepted["status"] == "accepted" and response.headers["Idempotency-Key"] == key
    assert accepted["poll"] == f"/v1/users/{user}/writes/{key}"
    deadline = time.monotonic() + 60
    while api.get(accepted["poll"]).json()["status"] == "accepted" and time.monotonic() < deadline:
        time.sleep(0.1)
    outcome = api.get(accepted["poll"]).json()
    assert (outcome["status"], outcome["count"], outcome["idempotency_key"]) == ("done", 5, key)
    assert len(api.listed(user, limit=100)) == 5 and len(outcome["memory_ids"]) == 5
    assert_error(api.get(f"/v1/users/{user}/writes/never-sent"), 404, "unknown_write")
    # the outcome, by sending the same request with its key and waiting: nothing is stored twice
    again = api.post(f"/v1/users/{user}/messages", json=said, headers={"Idempotency-Key": key})
    assert again.status_code == 201 and len(api.listed(user, limit=100)) == 5
    # what the write would refuse is refused now, not accepted to fail unseen
    over = {"messages": [{"content": f"more {n}"} for n in range(6)]}
    assert_error(api.post(f"/v1/users/{user}/messages", params={"wait": "false"}, json=over), 413, "too_many_messages")
