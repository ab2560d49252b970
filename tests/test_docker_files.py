"""The docker set-up points where the docs say (no Docker engine here, so no build is run)."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_compose_runs_elasticsearch_8_13_single_node_and_the_service_on_its_config() -> None:
    compose = yaml.safe_load((ROOT / "docker" / "docker-compose.yml").read_text(encoding="utf-8"))
    elastic = compose["services"]["elasticsearch"]
    assert elastic["image"] == "elasticsearch:8.13.2"
    assert {"discovery.type=single-node", "xpack.security.enabled=false"} <= set(elastic["environment"])
    service = compose["services"]["memoryscope"]
    assert service["build"]["dockerfile"] == "docker/Dockerfile"
    assert service["environment"]["MEMORYSCOPE_ES_URL"] == "http://elasticsearch:9200"


def test_dockerfile_copies_what_the_package_needs_and_starts_the_elasticsearch_config() -> None:
    text = (ROOT / "docker" / "Dockerfile").read_text(encoding="utf-8")
    for folder in ("memoryscope", "workers", "configs"):
        assert f"COPY {folder} ./{folder}" in text
    assert '".[elasticsearch]"' in text
    assert 'CMD ["chat", "--config", "elasticsearch"]' in text
    assert (ROOT / "configs" / "elasticsearch.yaml").exists()
