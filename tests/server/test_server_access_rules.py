"""Who may do what on `memoryscope serve`, over real HTTP: API keys (401), scopes (403), a key
never reaching another user's memory by any route (404 by id, 403 by user), the admin endpoint,
the rate limit (429), CORS, keys kept out of answers and logs; and the `serve` command's guard."""

from __future__ import annotations

import hashlib
import io
import logging
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from memoryscope.app import MemoryScope
from memoryscope.cli import main
from memoryscope.server.access import ApiKey, KeyRing, hash_key
from memoryscope.server.app import create_app
from memoryscope.testing.live_server import LiveServer

pytestmark = pytest.mark.slow  # a real uvicorn; `-m "not slow"` leaves it out

# keys are random-looking: a key starting with a user name would hide that name in logs (scrubbing)
ALICE_KEY = "k1-4f8e2a9c6b1d7e0a"  # users: [alice], from an environment variable
ACME_KEY = "k2-7c3e9a1f5d2b8c4e"  # workspaces: [acme], given by its sha256
ADMIN_KEY = "k3-2d6b8f4a0e9c1b7d"  # admin, from an environment variable
LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL", "MEMORYSCOPE_STORE_PATH")

KEYS_FILE = f"""\
keys:
  - name: alice-app
    key_env: TEST_RULES_ALICE_KEY
    users: [alice]
  - name: acme
    sha256: "{hash_key(ACME_KEY)}"
    workspaces: [acme]
  - name: ops
    key_env: TEST_RULES_ADMIN_KEY
    admin: true
"""


@dataclass
class Api:
    url: str
    scope: MemoryScope
    session: requests.Session

    def request(self, method: str, path: str, key: str | None = None, **kwargs: Any) -> requests.Response:
        headers = dict(kwargs.pop("headers", None) or {})
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        return self.session.request(method, self.url + path, headers=headers, timeout=60, **kwargs)

    def add(self, user: str, text: str, workspace: str = "", key: str = ADMIN_KEY) -> str:
        """A memory of `user` (added with the admin key); its id."""
        response = self.request(
            "POST", f"/v1/users/{user}/memories", key, json={"texts": [text]}, params={"workspace": workspace}
        )
        assert response.status_code == 201, response.text
        memory_id: str = response.json()["added"][0]["id"]
        return memory_id

    def memory(self, memory_id: str) -> dict[str, Any]:
        """The memory as the admin sees it."""
        response = self.request("GET", f"/v1/memories/{memory_id}", ADMIN_KEY)
        assert response.status_code == 200, response.text
        found: dict[str, Any] = response.json()
        return found


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """One server for the module, its keys read from a keys file and the environment."""
    folder = tmp_path_factory.mktemp("rules")
    keys_file = folder / "keys.yaml"
    keys_file.write_text(KEYS_FILE, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        for name in LLM_ENV:
            patch.delenv(name, raising=False)
        patch.setenv("TEST_RULES_ALICE_KEY", ALICE_KEY)
        patch.setenv("TEST_RULES_ADMIN_KEY", ADMIN_KEY)
        keys = KeyRing.load(keys_file)
        scope = MemoryScope("default", overrides={"memory_store.path": str(folder / "rules.db")})
    with LiveServer(create_app(scope, keys=keys)) as live, requests.Session() as session:
        yield Api(live.url, scope, session)


@pytest.fixture
def workspace() -> str:
    """A workspace no other test uses (alice's key reaches her in every workspace)."""
    return f"ws-{uuid.uuid4().hex[:8]}"


def assert_error(response: requests.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert list(body) == ["error"] and set(body["error"]) == {"code", "message", "type"}
    assert body["error"]["code"] == code
    message: str = body["error"]["message"]
    return message


# -- keys ----------------------------------------------------------------------------------------

PROTECTED = [
    ("GET", "/v1/users/alice/memories", None),
    ("POST", "/v1/users/alice/search", {"query": "tea"}),
    ("POST", "/v1/users/alice/messages", {"messages": [{"content": "hi"}]}),
    ("GET", "/v1/memories/some-id", None),
    ("GET", "/v1/operations", None),
    ("POST", "/v1/users/alice/operations/list_memory", None),
    ("GET", "/v1/users/alice/export", None),
    ("GET", "/v1/models", None),
    ("POST", "/v1/chat/completions", {"model": "memoryscope", "user": "alice", "messages": [{"role": "user", "content": "hi"}]}),
    ("GET", "/metrics", None),
]


@pytest.mark.parametrize(("method", "path", "body"), PROTECTED)
def test_without_a_key_every_endpoint_but_health_and_docs_is_401(api: Api, method: str, path: str, body: Any) -> None:
    response = api.request(method, path, json=body)
    assert "Authorization: Bearer" in assert_error(response, 401, "unauthorized")
    assert response.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/docs", "/openapi.json"])
def test_health_and_docs_need_no_key(api: Api, path: str) -> None:
    assert api.request("GET", path).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer wrong-key-0a1b2c3d"},
        {"Authorization": f"Basic {ALICE_KEY}"},  # the right key under another scheme
        {"Authorization": "Bearer "},
        {"X-API-Key": "wrong-key-0a1b2c3d"},
        {"Authorization": f"Bearer {ALICE_KEY[:-1]}"},
    ],
)
def test_a_wrong_key_is_401(api: Api, headers: dict[str, str]) -> None:
    api.add("alice", "likes tea")
    response = api.request("GET", "/v1/users/alice/memories", headers=headers)
    assert_error(response, 401, "unauthorized")
    assert response.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "headers",
    [{"Authorization": f"Bearer {ALICE_KEY}"}, {"authorization": f"bearer {ALICE_KEY}"}, {"X-API-Key": ALICE_KEY}],
)
def test_the_key_is_read_from_authorization_or_x_api_key(api: Api, workspace: str, headers: dict[str, str]) -> None:
    api.add("alice", "likes tea", workspace)
    response = api.request("GET", "/v1/users/alice/memories", headers=headers, params={"workspace": workspace})
    assert response.status_code == 200
    assert [record["memory"] for record in response.json()["memories"]] == ["likes tea"]


