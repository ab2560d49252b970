"""The `mcpServers` JSON block that Claude Desktop, Cursor and Cline read to start `memoryscope mcp`.

    {"mcpServers": {"memoryscope": {"command": "/venv/bin/memoryscope", "args": ["mcp", "--config", "default"],
                                    "env": {"MEMORYSCOPE_LLM_API_KEY": "<your MEMORYSCOPE_LLM_API_KEY>"}}}}

`env` names the environment variables the config reads (its models' `api_key_env`, and `${VAR}`
with no default) with placeholder values: this block is pasted into files that get shared, so
it never holds a value from this environment.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from memoryscope.config.loading import load_config
from memoryscope.errors import MemoryScopeError

__all__ = ["client_config", "server_command"]

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}")


def server_command() -> tuple[str, list[str]]:
    """How a client starts this install's `memoryscope`: its script beside this Python, else `python -m`."""
    script = Path(sys.executable).parent / ("memoryscope.exe" if sys.platform == "win32" else "memoryscope")
    if script.is_file():
        return str(script.absolute()), []
    return str(Path(sys.executable).absolute()), ["-m", "memoryscope.cli"]


def client_config(config: str = "default", user: str | None = None, store: str | None = None) -> dict[str, Any]:
    """The JSON-ready block; the config is loaded (so a bad one fails here, not in the client).
    A MemoryOS `config.json` gives the `memoryos` server MemoryOS's `mcp.json` names."""
    if str(config).lower().endswith(".json"):
        return _memoryos_client_config(config, user)
    loaded = load_config(config)
    command, prefix = server_command()
    shown_config = str(Path(config).expanduser().absolute()) if Path(config).expanduser().exists() else config
    args = [*prefix, "mcp", "--config", shown_config]
    if user:
        args += ["--user", user]
    if store:
        args += ["--store", str(Path(store).expanduser().absolute())]
    names = sorted({*_key_variables(loaded), *_required_references(config)})
    env = {name: f"<your {name}>" for name in names}
    entry: dict[str, Any] = {"command": command, "args": args}
    if env:
        entry["env"] = env
    return {"mcpServers": {"memoryscope": entry}}


def _memoryos_client_config(config: str, user: str | None) -> dict[str, Any]:
    from memoryscope.memoryos import read_mcp_config

    settings = read_mcp_config(config)  # checked now, not when the client starts the server
    command, prefix = server_command()
    args = [*prefix, "mcp", "--config", str(Path(config).expanduser().absolute())]
    if user:
        args += ["--user", user]
    entry: dict[str, Any] = {"command": command, "args": args}
    if not settings.get("openai_api_key"):
        entry["env"] = {"OPENAI_API_KEY": "<your OPENAI_API_KEY>"}
    return {"mcpServers": {"memoryos": entry}}


def _key_variables(config: Any) -> list[str]:
    found = []
    for spec in config.models.values():
        name = getattr(spec.params, "api_key_env", None)
        if name:
            found.append(str(name))
    return found


def _required_references(source: str) -> list[str]:
    """`${VAR}` names in the config file (and the files it extends) with no default or an empty one."""
    found: list[str] = []
    for text in _config_texts(source):
        found += [match.group(1) for match in _REFERENCE.finditer(text) if not (match.group(3) or "").strip()]
    return found


def _config_texts(source: str) -> list[str]:
    from memoryscope.config.source import _read_text  # the loader's own finder of shipped names and paths

    texts: list[str] = []
    seen: set[str] = set()
    current: str | None = source
    while current is not None and current not in seen:
        seen.add(current)
        try:
            text, _ = _read_text(current)
        except MemoryScopeError:
            break
        texts.append(text)
        match = re.search(r"^extends:\s*['\"]?([^'\"\s#]+)", text, re.MULTILINE)
        base = match.group(1) if match else None
        if base is not None and base.endswith((".yaml", ".yml")) and not Path(base).expanduser().is_absolute():
            base = str(Path(current).expanduser().parent / base)  # as the loader reads it: beside the extending file
        current = base
    return texts
