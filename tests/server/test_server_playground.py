"""What the server does for the web playground: the page and its files (with a content
security policy, no other site), `server.playground: false`, the config in use with secrets
hidden (`/v1/config`, admin keys only), and an expired memory's link to its replacement in the
records the viewer lists. The page itself is tested in a browser (tests/playground)."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timezone
from typing import Any

import pytest
import requests

from memoryscope.config import load_config, shipped_config_names
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.server.access import ApiKey, KeyRing
from memoryscope.server.config_view import REDACTED, describe_config, redacted
from memoryscope.server.routes_playground import ASSETS

pytestmark = pytest.mark.slow  # the playground's routes over a served app; `-m "not slow"` leaves it out


def digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def test_the_page_and_its_files_come_from_the_package_with_a_strict_policy(serve: Any) -> None:
    live = serve()
    page = requests.get(f"{live.url}/", timeout=30)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "connect-src 'self'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    loaded = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    scripts = ["/playground/playground-memories.js", "/playground/playground-views.js", "/playground/playground.js"]
    assert sorted(loaded) == sorted(["#chat-input", "/playground/playground.css", *scripts, "data:,"])
    for name, media_type in ASSETS.items():
        asset = requests.get(f"{live.url}/playground/{name}", timeout=30)
        assert asset.status_code == 200 and asset.headers["content-type"] == media_type and asset.content
        assert "http://" not in asset.text and "https://" not in asset.text  # nothing from another site
    missing = requests.get(f"{live.url}/playground/..%2Fapp.py", timeout=30)
    assert missing.status_code in (400, 404, 422)  # refused, whichever check sees it first
    unknown = requests.get(f"{live.url}/playground/index.html", timeout=30)  # only the listed files
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_endpoint"
    assert "/" not in requests.get(f"{live.url}/openapi.json", timeout=30).json()["paths"]  # not an API route


def test_the_page_needs_no_key_but_everything_it_shows_does(serve: Any) -> None:
    live = serve(keys=KeyRing.of(ApiKey("web", digest("pg-web-key-1"), users=frozenset({"ann"}))))
    assert requests.get(f"{live.url}/", timeout=30).status_code == 200
    listed = requests.get(f"{live.url}/v1/users/ann/memories", timeout=30)
    assert listed.status_code == 401


def test_the_playground_can_be_turned_off(serve: Any) -> None:
    live = serve(playground=False)
    assert requests.get(f"{live.url}/", timeout=30).status_code == 404
    assert requests.get(f"{live.url}/playground/playground.js", timeout=30).status_code == 404
    assert requests.get(f"{live.url}/healthz", timeout=30).status_code == 200


def test_config_shows_every_entry_with_secrets_hidden(make_scope: Any, serve: Any) -> None:
    inline = "sk-inline-secret-0123456789"
    live = serve(make_scope(**{"model.generation_model.api_key": inline}))
    response = requests.get(f"{live.url}/v1/config", timeout=30)
    assert response.status_code == 200, response.text
    shown = response.json()
    generation = shown["models"]["generation_model"]
    assert generation["class"] == "OpenAILikeGeneration" and generation["role"] == "generation"
    assert generation["params"]["api_key"] == REDACTED
    assert generation["params"]["api_key_env"] == "MEMORYSCOPE_LLM_API_KEY"  # a variable's name is no secret
    assert "sk-test-llm" not in response.text and inline not in response.text  # the key from the env, and the inline one
    assert shown["store"]["class"] == "SqliteMemoryStore"
    operations = shown["memory_service"]["memoryscope_service"]["memory_operations"]
    assert operations["consolidate_memory"]["backend"] is True and "info_filter" in operations["consolidate_memory"]["workflow"]
    assert shown["server"]["playground"] is True and shown["global"]["language"] == "en"


def test_config_needs_an_admin_key(serve: Any) -> None:
    keys = KeyRing.of(
        ApiKey("web", digest("pg-web-key-2"), users=frozenset({"ann"})), ApiKey("ops", digest("pg-ops-key-2"), admin=True)
    )
    live = serve(keys=keys)
    refused = requests.get(f"{live.url}/v1/config", headers={"Authorization": "Bearer pg-web-key-2"}, timeout=30)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    allowed = requests.get(f"{live.url}/v1/config", headers={"Authorization": "Bearer pg-ops-key-2"}, timeout=30)
    assert allowed.status_code == 200 and "models" in allowed.json()


@pytest.mark.parametrize("name", shipped_config_names())
def test_every_shipped_config_is_shown_without_its_keys(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-from-the-environment-5678"
    for variable in ("MEMORYSCOPE_LLM_API_KEY", "SILICONFLOW_API_KEY", "DASHSCOPE_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(variable, secret)
    monkeypatch.setenv("MEMORYSCOPE_ES_URL", "https://elastic:es-password-91@es.internal:9200")
    shown = json.dumps(describe_config(load_config(name)))
    assert secret not in shown and "es-password-91" not in shown
    assert '"memory_service"' in shown


def test_redaction_by_name_by_url_and_inside_lists() -> None:
    given = {
        "api_key": "k-1234567890",
        "password": "hunter22",
        "nested": {"token": "t-abc", "api_key_env": "MY_KEY", "hosts": ["https://u:pw-secret@h:9200", "http://plain:80"]},
        "key_count": 3,
        "empty_secret": "",
        "unset_password": None,
    }
    shown = redacted(given)
    assert shown["api_key"] == shown["password"] == shown["nested"]["token"] == REDACTED
    assert shown["nested"]["api_key_env"] == "MY_KEY" and shown["key_count"] == 3
    assert shown["nested"]["hosts"] == ["https://u:***@h:9200", "http://plain:80"]
    assert shown["empty_secret"] == "" and shown["unset_password"] is None


def test_an_expired_memory_names_its_replacement(make_scope: Any, serve: Any) -> None:
    scope = make_scope()
    newer = MemoryNode(user_name="ann", content="lives in Hangzhou", memory_type=MemoryType.OBSERVATION)
    older = MemoryNode(
        user_name="ann", content="lives in Beijing", status=MemoryStatus.EXPIRED, superseded_by=newer.memory_id,
    )  # fmt: skip
    assert scope.store is not None
    scope.store.upsert([newer, older])
    live = serve(scope)
    listed = requests.get(f"{live.url}/v1/users/ann/memories", params={"include_expired": "true"}, timeout=30).json()
    links = {record["memory"]: record["superseded_by"] for record in listed["memories"]}
    assert links == {"lives in Hangzhou": None, "lives in Beijing": newer.memory_id}


def test_the_viewer_reads_a_page_at_a_time_and_in_a_time_range(make_scope: Any, serve: Any) -> None:
    """The list the viewer pages through: `offset` after `limit`, `since` and `until` on when each was said."""
    scope = make_scope(llm=False)
    assert scope.store is not None
    days = [datetime(2024, 5, day, 12, tzinfo=timezone.utc) for day in range(1, 8)]
    nodes = [MemoryNode(user_name="ann", content=f"day {n}", memory_type=MemoryType.OBS_CUSTOMIZED, created_at=when,
                        updated_at=when, message_time=when) for n, when in enumerate(days, start=1)]  # fmt: skip
    scope.store.upsert(nodes)
    live = serve(scope)

    def listed(**params: Any) -> list[str]:
        answer = requests.get(f"{live.url}/v1/users/ann/memories", params=params, timeout=30)
        assert answer.status_code == 200, answer.text
        return [record["memory"] for record in answer.json()["memories"]]

    assert listed(limit=3) == ["day 7", "day 6", "day 5"]
    assert listed(limit=3, offset=3) == ["day 4", "day 3", "day 2"]
    assert listed(limit=3, offset=6) == ["day 1"] and listed(offset=7) == []
    assert listed(since="2024-05-03T00:00:00+00:00", until="2024-05-05T00:00:00+00:00") == ["day 4", "day 3"]
    refused = requests.get(f"{live.url}/v1/users/ann/memories", params={"offset": -1}, timeout=30)
    assert refused.status_code == 422 and "offset" in refused.text
    assert requests.get(f"{live.url}/v1/operations", timeout=30).json()["policy"] == "memoryscope"