def test_a_user_outside_the_key_scope_is_403(api: Api) -> None:
    api.add("bob", "likes coffee")
    message = assert_error(api.request("GET", "/v1/users/bob/memories", ALICE_KEY), 403, "forbidden")
    assert "'alice-app'" in message and "'bob'" in message
    assert_error(api.request("POST", "/v1/users/carol/memories", ALICE_KEY, json={"texts": ["x"]}), 403, "forbidden")
    assert_error(api.request("GET", "/v1/users/carol/memories", ADMIN_KEY), 404, "unknown_user")  # nothing was stored


def test_a_workspace_key_reaches_any_user_in_its_workspace_only(api: Api) -> None:
    user = f"zed-{uuid.uuid4().hex[:6]}"
    added = api.request(
        "POST", f"/v1/users/{user}/memories", ACME_KEY, json={"texts": ["acme fact"]}, params={"workspace": "acme"}
    )
    assert added.status_code == 201
    inside = api.request("GET", f"/v1/memories/{added.json()['added'][0]['id']}", ACME_KEY)
    assert inside.status_code == 200 and inside.json()["memory"] == "acme fact"
    assert_error(api.request("POST", f"/v1/users/{user}/memories", ACME_KEY, json={"texts": ["x"]}), 403, "forbidden")
    other = api.request("GET", f"/v1/users/{user}/memories", ACME_KEY, params={"workspace": "globex"})
    assert "in workspace 'globex'" in assert_error(other, 403, "forbidden")

    outside = api.add(user, "own fact")  # same user, no workspace
    assert_error(api.request("GET", f"/v1/memories/{outside}", ACME_KEY), 404, "unknown_memory")
    assert_error(api.request("DELETE", f"/v1/memories/{outside}", ACME_KEY), 404, "unknown_memory")
    assert api.memory(outside)["memory"] == "own fact"


