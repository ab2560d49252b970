"""Connecting `elasticsearch_memory_store`: the client from its settings, client errors as
one-line messages that name the hosts but never a credential, and the check that an opened
index was made for the store's embedding model.

The client logs each failed attempt of a request at WARNING, with the whole traceback of its
HTTP library (an unreachable cluster: ~160 lines before the store's one-line error).
`quiet_client_logs` moves those records to DEBUG: they show when the client's loggers (or the
root logger) are set to DEBUG, and the store's StoreError says what failed.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from memoryscope.errors import StoreError
from memoryscope.stores import _es_queries as queries

__all__ = [
    "build_client",
    "safe_hosts",
    "client_hosts",
    "item_reason",
    "api_reason",
    "transport_reason",
    "recorded_model",
    "check_dimension",
    "quiet_client_logs",
]

_ERRNO = re.compile(r"\[Errno -?\d+\] [^)'\"]+")


# the loggers of `elastic_transport` (the client's transport) that log each failed attempt
_CLIENT_LOGGERS = ("elastic_transport.transport", "elastic_transport.node_pool", "elastic_transport.node")


class _RetryNoiseToDebug(logging.Filter):
    """A client's record of a failed attempt, told at DEBUG: passed on only where DEBUG is on."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.WARNING:
            return True  # an error the client did not retry: not noise
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


_QUIET = _RetryNoiseToDebug()


def quiet_client_logs() -> None:
    """Tell the client's per-attempt warnings (and their tracebacks) at DEBUG; idempotent."""
    for name in _CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        if _QUIET not in logger.filters:
            logger.addFilter(_QUIET)


def build_client(elasticsearch: Any, params: Any) -> Any:
    """An `elasticsearch.Elasticsearch` for the store's `Params`; secrets come from the environment."""
    options: dict[str, Any] = {"request_timeout": params.request_timeout, "verify_certs": params.verify_certs}
    if params.ca_certs is not None:
        options["ca_certs"] = params.ca_certs
    if params.api_key_env is not None:
        options["api_key"] = _secret(params.api_key_env, "api_key_env")
    if (params.username_env is None) != (params.password_env is None):
        raise StoreError("elasticsearch_memory_store: set both username_env and password_env, or neither")
    if params.username_env is not None and params.password_env is not None:
        options["basic_auth"] = (_secret(params.username_env, "username_env"), _secret(params.password_env, "password_env"))
    try:
        return elasticsearch.Elasticsearch(params.hosts, **options)
    except (ValueError, TypeError) as error:  # a malformed URL, TLS options on http hosts, ...
        raise StoreError(f"elasticsearch_memory_store at {', '.join(safe_hosts(params.hosts))}: {error}") from None


def _secret(variable: str, setting: str) -> str:
    value = os.environ.get(variable)
    if not value:
        raise StoreError(f"elasticsearch_memory_store: memory_store.{setting} names ${variable}, which is not set")
    return value


def safe_hosts(hosts: Sequence[str]) -> list[str]:
    """Host URLs without any `user:password@` part."""
    safe = []
    for host in hosts:
        try:
            parts = urlsplit(host if "//" in host else f"//{host}")
            netloc = parts.hostname or ""
            if ":" in netloc:  # an IPv6 address keeps its brackets
                netloc = f"[{netloc}]"
            if parts.port is not None:
                netloc = f"{netloc}:{parts.port}"
            safe.append(urlunsplit((parts.scheme, netloc, parts.path, "", "")).removeprefix("//"))
        except ValueError:
            safe.append("<unparsable host>")
    return safe


def client_hosts(client: Any) -> list[str]:
    try:
        return [str(node.base_url) for node in client.transport.node_pool.all()]
    except AttributeError:
        return ["<injected client>"]


def item_reason(result: dict[str, Any]) -> str:
    error = result.get("error")
    if isinstance(error, dict):
        reason = f"{error.get('type', 'error')}: {error.get('reason', '')}"
        cause = error.get("caused_by")
        if isinstance(cause, dict) and cause.get("reason"):
            reason += f" ({cause['reason']})"
        return _one_line(reason)
    return _one_line(str(error))


