"""The docker set-up points where the docs say (no Docker engine here, so no build is run)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
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
    assert '".[server,elasticsearch,mcp]"' in text
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


def readme_compose_blocks() -> list[str]:
    """The README's shell blocks that run the compose file, as written there."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```(?:bash|sh)\n(.*?)^```", readme, flags=re.MULTILINE | re.DOTALL)
    return [block for block in blocks if "docker compose -f docker/docker-compose.yml" in block]


def compose_command() -> list[str] | None:
    """`docker compose` (the plugin) or Debian's `docker-compose`, whichever is here."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_the_readme_shows_how_to_run_the_compose_file() -> None:
    blocks = readme_compose_blocks()
    assert len(blocks) >= 2  # the server behind one port, and Elasticsearch with the terminal chat
    for block in blocks:
        assert any(line.startswith("export ") for line in block.splitlines()), block


@pytest.mark.parametrize("block", readme_compose_blocks(), ids=lambda block: block.splitlines()[1].split("#")[0].strip())
def test_the_compose_file_validates_with_the_readme_environment_block(block: str, tmp_path: Path) -> None:
    """`docker compose config` with exactly the `export` lines of the README's block, in an
    environment that has nothing else: what a user who copies the block gets."""
    command = compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed (.ci/run installs Debian's docker-compose)")
    exports = "\n".join(line for line in block.splitlines() if line.startswith("export "))
    if "openssl" in exports and shutil.which("openssl") is None:
        pytest.skip("the README's block runs openssl, which is not installed")
    script = f"{exports}\nexec {shlex.join(command)} -f docker/docker-compose.yml config"
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{shlex.join(command)} config refuses the README's block:\n{exports}\n{done.stderr}"
    resolved = yaml.safe_load(done.stdout)
    environment = resolved["services"]["memoryscope"]["environment"]
    assert environment["SILICONFLOW_API_KEY"] == "..."  # the README's placeholder, passed through
    assert len(environment["MEMORYSCOPE_API_KEY"]) == 48  # openssl rand -hex 24


def test_the_image_has_every_extra_the_readme_docker_section_uses() -> None:
    """The image serves REST (server), on Elasticsearch (elasticsearch), with `/mcp` (mcp); the
    build fails if `/mcp` could not be mounted."""
    text = (ROOT / "docker" / "Dockerfile").read_text(encoding="utf-8")
    installed = re.search(r'pip install [^\n]*"\.\[([a-z,]+)\]"', text)
    assert installed is not None, "the Dockerfile installs no extras"
    extras = set(installed.group(1).split(","))
    assert {"server", "elasticsearch", "mcp"} <= extras
    assert "import memoryscope.server.routes_mcp" in text
    assert "/mcp" in (ROOT / "README.md").read_text(encoding="utf-8")
