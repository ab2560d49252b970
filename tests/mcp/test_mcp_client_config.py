"""`memoryscope mcp --print-client-config`: the JSON block an MCP client needs, with no secret in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts the printed MCP server command; `-m "not slow"` leaves it out


def test_prints_the_command_args_and_placeholder_env(tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text("extends: default\nglobal:\n  language: en\n", encoding="utf-8")
    env = {**os.environ, "MEMORYSCOPE_LLM_API_KEY": "sk-real-secret-123", "MEMORYSCOPE_LLM_API_BASE": "http://10.1.2.3/v1"}
    printed = subprocess.run(
        [sys.executable, "-m", "memoryscope.cli", "mcp", "--print-client-config", "--config", str(config), "--user", "ann"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60, check=True,
    ).stdout  # fmt: skip
    block = json.loads(printed)["mcpServers"]["memoryscope"]
    assert Path(block["command"]).is_absolute() and Path(block["command"]).exists()
    args = block["args"]
    assert args[args.index("--config") + 1] == str(config) and args[args.index("--user") + 1] == "ann"
    assert "mcp" in args
    assert set(block["env"]) == {"MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_API_BASE"}
    assert "sk-real-secret-123" not in printed and "10.1.2.3" not in printed
    assert all(value.startswith("<") for value in block["env"].values())


def test_the_printed_command_starts_a_working_server(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "memoryscope.cli", "mcp", "--print-client-config", "--user", "ann"]
    store = ["--store", str(tmp_path / "s.db")]
    printed = subprocess.run([*command, *store], capture_output=True, text=True, timeout=60, check=True).stdout
    block = json.loads(printed)["mcpServers"]["memoryscope"]
    help_text = subprocess.run([block["command"], *block["args"][: block["args"].index("mcp") + 1], "--help"],
                               capture_output=True, text=True, timeout=60, check=True).stdout  # fmt: skip
    assert "--print-client-config" in help_text and "--user" in help_text
