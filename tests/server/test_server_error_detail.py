"""A failure on the server's side tells its detail (the upstream model's host and answer, a file's
path) only to admin callers; a user's key gets the stable code and an incident id, which the log
carries beside the detail (`memoryscope.server.errors.for_caller`)."""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any

import pytest
import requests

pytest.importorskip("fastapi", reason='needs the server extra: pip install "memoryscope[server]"')

from memoryscope.server.access import ApiKey, KeyRing
from memoryscope.testing.fake_openai import FakeOpenAIServer

USER_KEY, ADMIN_KEY = "user-key-5d1e", "admin-key-8a2c"
UPSTREAM_SECRET = "upstream says: quota of org-7731 exceeded"


def _key(name: str, key: str, **scope: Any) -> ApiKey:
    return ApiKey(name, hashlib.sha256(key.encode()).digest(), **scope)


KEYS = KeyRing.of(_key("ann-app", USER_KEY, users=frozenset({"ann"})), _key("ops", ADMIN_KEY, admin=True))


def _chat(url: str, key: str) -> requests.Response:
    body = {"model": "memoryscope", "user": "ann", "messages": [{"role": "user", "content": "what do I keep?"}]}
    return requests.post(f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def test_a_model_failure_shows_its_detail_to_admins_only(
    serve: Any, fake_openai: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    live = serve(keys=KEYS)
    fake_openai.fail_next(status=400, body=UPSTREAM_SECRET)  # a refusal: not retried
    with caplog.at_level(logging.WARNING, logger="memoryscope.server"):
        response = _chat(live.url, USER_KEY)
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "model_error" and error["message"].startswith("a model call failed (incident ")
    for detail in (UPSTREAM_SECRET, "127.0.0.1", fake_openai.base_url):
        assert detail not in response.text
    [incident] = re.findall(r"incident ([0-9a-f]{12})", error["message"])
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert f"incident {incident}" in logged and UPSTREAM_SECRET in logged  # the operator finds the detail

    fake_openai.fail_next(status=400, body=UPSTREAM_SECRET)
    admin = _chat(live.url, ADMIN_KEY)
    assert admin.status_code == 502 and UPSTREAM_SECRET in admin.json()["error"]["message"]


def test_a_store_failure_hides_the_files_path_from_a_users_key(serve: Any, make_scope: Any) -> None:
    scope = make_scope(llm=False)
    live = serve(scope, keys=KEYS)
    headers = {"Authorization": f"Bearer {USER_KEY}"}
    assert requests.post(f"{live.url}/v1/users/ann/memories", json={"texts": ["tea"]}, headers=headers, timeout=30).ok
    assert scope.store is not None
    path = str(scope.store.path)
    scope.store.close()
    response = requests.get(f"{live.url}/v1/users/ann/memories", headers=headers, timeout=30)
    assert response.status_code == 503 and response.json()["error"]["code"] == "store_error"
    assert path not in response.text and "incident" in response.json()["error"]["message"]
    admin = requests.get(f"{live.url}/v1/users/ann/memories", headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30)
    assert admin.status_code == 503 and path in admin.text
