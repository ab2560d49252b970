"""The server is safe beside a browser: what a web page from another site can make the browser send
is refused before any handler runs (REST, the chat endpoint, `/mcp`, the playground).

- **Host** (DNS rebinding: a page on evil.example whose name now points at 127.0.0.1 sends
  `Host: evil.example`). Accepted: `localhost` and `*.localhost`, any IP address written out (a
  rebinding page has a name, never an address), the name the server is bound to, and the names
  in `server.allowed_hosts` (`"*"`: any, for a deployment whose proxy checks the host). Anything
  else: 421 `host_not_allowed`.
- **Origin** on every request that changes something (any method but GET, HEAD, OPTIONS) and on
  a WebSocket: a browser names the page that sent it. Accepted: no Origin (not a browser page:
  the SDK clients, curl), the server's own origin (the playground), and `server.allowed_origins`
  or `server.cors_origins`. Anything else, `null` included: 403 `origin_not_allowed`. A request
  whose `Sec-Fetch-Site` says `cross-site` without an Origin is refused the same way.
- **Content type** of a changing request: a body must be JSON (`application/json`, `+json`, or
  JSON lines for an import); the types an HTML form or a `no-cors` fetch can send without asking
  the server first (`application/x-www-form-urlencoded`, `multipart/form-data`, `text/plain`)
  are refused even with an empty body: 415 `unsupported_media_type`.

CORS stays closed unless `server.cors_origins` names origins (`memoryscope.server.app`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from memoryscope.server.errors import ApiError
from memoryscope.server.middleware import send_json_error

__all__ = ["BrowserGuard", "HostPolicy"]

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_JSON_TYPES = frozenset({"application/json", "application/x-ndjson", "application/jsonl", "application/json-seq"})
_WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})


class HostPolicy:
    """Which `Host` names and `Origin`s a server accepts (see the module)."""

    def __init__(self, bound_host: str, allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = ()) -> None:
        self.any_host = "*" in allowed_hosts
        self.hosts = {name.strip().lower().rstrip(".") for name in allowed_hosts if name.strip() and name != "*"}
        bound = bound_host.strip().lower().strip("[]")
        if bound not in _WILDCARD_BINDS and not _is_address(bound):
            self.hosts.add(bound)
        self.any_origin = "*" in allowed_origins
        self.origins = {origin.strip().rstrip("/").lower() for origin in allowed_origins if origin.strip() and origin != "*"}

    def describe(self) -> list[str]:
        """What a starting server says it accepts."""
        hosts = "any Host" if self.any_host else "Host: localhost, *.localhost, IP addresses" + "".join(
            f", {name}" for name in sorted(self.hosts)
        )
        origins = "any Origin" if self.any_origin else "Origin: this server's own" + "".join(
            f", {origin}" for origin in sorted(self.origins)
        )
        return [f"browser requests: {hosts}; changes from {origins} (others refused)"]

    def host_allowed(self, host_header: str) -> bool:
        if self.any_host:
            return True
        name = _host_name(host_header)
        if not name:
            return False
        return name == "localhost" or name.endswith(".localhost") or _is_address(name) or name in self.hosts

    def origin_allowed(self, origin: str, host_header: str, scheme: str) -> bool:
        if self.any_origin:
            return True
        origin = origin.strip().rstrip("/").lower()
        if origin in self.origins:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # `null` (a sandboxed frame, a file), or not an origin at all
        return parts.scheme == scheme.replace("ws", "http") and parts.netloc == host_header.strip().lower()


class BrowserGuard:
    """The ASGI layer applying a `HostPolicy` to every HTTP request and WebSocket."""

    def __init__(self, app: ASGIApp, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            await send_json_error(send, refusal)
        else:
            await send({"type": "websocket.close", "code": 1008, "reason": refusal.message[:120]})

    def refusal(self, scope: Scope) -> ApiError | None:
        """Why this request is refused, or None."""
        headers = _headers(scope)
        host = headers.get("host", "")
        if not self.policy.host_allowed(host):
            shown = host[:80] or "(none)"
            return ApiError(
                421,
                "host_not_allowed",
                f"this server does not answer for Host {shown!r} (a page on another site may be trying to reach it); "
                "a deployment behind a proxy lists its names in server.allowed_hosts",
            )
        changes = scope["type"] == "websocket" or scope.get("method", "GET").upper() not in _SAFE_METHODS
        if not changes:
            return None
        origin = headers.get("origin")
        if origin is not None and not self.policy.origin_allowed(origin, host, str(scope.get("scheme", "http"))):
            return _cross_origin(origin[:80])
        if origin is None and headers.get("sec-fetch-site") == "cross-site":
            return _cross_origin("another site")
        if scope["type"] == "http":
            return _content_type_refusal(headers.get("content-type"))
        return None


def _cross_origin(origin: str) -> ApiError:
    return ApiError(
        403,
        "origin_not_allowed",
        f"a page from {origin!r} may not change anything here; list the origin in server.allowed_origins to let it",
    )


def _content_type_refusal(content_type: str | None) -> ApiError | None:
    if content_type is None:
        return None  # no body, or a client that sends one without a type: no browser form does that
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind in _JSON_TYPES or (kind.startswith("application/") and kind.endswith("+json")):
        return None
    return ApiError(
        415,
        "unsupported_media_type",
        f"the body's type is {kind or '(empty)'!r}; send JSON with Content-Type: application/json",
    )


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lowercase name (the first of each), decoded as Latin-1 as HTTP has them."""
    found: dict[str, str] = {}
    for name, value in scope.get("headers") or []:
        found.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return found


def _host_name(host_header: str) -> str:
    """The name or address of a Host header, without its port; "" when malformed."""
    host = host_header.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else ""
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return name.rstrip(".")


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
