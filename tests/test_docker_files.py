"""The docker set-up points where the docs say (no Docker engine here, so no build is run)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_compose_runs_elasticsearch_8_13_single_node_and_the_server_behind_one_port() -> None:
    compose = yaml.safe_load((ROOT / "docker" / "docker-compose.yml").read_text(encoding="utf-8"))
    elastic = compose["services"]["elasticsearch"]
    assert elastic["image"] == "elasticsearch:8.13.2"
    assert {"discovery.type=single-node", "xpack.security.enabled=false"} <= set(elastic["environment"])
    service = compose["services"]["memoryscope"]
    assert service["build"]["dockerfile"] == "docker/Dockerfile"
    assert service["environment"]["MEMORYSCOPE_ES_URL"] == "http://elasticsearch:9200"
    assert "ports" not in service  # replicas publish nothing themselves: `--scale` would clash on the port
    gateway = compose["services"]["gateway"]
    assert gateway["ports"] == ["8000:8000"]
    nginx = (ROOT / "docker" / "nginx.conf").read_text(encoding="utf-8")
    assert "server memoryscope:8000;" in nginx and "proxy_buffering off;" in nginx


def test_dockerfile_installs_the_server_and_serves_the_elasticsearch_config_with_keys() -> None:
    text = (ROOT / "docker" / "Dockerfile").read_text(encoding="utf-8")
    for folder in ("memoryscope", "workers", "configs"):
        assert f"COPY {folder} ./{folder}" in text
    assert '".[server,elasticsearch]"' in text
    assert 'CMD ["serve", "--config", "docker/serve.yaml"]' in text
    served = yaml.safe_load((ROOT / "docker" / "serve.yaml").read_text(encoding="utf-8"))
    assert served["extends"] == "elasticsearch" and served["server"]["host"] == "0.0.0.0"
    keys = yaml.safe_load((ROOT / "docker" / served["server"]["api_keys_file"]).read_text(encoding="utf-8"))
    assert all("key_env" in entry or "sha256" in entry for entry in keys["keys"])


def test_the_served_config_and_its_keys_file_load(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("fastapi", reason="the server extra is not installed")
    from memoryscope.config.loading import load_config
    from memoryscope.server.app import keys_for

    monkeypatch.setenv("MEMORYSCOPE_API_KEY", "test-admin-key")
    config = load_config(str(ROOT / "docker" / "serve.yaml"))
    keys = keys_for(config.source, config.server)
    assert len(keys) == 1 and keys.authenticate("test-admin-key") is not None
