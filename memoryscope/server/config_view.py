"""The config a server runs, as JSON a person can read, with its secrets hidden.

`GET /v1/config` (admin keys) and the playground show it. Every entry appears with its class and
its validated parameters (defaults filled in), every operation with its workflow. A secret never
leaves: a parameter named like one (`api_key`, `password`, `token`, `secret`, ...) shows `***`
when set, a URL's password is replaced, and every text also goes through `scrub`, which hides
the keys the models read from the environment. Names of environment variables (`api_key_env`)
are not secrets and stay, so a reader can tell where a key comes from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel

from memoryscope.config.specs import ComponentSpec, Config, ServiceSpec
from memoryscope.scrubbing import scrub

__all__ = ["REDACTED", "describe_config", "redacted"]

REDACTED = "***"
_SECRET_NAME = re.compile(r"(^|_)(api_?key|apikey|key|password|passwd|secret|token|credentials?|auth)$", re.IGNORECASE)


def describe_config(config: Config) -> dict[str, Any]:
    """The whole config, JSON-ready and redacted."""
    described = {
        "source": _source_name(config.source),
        "global": config.settings.model_dump(mode="json"),
        "models": {name: {"role": spec.role, **_component(spec)} for name, spec in config.models.items()},
        "store": _component(config.store) if config.store is not None else None,
        "workers": {name: _component(spec) for name, spec in config.workers.items()},
        "memory_service": {name: _service(spec) for name, spec in config.services.items()},
        "memory_chat": {name: _component(spec) for name, spec in config.chats.items()},
        "server": config.server.model_dump(mode="json"),
    }
    return redacted(described)


def redacted(value: Any, name: str = "") -> Any:
    """`value` with secrets hidden: by the key they sit under, by a URL's password, by `scrub`."""
    if isinstance(value, Mapping):
        return {str(key): redacted(item, str(key)) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [redacted(item, name) for item in value]
    if isinstance(value, str):
        if value and _SECRET_NAME.search(name):
            return REDACTED
        return scrub(_without_url_password(value))
    if isinstance(value, (datetime, Path, Enum)):
        return redacted(str(value.value if isinstance(value, Enum) else value), name)
    if value is not None and _SECRET_NAME.search(name) and not isinstance(value, (bool, int, float)):
        return REDACTED
    return value if value is None or isinstance(value, (bool, int, float)) else redacted(str(value), name)


def _component(spec: ComponentSpec) -> dict[str, Any]:
    return {"class": _class_name(spec.cls), "params": _params(spec.params)}


def _service(spec: ServiceSpec) -> dict[str, Any]:
    operations = {
        name: {
            "kind": _class_name(operation.kind),
            "backend": bool(getattr(operation.kind, "backend", False)),
            "workflow": str(operation.plan),
            "params": _params(operation.params),
        }
        for name, operation in spec.operations.items()
    }
    return {"class": _class_name(spec.cls), "params": _params(spec.params), "memory_operations": operations}


def _params(params: BaseModel) -> dict[str, Any]:
    return params.model_dump(mode="json", exclude={"workflow"})


def _class_name(cls: Any) -> str:
    return str(getattr(cls, "__name__", cls))


def _source_name(source: str) -> str:
    """A shipped config's name as it is; a file by its name only (its folder is this machine's business)."""
    path = Path(source)
    return path.name if path.suffix in (".yaml", ".yml", ".json") else source


def _without_url_password(text: str) -> str:
    if "://" not in text or "@" not in text:
        return text
    try:
        parts = urlsplit(text)
    except ValueError:
        return text
    if parts.password is None:
        return text
    host = parts.hostname or ""
    netloc = f"{parts.username}:{REDACTED}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
