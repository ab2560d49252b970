"""MemoryScope as an MCP server (Model Context Protocol), on the official `mcp` SDK.

    memoryscope mcp --config default --user ann            # stdio, for Claude Desktop, Cursor, Cline
    memoryscope mcp --print-client-config --user ann       # the JSON block those clients need

`build_mcp(scope, user_resolver)` makes the server; `memoryscope.server.routes_mcp.mount_mcp(app, state)`
serves it at `/mcp` of the FastAPI app, key-scoped like the REST API. Needs the mcp extra
(`pip install 'memoryscope[mcp]'`); `client_config` does not, so the JSON block prints without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memoryscope.mcp.server import UserResolver, build_mcp, fixed_user

__all__ = ["build_mcp", "fixed_user", "UserResolver"]


def __getattr__(name: str) -> Any:
    # lazily: importing `memoryscope.mcp.client_config` must not need the SDK
    if name in __all__:
        from memoryscope.mcp import server

        return getattr(server, name)
    raise AttributeError(f"module 'memoryscope.mcp' has no attribute {name!r}")