def test_the_admin_key_reaches_everyone_and_metrics(api: Api) -> None:
    for user, workspace in [("alice", ""), ("bob", ""), ("dora", "acme"), ("eve", "globex")]:
        memory_id = api.add(user, f"{user} fact", workspace)
        assert api.request("GET", f"/v1/users/{user}/memories", ADMIN_KEY, params={"workspace": workspace}).status_code == 200
        assert api.memory(memory_id)["user_id"] == user
    metrics = api.request("GET", "/metrics", ADMIN_KEY)
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    assert "# TYPE" in metrics.text
    for key in (ALICE_KEY, ACME_KEY):
        assert "not an admin key" in assert_error(api.request("GET", "/metrics", key), 403, "forbidden")


# -- never another user's memory -----------------------------------------------------------------


@pytest.fixture
def bobs(api: Api, workspace: str) -> str:
    """A memory of bob's (in this test's workspace)."""
    memory_id = api.add("bob", "bob's secret: keeps the spare key under the mat", workspace)
    return memory_id


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("GET", "", None),
        ("GET", "/history", None),
        ("PATCH", "", {"text": "alice was here"}),
        ("PATCH", "", {"metadata": {"owner": "alice"}}),
        ("DELETE", "", None),
    ],
)
def test_another_user_memory_by_id_is_404_and_unchanged(
    api: Api, bobs: str, method: str, suffix: str, body: dict[str, Any] | None
) -> None:
    """The answer is the one for an id no memory has: the key cannot even learn the memory exists."""
    before = api.memory(bobs)
    message = assert_error(api.request(method, f"/v1/memories/{bobs}{suffix}", ALICE_KEY, json=body), 404, "unknown_memory")
    missing = assert_error(api.request(method, f"/v1/memories/no-such-id{suffix}", ALICE_KEY, json=body), 404, "unknown_memory")
    assert message == missing.replace("no-such-id", bobs)
    assert "secret" not in message
    assert api.memory(bobs) == before


def test_delete_memory_with_another_user_ids_is_404_and_deletes_nothing(api: Api, bobs: str, workspace: str) -> None:
    alices = api.add("alice", "likes tea", workspace)
    for ids in ([bobs], [alices, bobs]):
        response = api.request(
            "POST",
            "/v1/users/alice/operations/delete_memory",
            ALICE_KEY,
            json={"memory_ids": ids},
            params={"workspace": workspace},
        )
        assert_error(response, 404, "unknown_memory")
    assert api.memory(bobs)["memory"].startswith("bob's secret")
    assert api.memory(alices)["memory"] == "likes tea"  # the refusal is whole: nothing of the request ran
    own = api.request(
        "POST",
        "/v1/users/alice/operations/delete_memory",
        ALICE_KEY,
        json={"memory_ids": [alices]},
        params={"workspace": workspace},
    )
    assert own.status_code == 200 and own.json()["deleted_memory_ids"] == [alices]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "search", {"query": "where is the spare key?"}),
        ("GET", "memories", None),
        ("GET", "export", None),
        ("GET", "profile", None),
        ("GET", "status", None),
        ("DELETE", "memories", None),
        ("POST", "memories", {"texts": ["alice was here"]}),
        ("POST", "messages", {"messages": [{"content": "alice was here"}]}),
        ("POST", "operations/list_memory", None),
        ("POST", "operations/retrieve_memory", {"query": "spare key"}),
        ("POST", "operations/delete_all", None),
        ("POST", "operations/add_memory", {"new_memories": ["alice was here"]}),
    ],
)
def test_another_user_memories_are_403_through_every_route(
    api: Api, bobs: str, workspace: str, method: str, path: str, body: dict[str, Any] | None
) -> None:
    response = api.request(method, f"/v1/users/bob/{path}", ALICE_KEY, json=body, params={"workspace": workspace})
    message = assert_error(response, 403, "forbidden")
    assert "secret" not in response.text and "'bob'" in message
    listed = api.request("GET", "/v1/users/bob/memories", ADMIN_KEY, params={"workspace": workspace}).json()["memories"]
    assert [record["id"] for record in listed] == [bobs]


