"""Ids in paths: a `/` inside a user or memory id cannot travel in a URL path.

The router matches the decoded path, so `/v1/users/a%2Fb/memories` would be read as the user
`a` and the route `/b/memories` — a different endpoint, or a different user. Such a request is
refused before routing, with a 422 that says so.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from memoryscope.server.errors import error_body

__all__ = ["EncodedSlashGuard"]

_ENCODED_SLASH = (b"%2f", b"%2F", b"%5c", b"%5C")  # `/` and `\`, which some clients turn into `/`


class EncodedSlashGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") or b""
        if scope["type"] == "http" and any(mark in raw for mark in _ENCODED_SLASH):
            message = "a user or memory id in the path cannot contain '/' or '\\'; use ids without them"
            body = json.dumps(error_body(422, "slash_in_id", message)).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 422, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)
