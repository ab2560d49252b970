"""A real Chromium visits a page of another local origin that attacks a keyless MemoryScope server
on 127.0.0.1: an auto-submitted HTML form and `no-cors` fetches that would delete the user's
memories or plant one, and a DNS-rebound name (Chromium's resolver maps `rebound.test` to
127.0.0.1, as a rebinding attacker's DNS would). The server sees each request the browser sends
(so the attack is real) and changes nothing. Skipped, with the reason, where Chromium, its
driver or selenium is missing."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the playground tests need the server extra: pip install 'memoryscope[server]'")

import requests
from playground_browser import chromium_driver, missing_chromium

from memoryscope import MemoryScope
from memoryscope.server.app import create_app
from memoryscope.testing.live_server import LiveServer

MISSING = missing_chromium()
pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=MISSING or "a browser is installed"),
    pytest.mark.slow,  # a browser; `-m "not slow"` leaves it out
]

REBOUND = "rebound.test"
ATTACK_PAGE = """<!doctype html><html><body>
<iframe name="sink" style="display:none"></iframe>
<form id="wipe" method="POST" target="sink" action="{server}/v1/users/ann/operations/delete_all"></form>
<script>
  const server = "{server}";
  document.getElementById("wipe").submit();
  fetch(server + "/v1/users/ann/memories", {{method: "POST", mode: "no-cors",
        headers: {{"Content-Type": "text/plain"}}, body: JSON.stringify({{texts: ["planted by a web page"]}})}})
    .finally(() => fetch(server + "/v1/users/ann/memories", {{method: "DELETE", mode: "no-cors"}}))
    .finally(() => {{ document.title = "done"; }});
</script></body></html>"""


class _AttackSite:
    """The attacker's page, served from another origin (`http://localhost:PORT`)."""

    def __init__(self, server_url: str) -> None:
        page = ATTACK_PAGE.format(server=server_url).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://localhost:{self.httpd.server_address[1]}/attack.html"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Seen:
    """The app, with every request that reaches the server noted (method, path, Origin) before it is answered."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests: list[tuple[str, str, str]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            origin = dict(scope["headers"]).get(b"origin", b"").decode("latin-1")
            self.requests.append((scope["method"], scope["path"], origin))
        await self.app(scope, receive, send)


def _served(tmp_path: Path, name: str) -> tuple[MemoryScope, _Seen]:
    with pytest.MonkeyPatch.context() as patch:
        for variable in ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH"):
            patch.delenv(variable, raising=False)
        scope = MemoryScope("default", overrides={"memory_store.path": str(tmp_path / f"{name}.db")})
    return scope, _Seen(create_app(scope))


@pytest.fixture
def driver() -> Iterator[Any]:
    with chromium_driver(extra_flags=(f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1",)) as browser:
        yield browser


def _memories(url: str) -> list[str]:
    response = requests.get(f"{url}/v1/users/ann/memories", timeout=30)
    return [] if response.status_code == 404 else sorted(record["memory"] for record in response.json()["memories"])


def _attack(driver: Any, url: str) -> list[str]:
    """Seed ann's memories, let the browser run the attack page against `url`, and say what ann has left."""
    seeded = requests.post(f"{url}/v1/users/ann/memories", json={"texts": ["plays the guitar", "keeps bees"]}, timeout=30)
    assert seeded.status_code == 201, seeded.text
    site = _AttackSite(url)
    try:
        driver.get(site.url)
        deadline = time.monotonic() + 20
        while driver.title != "done" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert driver.title == "done"
        time.sleep(0.5)  # the form's POST lands in its frame independently of the fetches
    finally:
        site.close()
    return _memories(url)


def test_a_page_of_another_origin_cannot_wipe_or_plant_memories(driver: Any, tmp_path: Path) -> None:
    scope, app = _served(tmp_path, "guarded")
    with scope, LiveServer(app) as live:
        assert _attack(driver, live.url) == ["keeps bees", "plays the guitar"]
    attacks = [(method, path) for method, path, origin in app.requests if origin.startswith("http://localhost:")]
    # the browser did send the form and the fetch (a no-cors DELETE it refuses to send itself)
    assert ("POST", "/v1/users/ann/operations/delete_all") in attacks and ("POST", "/v1/users/ann/memories") in attacks


def test_a_rebound_name_gets_nothing(driver: Any, tmp_path: Path) -> None:
    scope, app = _served(tmp_path, "rebound")
    with scope, LiveServer(app) as live:
        requests.post(f"{live.url}/v1/users/ann/memories", json={"texts": ["plays the guitar"]}, timeout=30)
        port = live.url.rsplit(":", 1)[1]
        driver.get(f"http://{REBOUND}:{port}/v1/users/ann/memories")
        shown = driver.find_element("tag name", "body").text
        assert "host_not_allowed" in shown and "plays the guitar" not in shown
        driver.get(f"http://127.0.0.1:{port}/v1/users/ann/memories")  # the same server by its address answers
        assert "plays the guitar" in driver.find_element("tag name", "body").text