def api_reason(error: Any) -> str:
    status = getattr(error, "status_code", None)
    body = getattr(error, "body", None)
    detail = str(getattr(error, "message", error))
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        info = body["error"]
        detail = f"{info.get('type', detail)}: {info.get('reason', '')}"
    hint = ""
    if status == 401:
        hint = " (check api_key_env, or username_env and password_env)"
    elif status == 403:
        hint = " (the credentials lack a privilege on this index)"
    if type(error).__name__ == "UnsupportedProductError":
        return "the server is not Elasticsearch"
    return _one_line(f"HTTP {status} {detail}{hint}")


def transport_reason(error: Any, timeout: float) -> str:
    kind = type(error).__name__
    if kind == "ConnectionTimeout":
        return f"no answer within {timeout:g}s (request_timeout)"
    if kind == "TlsError":
        return "TLS error (check the https URL, verify_certs and ca_certs)"
    if kind == "SerializationError":
        return _one_line(f"cannot serialise the request or read the answer: {error}")
    found = _ERRNO.search(str(error))
    return f"cannot connect: {found.group(0).strip()}" if found else "cannot connect"


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def recorded_model(
    mappings: dict[str, Any], name: str, dimension: int | None, allow_model_change: bool, where: Callable[[str], str]
) -> tuple[str, int] | None:
    """The embedding model and dimension an opened index records in its `_meta` (None: no index
    in `mappings` and the dimension not known).

    Raises (each message passed through `where`) when the index was not made by MemoryScope, has
    a schema version this MemoryScope cannot read or upgrade, or records another model, unless
    `allow_model_change`. `dimension` None (the model not asked yet): the name is matched now,
    the size by `check_dimension` when the store learns it."""
    found: tuple[str, int] | None = None if dimension is None else (name, dimension)
    for concrete, entry in mappings.items():
        meta = (entry.get("mappings") or {}).get("_meta") or {}
        recorded, recorded_dimension = meta.get("embedding_model"), meta.get("dimension")
        if recorded is None:
            raise StoreError(where(
                f"index {concrete!r} was not created by MemoryScope (its mapping has no _meta.embedding_model); "
                "set memory_store.index_name to a new index"
            ))  # fmt: skip
        version = meta.get("schema_version")
        if version != queries.SCHEMA_VERSION and version not in queries.UPGRADABLE_SCHEMA_VERSIONS:
            raise StoreError(where(
                f"index {concrete!r} has schema version {version}; this MemoryScope reads {queries.SCHEMA_VERSION}"
            ))  # fmt: skip
        mismatch = recorded != name or (dimension is not None and recorded_dimension != dimension)
        if mismatch and allow_model_change:
            found = (str(recorded), int(recorded_dimension or 0))
        elif mismatch:
            shown = "not known yet" if dimension is None else dimension
            raise StoreError(where(
                f"index {concrete!r} holds vectors made by embedding model {recorded!r} (dimension {recorded_dimension}), "
                f"but it was opened with {name!r} (dimension {shown}); re-embed it with "
                "`memoryscope reembed --config CONFIG` or set memory_store.index_name to another index"
            ))  # fmt: skip
        elif found is None:
            found = (name, int(recorded_dimension or 0))
    return found


def check_dimension(recorded: tuple[str, int], name: str, dimension: int, where: Callable[[str], str]) -> None:
    """Refuse a model whose vector size, learned after the index was opened, is not the index's."""
    recorded_name, recorded_dimension = recorded
    if recorded_name == name and recorded_dimension != dimension:
        raise StoreError(where(
            f"the index holds vectors of dimension {recorded_dimension} made by embedding model {name!r}, but that "
            f"model now gives vectors of dimension {dimension}; set `dimensions: {recorded_dimension}` under "
            "model.embedding_model if the model can make them (with `send_dimensions: true`), or re-embed it with "
            "`memoryscope reembed --config CONFIG`, or set memory_store.index_name to another index"
        ))  # fmt: skip
