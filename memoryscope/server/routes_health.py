"""`/healthz` (the process answers), `/readyz` (the store and the models can be reached) and
`/metrics` (Prometheus text, admin keys only)."""

from __future__ import annotations

import socket
import time
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from memoryscope.server.metrics import CONTENT_TYPE
from memoryscope.server.state import AdminDep, state_of

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The server is alive")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="The store and the models can be reached")
def readyz(request: Request) -> JSONResponse:
    """200 when the store answers a read and every remote model's host accepts a connection (no
    request is sent to a model: a probe costs no tokens); 503 naming what failed otherwise."""
    state = state_of(request)
    checks: dict[str, Any] = {}
    if state.scope.store is not None:
        checks["store"] = _timed(state.door.probe_store)
    for name, model in state.scope.models.items():
        checks[f"model.{name}"] = _timed(lambda endpoint=model.endpoint: _reach(endpoint))
    ready = all(check["ok"] for check in checks.values())
    return JSONResponse({"ready": ready, "checks": checks}, status_code=200 if ready else 503)


@router.get("/metrics", summary="Prometheus metrics (admin keys only)")
def metrics(request: Request, who: AdminDep) -> Response:
    state = state_of(request)
    return Response(state.metrics.render(state.scope), media_type=CONTENT_TYPE)


def _timed(probe: Any) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        probe()
    except Exception as error:  # a failed probe is the answer, not a failure of /readyz
        return {"ok": False, "error": f"{type(error).__name__}: {error}"[:300]}
    return {"ok": True, "seconds": round(time.perf_counter() - started, 4)}


def _reach(endpoint: str) -> None:
    """Connect to a remote model's host and port (local models have nothing to reach)."""
    if not endpoint.startswith(("http://", "https://")):
        return
    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    with socket.create_connection((parts.hostname or "", port), timeout=2.0):
        pass
