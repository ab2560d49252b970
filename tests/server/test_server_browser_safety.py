"""A keyless server on 127.0.0.1 beside a browser: the exact requests a page on another site can make
the browser send are refused before anything runs (`memoryscope.server.browser_guard`), while the
playground (same origin), the SDK clients and the OpenAI SDK keep working.

- a cross-site HTML form (a "simple" POST: form-encoded, Origin of the attacking page, no preflight);
- a `fetch(..., {mode: "no-cors"})` (text/plain body, the attacking Origin, Sec-Fetch-Site: cross-site);
- a DNS-rebound page (same origin as far as the browser knows: `Host: evil.example`).

Sent as raw HTTP, byte for byte what a browser sends (`http.client` keeps every header as given).
"""

from __future__ import annotations

import http.client
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason='needs the server extra: pip install "memoryscope[server]"')

from memoryscope import MemoryScope
from memoryscope.client import MemoryScopeClient
from memoryscope.server.app import create_app
from memoryscope.server.browser_guard import HostPolicy
from memoryscope.testing.live_server import LiveServer

ATTACKER = "http://evil.example:8080"


class Raw:
    """Requests to the live server with exactly the headers given (no Host or type filled in)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.port = int(url.rsplit(":", 1)[1])

    def send(self, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, dict[str, Any]]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in {"Content-Length": str(len(body)), **headers}.items():
                connection.putheader(name, value)
            connection.endheaders(body)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        try:
            decoded = json.loads(data) if data else {}
        except ValueError:
            decoded = {"raw": data.decode("utf-8", "replace")}
        return response.status, decoded

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Raw, MemoryScope]]:
    path = tmp_path_factory.mktemp("browser") / "m.db"
    with pytest.MonkeyPatch.context() as patch:
        for name in ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH"):
            patch.delenv(name, raising=False)
        scope = MemoryScope("default", overrides={"memory_store.path": str(path)})
    with LiveServer(create_app(scope)) as live:
        yield Raw(live.url), scope


def memories_of(raw: Raw, user: str) -> list[str]:
    status, body = raw.send("GET", f"/v1/users/{user}/memories", {"Host": raw.host})
    return [] if status == 404 else [record["memory"] for record in body["memories"]]


def seeded(raw: Raw) -> str:
    user = f"ann-{uuid.uuid4().hex[:8]}"
    body = json.dumps({"texts": ["plays the guitar", "keeps bees"]}).encode()
    status, answer = raw.send(
        "POST", f"/v1/users/{user}/memories", {"Host": raw.host, "Content-Type": "application/json"}, body
    )
    assert status == 201, answer
    assert len(memories_of(raw, user)) == 2
    return user


def test_a_cross_site_form_cannot_delete_or_list(served: tuple[Raw, MemoryScope]) -> None:
    raw, _ = served
    user = seeded(raw)
    form = {
        "Host": raw.host,
        "Origin": ATTACKER,
        "Referer": f"{ATTACKER}/page.html",
        "Content-Type": "application/x-www-form-urlencoded",
        "Sec-Fetch-Site": "cross-site",
        "Sec-Fetch-Mode": "navigate",
    }
    for operation in ("delete_all", "list_memory"):
        status, answer = raw.send("POST", f"/v1/users/{user}/operations/{operation}", form, b"")
        assert (status, answer["error"]["code"]) == (403, "origin_not_allowed")
        assert "evil.example" in answer["error"]["message"] and "server.allowed_origins" in answer["error"]["message"]
    status, answer = raw.send("DELETE", f"/v1/users/{user}/memories", {**form, "Content-Type": "text/plain"})
    assert status == 403
    assert len(memories_of(raw, user)) == 2


def test_a_no_cors_fetch_and_a_form_without_origin_are_refused(served: tuple[Raw, MemoryScope]) -> None:
    raw, _ = served
    user = seeded(raw)
    no_cors = {
        "Host": raw.host,
        "Origin": ATTACKER,
        "Content-Type": "text/plain;charset=UTF-8",
        "Sec-Fetch-Site": "cross-site",
        "Sec-Fetch-Mode": "no-cors",
    }
    body = json.dumps({"texts": ["planted by a web page"]}).encode()
    status, answer = raw.send("POST", f"/v1/users/{user}/memories", no_cors, body)
    assert (status, answer["error"]["code"]) == (403, "origin_not_allowed")
    # an Origin-less cross-site request (an old browser, a privacy extension): Sec-Fetch-Site still says where it came from
    delete_all = f"/v1/users/{user}/operations/delete_all"
    status, answer = raw.send("POST", delete_all, {"Host": raw.host, "Sec-Fetch-Site": "cross-site"})
    assert (status, answer["error"]["code"]) == (403, "origin_not_allowed")
    # a sandboxed frame or a file sends `Origin: null`
    status, _ = raw.send("POST", delete_all, {"Host": raw.host, "Origin": "null"})
    assert status == 403
    # the same origin with a form's type is still no JSON body
    form_type = {"Host": raw.host, "Origin": f"http://{raw.host}", "Content-Type": "multipart/form-data; boundary=x"}
    status, answer = raw.send("POST", delete_all, form_type)
    assert (status, answer["error"]["code"]) == (415, "unsupported_media_type")
    assert len(memories_of(raw, user)) == 2


def test_a_rebound_page_reads_nothing_and_deletes_nothing(served: tuple[Raw, MemoryScope]) -> None:
    """After DNS rebinding the page's requests are same-origin to the browser: only Host tells."""
    raw, _ = served
    user = seeded(raw)
    rebound = {"Host": "evil.example:8080"}
    for method, path in (("GET", f"/v1/users/{user}/memories"), ("GET", "/v1/config"), ("DELETE", f"/v1/users/{user}/memories")):
        status, answer = raw.send(method, path, rebound)
        assert (status, answer["error"]["code"]) == (421, "host_not_allowed"), (method, path)
        assert "evil.example" in answer["error"]["message"] and "server.allowed_hosts" in answer["error"]["message"]
    status, _ = raw.send("POST", "/mcp", {**rebound, "Content-Type": "application/json"}, b"{}")
    assert status == 421
    status, _ = raw.send("GET", "/", rebound)  # the playground's page too
    assert status == 421
    assert len(memories_of(raw, user)) == 2


