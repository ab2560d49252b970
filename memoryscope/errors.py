"""The one exception family of MemoryScope.

Every error a user can cause names what to fix: the YAML path of a bad config value, the column
of a bad workflow string, the closest known name for a misspelt one, the backend, model and
endpoint of a failing model call. The messages of `ModelError` and `WorkerError` quote what a
server or a library said, which may hold an API key: they are scrubbed of every key MemoryScope
knows (see `memoryscope.scrubbing`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from difflib import get_close_matches

from memoryscope.scrubbing import scrub

__all__ = [
    "MemoryScopeError",
    "ConfigError",
    "WorkflowSyntaxError",
    "UnknownNameError",
    "WorkerError",
    "StoreError",
    "StoreConflict",
    "ModelError",
    "InvalidInputError",
    "TooLargeError",
    "TooManyError",
    "NotFoundError",
    "PermissionDeniedError",
    "closest",
    "shorten",
]

_WINDOW = 80  # characters of a value an error quotes


class MemoryScopeError(Exception):
    """Base class of every error raised on purpose by MemoryScope."""


class ConfigError(MemoryScopeError):
    """One or more problems in a config, each with its YAML path (`worker.rank.top_k`)."""

    def __init__(self, problems: Sequence[tuple[str, str]] | str, source: str | None = None):
        if isinstance(problems, str):
            problems = [("", problems)]
        self.problems: list[tuple[str, str]] = list(problems)
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        lines = [f"{path}: {message}" if path else message for path, message in self.problems]
        head = f"{self.source}: " if self.source else ""
        if len(lines) == 1:
            return head + lines[0]
        count = f"{len(lines)} problems in config"
        return f"{head}{count}:\n" + "\n".join(f"  - {line}" for line in lines)


class UnknownNameError(ConfigError):
    """A name that no registry knows; the message gives the closest known name."""

    def __init__(self, where: str, kind: str, name: str, known: Iterable[str]):
        known_sorted = sorted(known)
        self.name = name
        self.known = known_sorted
        close = closest(name, known_sorted)
        hint = f" Did you mean {close!r}?" if close else ""
        message = f"unknown {kind} {shorten(name)}.{hint} Known: {', '.join(known_sorted) or '(none)'}"
        super().__init__([(where, message)])


class WorkflowSyntaxError(ConfigError):
    """A workflow string that does not parse; points at the offending column (1-based)."""

    def __init__(self, workflow: str, column: int, message: str, where: str = ""):
        self.workflow = workflow
        self.column = column
        # a long workflow is quoted around the column only
        start = max(0, min(column - 1 - _WINDOW // 2, len(workflow) - _WINDOW))
        shown = ("…" if start else "") + workflow[start : start + _WINDOW] + ("…" if start + _WINDOW < len(workflow) else "")
        pointer = " " * (column - 1 - start + (1 if start else 0)) + "^"
        text = f"{message} at column {column}\n    {shown}\n    {pointer}"
        super().__init__([(where, text)])


class WorkerError(MemoryScopeError):
    """A worker failed while running; names the workflow (operation) and the worker."""

    def __init__(self, workflow: str, worker: str, cause: BaseException):
        self.workflow = workflow
        self.worker = worker
        self.cause = cause
        super().__init__(scrub(f"workflow {workflow!r}, worker {worker!r}: {type(cause).__name__}: {cause}"))


class ServiceClosed(MemoryScopeError):
    """The service (or its scheduler) is shutting down or shut: it takes no more work."""


class StoreError(MemoryScopeError):
    """A memory store could not do what was asked (bad path, failed write, model mismatch)."""


class InvalidInputError(MemoryScopeError, ValueError):
    """A verb was given something it cannot take (an empty text, a bad time, an unknown type).
    `code`: a stable word for machines (HTTP answers carry it), when more precise than the kind's."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class TooLargeError(InvalidInputError):
    """An input over a limit (a text's characters, `top_k`); says which limit and its key."""


class TooManyError(TooLargeError):
    """More items in one call than the limit (messages, texts, ids)."""


class NotFoundError(MemoryScopeError, LookupError):
    """What a verb was asked for does not exist for this caller (another user's memory is not found either)."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class PermissionDeniedError(MemoryScopeError, PermissionError):
    """The caller may not do this (a read-only caller asked to write, an admin verb without admin)."""


class StoreConflict(StoreError):
    """A compare-and-set write found the memory changed since it was read (by another process or
    thread): nothing was written; read again and redo the change."""

    def __init__(self, message: str, memory_ids: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.memory_ids = tuple(memory_ids)


class ModelError(MemoryScopeError):
    """A model call failed; names the backend, the model and the endpoint."""

    def __init__(self, backend: str, model: str, endpoint: str, message: str):
        self.backend = backend
        self.model = model
        self.endpoint = endpoint
        super().__init__(scrub(f"{backend} model {model!r} at {endpoint}: {message}"))


def shorten(value: object, limit: int = _WINDOW) -> str:
    """`repr(value)`, cut to about `limit` characters: `'aaaa…' (18432 characters)`."""
    text = repr(value)
    if len(text) <= limit:
        return text
    if isinstance(value, str):
        head = repr(value[:limit])
        return f"{head[:-1]}…{head[-1]} ({len(value)} characters)"
    return f"{text[:limit]}… ({len(text)} characters)"


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name most like `name`, if any is close enough to be a likely typo."""
    matches = get_close_matches(name, list(known), n=1, cutoff=0.6)
    return matches[0] if matches else None
