"""One table maps each kind of error to what every face answers: the CLI's exit code, the HTTP
status and stable `code`, and the MCP tool error's kind. Faces look an error up here; none keeps
its own mapping."""

from __future__ import annotations

from dataclasses import dataclass

from memoryscope.errors import (
    InvalidInputError,
    MemoryScopeError,
    ModelError,
    NotFoundError,
    PermissionDeniedError,
    ServiceClosed,
    StoreConflict,
    StoreError,
    TooLargeError,
    TooManyError,
    WorkerError,
)
from memoryscope.leases import LeaseBusy

__all__ = ["Failure", "FAILURES", "failure_of", "EXIT_OK", "EXIT_NOT_FOUND", "EXIT_MISUSE", "EXIT_FAILED"]

EXIT_OK, EXIT_NOT_FOUND, EXIT_MISUSE, EXIT_FAILED = 0, 1, 2, 3


@dataclass(frozen=True)
class Failure:
    """How the faces answer one kind of error."""

    kind: str  # a stable word: the HTTP `code` default and the MCP error's prefix
    exit_code: int
    http_status: int


# Most specific first: the first class an error is an instance of decides.
FAILURES: tuple[tuple[type[BaseException], Failure], ...] = (
    (NotFoundError, Failure("not_found", EXIT_NOT_FOUND, 404)),
    (TooManyError, Failure("too_many", EXIT_MISUSE, 413)),
    (TooLargeError, Failure("too_large", EXIT_MISUSE, 422)),
    (PermissionDeniedError, Failure("forbidden", EXIT_MISUSE, 403)),
    (InvalidInputError, Failure("invalid_request", EXIT_MISUSE, 422)),
    (LeaseBusy, Failure("busy", EXIT_FAILED, 409)),
    (StoreConflict, Failure("conflict", EXIT_FAILED, 409)),
    (ServiceClosed, Failure("shutting_down", EXIT_FAILED, 503)),
    (ModelError, Failure("model_error", EXIT_FAILED, 502)),
    (StoreError, Failure("store_error", EXIT_FAILED, 503)),
    (WorkerError, Failure("operation_failed", EXIT_FAILED, 500)),
    (MemoryScopeError, Failure("invalid_request", EXIT_MISUSE, 422)),
)


def failure_of(error: BaseException) -> Failure:
    """The faces' answer to `error` (a failed worker answers as what made it fail); an error's own
    `code`, when it has one, is the more precise kind."""
    cause = error.cause if isinstance(error, WorkerError) and isinstance(error.cause, MemoryScopeError) else error
    for kind, failure in FAILURES:
        if isinstance(cause, kind):
            code = getattr(cause, "code", "")
            return Failure(code, failure.exit_code, failure.http_status) if isinstance(code, str) and code else failure
    return Failure("server_error", EXIT_FAILED, 500)
