"""`/`: the web playground, a page to chat with memory and watch the memories change.

Everything it needs ships in the package (`memoryscope/server/playground/`): one HTML page, one
stylesheet, three scripts (the chat; the memory viewer; the policy views and the dashboard), no
build step and nothing from another site. The page talks to the same `/v1` API as any client,
with the API key the visitor types in (kept in the tab's session storage), so it can do exactly
what that key may do. `server.playground: false` turns it off.
The page is sent with a content security policy that lets it load and call only this server.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import Response

from memoryscope.server.errors import ApiError

__all__ = ["router", "ASSETS"]

router = APIRouter(include_in_schema=False)

ASSETS = {  # what the page loads, by name: nothing else is served from the folder
    "playground.css": "text/css; charset=utf-8",
    "playground.js": "text/javascript; charset=utf-8",
    "playground-memories.js": "text/javascript; charset=utf-8",
    "playground-views.js": "text/javascript; charset=utf-8",
}
_PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@router.get("/", summary="The web playground")
def page() -> Response:
    return Response(_asset("index.html"), media_type="text/html; charset=utf-8", headers=_PAGE_HEADERS)


@router.get("/playground/{name}", summary="A file of the web playground")
def asset(name: str) -> Response:
    media_type = ASSETS.get(name)
    if media_type is None:
        raise ApiError(404, "unknown_endpoint", f"the playground has no file {name!r}")
    return Response(_asset(name), media_type=media_type, headers=_PAGE_HEADERS)


@cache
def _asset(name: str) -> bytes:
    return (resources.files("memoryscope.server") / "playground" / name).read_bytes()
