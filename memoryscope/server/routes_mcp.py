"""`/mcp`: the MCP tools (`memoryscope.mcp`) over streamable HTTP, behind the REST API's checks.

    app = create_app(scope)                      # routes /mcp when the mcp extra is installed (`mcp_endpoint`)
    mount_mcp(app, app.state.memoryscope)        # builds the MCP server now, not at the first MCP call

Each request passes the same checks as every `/v1` endpoint (`memoryscope.server.state.caller`):
a valid key when keys are configured (401), its rate (429). Its user is the key's sole user, else
the `X-MemoryScope-User` header, which the key must reach (403; 400 when a key reaching several
users names none); without keys, that header or the service's `human_name`. No tool argument
names a user, so a model cannot reach anyone else. This module imports the MCP SDK; the endpoint
(`memoryscope.server.mcp_endpoint`) does not, until it is first called.
"""

from __future__ import annotations

from fastapi import FastAPI
from mcp.server.mcpserver import Context, MCPServer

from memoryscope.errors import MemoryScopeError
from memoryscope.mcp.server import build_mcp
from memoryscope.server.mcp_endpoint import MCP_PATH, USER_KEY, McpEndpoint
from memoryscope.server.state import ServerState

__all__ = ["mount_mcp", "build_for", "MCP_PATH"]


def mount_mcp(app: FastAPI, state: ServerState) -> MCPServer:
    """Serve `state.scope` over MCP at `/mcp` of `app` (not yet started), the server built now;
    its session manager runs inside the app's lifespan. A second call on the same app returns
    the first one's server."""
    endpoint = McpEndpoint.install(app, state)
    server: MCPServer = endpoint.server if endpoint.server is not None else endpoint.use(build_for(state))
    app.state.memoryscope_mcp = server
    return server


def build_for(state: ServerState) -> MCPServer:
    """The MCP server of `state.scope`, its session manager made (the endpoint runs it)."""
    server = build_mcp(state.scope, request_user, door=state.door)
    # builds the session manager; the Starlette app it returns is not used: the endpoint serves it, behind the keys
    server.streamable_http_app(streamable_http_path=MCP_PATH, host=state.settings.host)
    return server


def request_user(context: Context) -> str:
    """The user the endpoint checked for this call's HTTP request."""
    request = context.request_context.request
    user = getattr(request, "scope", {}).get(USER_KEY)
    if not isinstance(user, str):
        raise MemoryScopeError("this MCP call came without a checked user; call the server over its /mcp endpoint")
    return user
