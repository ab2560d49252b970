"""Every error the server returns is JSON with a stable `code` and a message that says what to fix.

    {"error": {"code": "unknown_memory", "message": "no memory has the id 'ab12' ...", "type": "not_found"}}

The shape is also OpenAI's (`error.message`, `error.type`, `error.code`), so an OpenAI SDK reads
the chat endpoint's errors as its own. Library errors take their status and code from the door's
one table (`memoryscope.door.failures`): bad input 422, not found 404, a store that fails 503, a
model that fails 502; anything unexpected is 500 with no internals. A failure on the server's side
tells its detail (an upstream host and answer, a file's path) only to admin callers; others get
the code and an incident id to find the detail in the log (`for_caller`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from memoryscope.door import failure_of
from memoryscope.errors import MemoryScopeError, WorkerError

__all__ = ["ApiError", "error_body", "for_caller", "install_error_handlers"]

logger = logging.getLogger("memoryscope.server")

_TYPES = {
    400: "invalid_request",
    401: "authentication_error",
    403: "permission_denied",
    404: "not_found",
    405: "invalid_request",
    409: "conflict",
    413: "invalid_request",
    422: "invalid_request",
    429: "rate_limit_exceeded",
    500: "server_error",
    502: "upstream_error",
    503: "unavailable",
}


class ApiError(Exception):
    """An answer that is an error: its status, its stable `code`, a message saying what to fix."""

    def __init__(self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})


def error_body(status: int, code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "type": _TYPES.get(status, "error")}}


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error_body(error.status, error.code, error.message), status_code=error.status, headers=error.headers)


# How the HTTP face words some kinds of failure (the status and code come from the door's table).
_WORDING = {
    "model_error": "a model call failed: {}",
    "store_error": "the memory store failed: {}",
    "shutting_down": "the server is shutting down ({}); retry against another replica or later",
    "busy": "{}; it waits at most the service's lease_wait_s",
}


def library_error(error: MemoryScopeError) -> ApiError:
    """The HTTP face of an error the library raised: its status and code from `memoryscope.door`'s
    one table of failures."""
    failure = failure_of(error)
    cause = error.cause if isinstance(error, WorkerError) and failure.kind != "operation_failed" else error
    message = _WORDING.get(failure.kind, "{}").format(cause)
    headers = {"Retry-After": "5"} if failure.kind == "busy" else None
    return ApiError(failure.http_status, failure.kind, message, headers=headers)


# What a caller who may not see the detail is told of a failure on the server's side.
_PUBLIC = {
    "model_error": "a model call failed",
    "store_error": "the memory store failed",
    "shutting_down": "the server is shutting down; retry against another replica or later",
    "operation_failed": "the operation failed",
}


def for_caller(request: Request, error: ApiError) -> ApiError:
    """`error` as this request's caller may see it. A failure on the server's side (5xx) says
    what failed in detail (upstream hosts and answers, file paths) only to an admin caller (an
    admin key, or anyone when the server has no keys); others get its code and an incident id
    the log carries beside the detail."""
    if error.status < 500 or getattr(request.state, "shows_detail", False):
        return error
    incident = uuid.uuid4().hex[:12]
    logger.warning("incident %s: %s %s answered %s: %s", incident, request.method, request.url.path, error.code, error.message)
    said = _PUBLIC.get(error.code, "the server failed on this request")
    return ApiError(error.status, error.code, f"{said} (incident {incident}; the server's log has the detail)", error.headers)


def validation_message(errors: Sequence[Any]) -> tuple[str, str]:
    """(code, message) for pydantic's list of body or parameter problems."""
    if any(item.get("type") == "json_invalid" for item in errors):
        item = next(item for item in errors if item.get("type") == "json_invalid")
        detail = item.get("ctx", {}).get("error", "")
        return "invalid_json", f"the body is not valid JSON ({detail}); send a JSON object with Content-Type: application/json"
    not_an_object = ("model_attributes_type", "dict_type")
    if any(tuple(item.get("loc", ())) == ("body",) and item.get("type") in not_an_object for item in errors):
        return "invalid_request", "the body must be a JSON object (Content-Type: application/json); see /docs for its fields"
    parts = []
    for item in errors[:10]:
        where = ".".join(str(part) for part in item.get("loc", ()) if part != "body") or "body"
        text = str(item.get("msg", "invalid"))
        if item.get("type") == "extra_forbidden":
            text = "unknown field; remove it (see /docs for the fields this endpoint takes)"
        elif item.get("type") == "missing":
            text = "required field is missing"
        parts.append(f"{where}: {text}")
    more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
    return "invalid_request", "; ".join(parts) + more


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, error: ApiError) -> JSONResponse:
        return error_response(for_caller(request, error))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        code, message = validation_message(list(error.errors()))
        return error_response(ApiError(422, code, message))

    @app.exception_handler(MemoryScopeError)
    async def _library(request: Request, error: MemoryScopeError) -> JSONResponse:
        api_error = library_error(error)
        if api_error.status >= 500 and getattr(request.state, "shows_detail", False):
            logger.warning("%s %s: %s", request.method, request.url.path, error)
        return error_response(for_caller(request, api_error))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        if error.status_code == 404:
            message = f"no endpoint {request.method} {request.url.path}; the API is listed at /docs"
            return error_response(ApiError(404, "unknown_endpoint", message))
        if error.status_code == 400:  # FastAPI's answer to a body it cannot decode (not UTF-8, nested too deep)
            message = "the body could not be read as JSON; send a UTF-8 JSON object with Content-Type: application/json"
            return error_response(ApiError(422, "invalid_json", message))
        if error.status_code == 405:
            return error_response(ApiError(405, "method_not_allowed", f"{request.method} is not allowed on {request.url.path}"))
        return error_response(ApiError(error.status_code, "http_error", str(error.detail)))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        logger.exception("%s %s failed", request.method, request.url.path)
        message = f"the server failed on this request ({type(error).__name__}); see the server's log"
        return error_response(ApiError(500, "internal_error", message))