def test_the_playground_and_the_clients_keep_working(served: tuple[Raw, MemoryScope]) -> None:
    raw, _ = served
    user = seeded(raw)
    # the playground: same origin, JSON, as its fetch sends it
    page = {"Host": raw.host, "Origin": f"http://{raw.host}", "Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"}
    status, answer = raw.send("POST", f"/v1/users/{user}/operations/list_memory", page, b"{}")
    assert status == 200, answer
    for host in ("localhost", "[::1]", "app.localhost"):  # loopback names and addresses, any port
        status, _ = raw.send("GET", "/healthz", {"Host": f"{host}:{raw.port}"})
        assert status == 200, host
    with MemoryScopeClient(raw.url) as client:  # the SDK: no Origin, JSON bodies, body-less POSTs
        [record] = client.search("guitar", user_id=user, top_k=1)
        client.pin(record.id)
        assert client.get(record.id).pinned
        assert len(client.get_all(user_id=user)) == 2


def test_listed_hosts_and_origins_are_accepted_and_said_at_start() -> None:
    policy = HostPolicy("0.0.0.0", allowed_hosts=["memory.internal"], allowed_origins=["https://app.example.com"])
    assert policy.host_allowed("memory.internal:8000") and policy.host_allowed("10.0.0.7:8000")
    assert not policy.host_allowed("evil.example") and not policy.host_allowed("")
    assert policy.origin_allowed("https://app.example.com", "memory.internal:8000", "http")
    assert not policy.origin_allowed("https://app.example.com.evil.example", "memory.internal:8000", "http")
    assert policy.origin_allowed("http://memory.internal:8000", "memory.internal:8000", "http")  # its own
    assert not policy.origin_allowed("https://memory.internal:8000", "memory.internal:8000", "http")  # another scheme
    [said] = policy.describe()
    assert "memory.internal" in said and "https://app.example.com" in said
    bound = HostPolicy("memory.lan")
    assert bound.host_allowed("memory.lan:9000") and not bound.host_allowed("other.lan")
    anything = HostPolicy("127.0.0.1", allowed_hosts=["*"], allowed_origins=["*"])
    assert anything.host_allowed("evil.example") and anything.origin_allowed("http://evil.example", "x", "http")


def test_a_server_says_at_start_what_it_accepts(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.MonkeyPatch.context() as patch:
        for name in ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH"):
            patch.delenv(name, raising=False)
        scope = MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "m.db")})
    with caplog.at_level("INFO", logger="memoryscope.server"), LiveServer(create_app(scope)):
        pass
    said = "\n".join(record.getMessage() for record in caplog.records)
    assert "browser requests: Host: localhost, *.localhost, IP addresses" in said
    assert "no API keys" in said
