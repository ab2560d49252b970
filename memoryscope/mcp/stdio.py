"""`memoryscope mcp` over stdio: the SDK's transport, with every request answered.

The SDK's stdio transport drops a line it cannot read as a JSON-RPC message, so its caller waits
for an answer that never comes: a line that is not JSON, or one whose JSON holds half of a UTF-16
pair (an escape like `\\ud800` with no partner), which no text can carry. Here each line is read
first: such a request is answered at once with the JSON-RPC error it deserves (-32700 parse
error, -32602 invalid params naming the character), and the server goes on.

The wire is kept to the protocol as the SDK keeps it: while serving, the process's own stdin reads
nothing and its stdout goes to stderr, so a stray `print` cannot corrupt a message.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import contextmanager
from typing import IO, Any

import anyio
import anyio.to_thread

__all__ = ["run_stdio", "problem_of"]

PARSE_ERROR = -32700
INVALID_PARAMS = -32602


def run_stdio(server: Any) -> None:
    """Serve `server` (the SDK's `MCPServer`) on this process's stdin and stdout until stdin closes."""
    lowlevel = getattr(server, "_lowlevel_server", None)
    if lowlevel is None:  # an SDK laid out otherwise: its own transport, as it is
        server.run("stdio")
        return
    with _wire() as (wire_in, wire_out):
        anyio.run(_serve, lowlevel, wire_in, wire_out)


async def _serve(lowlevel: Any, wire_in: IO[bytes], wire_out: IO[bytes]) -> None:
    from mcp.server.stdio import stdio_server

    out = _Lines(wire_out)
    async with stdio_server(stdin=_CheckedLines(wire_in, out), stdout=out) as (read, write):  # type: ignore[arg-type]
        await lowlevel.run(read, write, lowlevel.create_initialization_options())


def problem_of(line: str) -> dict[str, Any] | None:
    """The JSON-RPC error answering `line`, or None when it is a message the SDK can read."""
    try:
        message = json.loads(line)
    except ValueError as error:
        return _error(None, PARSE_ERROR, f"Parse error: the line is not JSON ({error})")
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as error:
        where = f"an unpaired surrogate {error.object[error.start]!r}"
        request_id = message.get("id") if isinstance(message, dict) else None
        return _error(
            request_id, INVALID_PARAMS, f"Invalid params: the request is not valid Unicode ({where}); send UTF-8 text"
        )
    return None


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


class _Lines:
    """The wire out: whole lines, one writer at a time (the SDK's and this module's answers)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = anyio.Lock()

    async def write(self, text: str) -> None:
        async with self._lock:
            await anyio.to_thread.run_sync(self._stream.write, text.encode("utf-8"))

    async def flush(self) -> None:
        async with self._lock:
            await anyio.to_thread.run_sync(self._stream.flush)


class _CheckedLines:
    """The wire in, line by line; a line the SDK would drop is answered here instead of passed on."""

    def __init__(self, stream: IO[bytes], out: _Lines) -> None:
        self._stream = stream
        self._out = out

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        while raw := await anyio.to_thread.run_sync(self._stream.readline):
            line = raw.decode("utf-8", errors="replace")
            if not line.strip():
                continue
            problem = problem_of(line)
            if problem is None:
                yield line
                continue
            if "id" in problem and (problem["id"] is not None or problem["error"]["code"] == PARSE_ERROR):
                await self._out.write(json.dumps(problem) + "\n")
                await self._out.flush()


@contextmanager
def _wire() -> Any:
    """Private copies of fd 0 and 1 for the protocol; fd 0 then reads nothing and fd 1 goes to
    stderr until serving ends, when both are put back."""
    sys.stdout.flush()
    saved = os.dup(0), os.dup(1)
    wire_in_fd, wire_out_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    try:
        with os.fdopen(wire_in_fd, "rb") as wire_in, os.fdopen(wire_out_fd, "wb") as wire_out:
            yield wire_in, wire_out
    finally:
        sys.stdout.flush()
        for fd, original in zip((0, 1), saved, strict=True):
            os.dup2(original, fd)
            os.close(original)
