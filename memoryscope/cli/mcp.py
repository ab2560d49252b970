"""`memoryscope mcp`: the memory service as an MCP server over stdio (see `memoryscope.mcp`).

    memoryscope mcp --config default --user ann           # what Claude Desktop, Cursor or Cline start
    memoryscope mcp --print-client-config --user ann      # the JSON block to paste into their settings

The user is `--user`, else the service's `human_name`; no tool argument can change it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from memoryscope.errors import MemoryScopeError

__all__ = ["add_mcp_commands"]


def add_mcp_commands(commands: Any) -> None:
    mcp = commands.add_parser("mcp", help="serve the memory service over MCP (stdio), for Claude Desktop, Cursor, Cline")
    mcp.add_argument("--config", default="default", help="config name or path (default: default)")
    mcp.add_argument("--user", default=None, help="whose memories (default: the service's human_name)")
    mcp.add_argument("--store", default=None, help="SQLite file to use instead of the config's")
    mcp.add_argument(
        "--print-client-config", action="store_true", help="print the mcpServers JSON block for an MCP client, and exit"
    )
    mcp.set_defaults(handler=_mcp)


def _mcp(args: argparse.Namespace) -> int:
    if args.print_client_config:
        from memoryscope.mcp.client_config import client_config

        print(json.dumps(client_config(args.config, args.user, args.store), indent=2))
        return 0
    try:
        from memoryscope.mcp.server import build_mcp, fixed_user
        from memoryscope.mcp.stdio import run_stdio
    except ImportError as error:
        raise MemoryScopeError(
            f"`memoryscope mcp` needs the mcp extra ({error.name} is missing): pip install 'memoryscope[mcp]'"
        ) from None
    from memoryscope.app import MemoryScope

    overrides = {"memory_store.path": args.store} if args.store else None
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the protocol's: nothing said while building may reach it
        scope = MemoryScope(args.config, overrides=overrides)
    with scope:
        user = scope.door.caller(args.user).user_id  # the one rule: --user, else the service's human_name
        server = build_mcp(scope, fixed_user(user))
        print(f"memoryscope: MCP server on stdio for user {user!r} ({scope.config.source})", file=sys.stderr, flush=True)
        run_stdio(server)
    return 0