def test_the_chat_endpoint_refuses_another_user(api: Api) -> None:
    """Without an LLM the chat answers with the memories it found: bob's show for bob only."""
    api.add("bob", "bob hides the spare key under the doormat")
    chat = {"model": "memoryscope", "messages": [{"role": "user", "content": "where is the spare key hidden?"}]}
    assert_error(api.request("POST", "/v1/chat/completions", ALICE_KEY, json={**chat, "user": "bob"}), 403, "forbidden")
    by_header = api.request("POST", "/v1/chat/completions", ALICE_KEY, json=chat, headers={"X-MemoryScope-User": "bob"})
    assert_error(by_header, 403, "forbidden")

    own = api.request("POST", "/v1/chat/completions", ALICE_KEY, json=chat)  # the key's one user: alice
    assert own.status_code == 200 and own.json()["memoryscope"]["user"] == "alice"
    assert "doormat" not in own.text
    admin = api.request("POST", "/v1/chat/completions", ADMIN_KEY, json={**chat, "user": "bob"})
    assert admin.status_code == 200 and "doormat" in admin.json()["choices"][0]["message"]["content"]


# -- rate limit, CORS ----------------------------------------------------------------------------

LOG_KEY = "k4-9b2e7d4c1a6f3e8b"  # never registered for scrubbing: only the server's care hides it
OTHER_KEY = "k5-5e1c8a3f7b2d9a6c"


def ring() -> KeyRing:
    return KeyRing.of(
        ApiKey("log-test", hashlib.sha256(LOG_KEY.encode()).digest(), users=frozenset({"alice"})),
        ApiKey("other", hashlib.sha256(OTHER_KEY.encode()).digest(), users=frozenset({"alice"})),
    )


def test_over_the_rate_is_429_with_retry_after_per_key(make_scope: Any, serve: Any) -> None:
    live = serve(make_scope(llm=False), keys=ring(), rate_limit_per_minute=3)
    url = f"{live.url}/v1/operations"
    assert [requests.get(url, headers={"X-API-Key": LOG_KEY}, timeout=30).status_code for _ in range(3)] == [200] * 3
    refused = requests.get(url, headers={"X-API-Key": LOG_KEY}, timeout=30)
    assert "3/minute" in assert_error(refused, 429, "rate_limited")
    assert int(refused.headers["Retry-After"]) in range(1, 61)
    assert requests.get(url, headers={"X-API-Key": OTHER_KEY}, timeout=30).status_code == 200  # a bucket per key
    assert requests.get(f"{live.url}/healthz", timeout=30).status_code == 200


def test_guessing_keys_is_rate_limited_per_client_address(make_scope: Any, serve: Any) -> None:
    live = serve(make_scope(llm=False), keys=ring(), rate_limit_per_minute=3)
    url = f"{live.url}/v1/operations"
    guesses = [requests.get(url, headers={"X-API-Key": f"guess-{number}"}, timeout=30) for number in range(4)]
    assert [response.status_code for response in guesses] == [401, 401, 401, 429]
    assert "without a valid key from 127.0.0.1" in assert_error(guesses[-1], 429, "rate_limited")
    assert requests.get(url, headers={"X-API-Key": LOG_KEY}, timeout=30).status_code == 200  # a valid key has its own rate


ORIGIN = "https://app.example.com"


def test_cors_is_off_by_default(api: Api) -> None:
    response = api.request("GET", "/v1/operations", ALICE_KEY, headers={"Origin": ORIGIN})
    assert response.status_code == 200 and "access-control-allow-origin" not in response.headers
    preflight = api.request("OPTIONS", "/v1/operations", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "GET"})
    assert "access-control-allow-origin" not in preflight.headers


def test_cors_on_allows_the_configured_origins_only(make_scope: Any, serve: Any) -> None:
    live = serve(make_scope(llm=False), keys=ring(), cors_origins=(ORIGIN,))
    asked = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"}
    preflight = requests.options(f"{live.url}/v1/users/alice/search", headers=asked, timeout=30)
    assert preflight.status_code == 200  # a browser's preflight carries no key
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    answered = requests.get(f"{live.url}/v1/operations", headers={"Origin": ORIGIN, "X-API-Key": LOG_KEY}, timeout=30)
    assert answered.headers["access-control-allow-origin"] == ORIGIN
    refused = requests.get(f"{live.url}/v1/operations", headers={"Origin": ORIGIN}, timeout=30)
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == ORIGIN  # the page can read why
    stranger = requests.get(
        f"{live.url}/v1/operations", headers={"Origin": "https://evil.example", "X-API-Key": LOG_KEY}, timeout=30
    )
    assert "access-control-allow-origin" not in stranger.headers


