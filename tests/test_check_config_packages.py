"""`memoryscope check-config` fails a config whose store needs a package that is not installed,
naming it and the install command; here the `elasticsearch` client is made unimportable in a
real `memoryscope` process (None in `sys.modules`, as Python does for a blocked module)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BLOCKED_ELASTICSEARCH = (
    "import sys; sys.modules['elasticsearch'] = None; "  # `import elasticsearch` now raises ImportError
    "from memoryscope.cli import main; sys.exit(main(sys.argv[1:]))"
)


def check_config(*configs: str, block: bool) -> subprocess.CompletedProcess[str]:
    code = BLOCKED_ELASTICSEARCH if block else "import sys; from memoryscope.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, "check-config", *configs], capture_output=True, text=True, timeout=120, check=False
    )


def test_an_elasticsearch_config_without_the_client_fails_with_the_install_command() -> None:
    done = check_config("elasticsearch", "default", block=True)
    assert done.returncode == 1, done
    assert "FAIL elasticsearch: a package it needs is missing" in done.stderr
    assert "memory_store:" in done.stderr and "`elasticsearch` package" in done.stderr
    assert 'pip install "memoryscope[elasticsearch]"' in done.stderr
    assert "ok   default:" in done.stdout  # the other config is checked as before
    assert "ok   elasticsearch" not in done.stdout


def test_with_the_client_installed_the_config_is_ok() -> None:
    pytest.importorskip("elasticsearch")
    done = check_config("elasticsearch", block=False)
    assert done.returncode == 0, done
    assert "ok   elasticsearch:" in done.stdout and "missing" not in done.stderr


def test_the_extra_named_is_the_one_setup_defines() -> None:
    setup = (Path(__file__).resolve().parents[1] / "setup.py").read_text(encoding="utf-8")
    assert '"elasticsearch": ["elasticsearch' in setup