# -- secrets -------------------------------------------------------------------------------------


def test_keys_never_appear_in_answers_or_logs(make_scope: Any, serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    wrong = "k6-3f9d1c7b5a2e4d0f"
    caplog.set_level(logging.DEBUG)
    scope = make_scope(llm=False)
    live = serve(scope, keys=ring())
    answers = [
        requests.get(f"{live.url}/v1/users/alice/memories", headers={"Authorization": f"Bearer {wrong}"}, timeout=30),
        requests.get(f"{live.url}/v1/users/alice/memories", headers={"X-API-Key": wrong}, timeout=30),
        requests.post(f"{live.url}/v1/users/alice/memories", headers={"X-API-Key": LOG_KEY}, json={"texts": ["x"]}, timeout=30),
        requests.get(f"{live.url}/v1/users/bob/memories", headers={"X-API-Key": LOG_KEY}, timeout=30),
        requests.get(f"{live.url}/metrics", headers={"X-API-Key": LOG_KEY}, timeout=30),
    ]
    assert [answer.status_code for answer in answers] == [401, 401, 201, 403, 403]
    assert scope.store is not None
    scope.store.close()  # a failing request: the server logs it
    failed = requests.get(f"{live.url}/v1/users/alice/memories", headers={"X-API-Key": LOG_KEY}, timeout=30)
    assert failed.status_code == 503
    answers.append(failed)

    assert "access: log-test: users alice" in caplog.text  # the log was captured: names, never keys
    assert "/v1/users/alice/memories" in caplog.text
    logged = caplog.text + "".join(repr(record.args) for record in caplog.records)
    for key in (wrong, LOG_KEY, OTHER_KEY):
        for text in [logged, *(answer.text + repr(dict(answer.headers)) for answer in answers)]:
            assert key not in text and key[:12] not in text
            assert hash_key(key) not in text


# -- the serve command ---------------------------------------------------------------------------


@pytest.fixture
def never_bind(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """uvicorn's serving replaced by a recorder, so a guard that fails cannot leave a server running.
    `serve` sets the `memoryscope` logger's level for its process; it is put back afterwards, or
    later tests in this process would miss the DEBUG records they look for."""
    import uvicorn

    package_logger = logging.getLogger("memoryscope")
    level = package_logger.level

    started: list[Any] = []

    def record(server: Any, *args: Any, **kwargs: Any) -> None:
        started.append(server.config)  # `serve` closes its scope once the server returns

    monkeypatch.setattr(uvicorn.Server, "run", record)
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: started.append(kwargs))
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    yield started
    package_logger.setLevel(level)  # setLevel, not the attribute: it also clears the loggers' level caches


def test_serve_refuses_a_public_address_without_keys(
    never_bind: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "serve.db")
    assert main(["serve", "--host", "0.0.0.0", "--port", "0", "--store", store]) == 2
    error = capsys.readouterr().err
    assert "0.0.0.0" in error and "server.api_keys_file" in error and "--insecure" in error
    assert never_bind == [] and not Path(store).exists()

    assert main(["serve", "--host", "0.0.0.0", "--port", "0", "--store", store, "--insecure"]) == 0
    assert [config.host for config in never_bind] == ["0.0.0.0"]  # the guard lets a meant choice through


def test_serve_hash_key_prints_the_sha256_of_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("s3cret-key-for-the-file\n"))
    assert main(["serve", "--hash-key"]) == 0
    printed = capsys.readouterr().out
    assert printed == hashlib.sha256(b"s3cret-key-for-the-file").hexdigest() + "\n"
    assert printed.strip() == hash_key("s3cret-key-for-the-file")

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert main(["serve", "--hash-key"]) == 2
    assert "reads the key from stdin" in capsys.readouterr().err
