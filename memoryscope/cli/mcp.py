"""`memoryscope mcp`: the memory service as an MCP server over stdio (see `memoryscope.mcp`).

    memoryscope mcp --config default --user ann           # what Claude Desktop, Cursor or Cline start
    memoryscope mcp --print-client-config --user ann      # the JSON block to paste into their settings
    memoryscope mcp --config config.json                  # MemoryOS's MCP server config (server_new.py's)

The user is `--user`, else the service's `human_name` (a MemoryOS config.json: its `user_id`); no
tool argument can change it. A `--config` ending in `.json` is MemoryOS's MCP config file
(`memoryscope.memoryos.read_mcp_config`): the `memoryos` config built from it as `Memoryos` builds
it, serving MemoryOS's tools and answers for its `user_id` and `assistant_id`.
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
    mcp.add_argument(
        "--config", default="default", help="config name or path, or MemoryOS's MCP config.json (default: default)"
    )
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
    if str(args.config).lower().endswith(".json"):
        return _memoryos_mcp(args, build_mcp, fixed_user, run_stdio)
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


def _memoryos_mcp(args: argparse.Namespace, build_mcp: Any, fixed_user: Any, run_stdio: Any) -> int:
    """`--config config.json`: MemoryOS's MCP server, for the file's user and assistant."""
    from memoryscope.memoryos import Memoryos, read_mcp_config

    if args.store:
        raise MemoryScopeError("--store does not apply to a MemoryOS config.json: set its data_storage_path")
    settings = read_mcp_config(args.config)
    if args.user:
        settings["user_id"] = args.user
    if settings.get("openai_api_key"):
        print(
            f"memoryscope: {args.config}: openai_api_key is written in the file; leave it empty to read "
            "OPENAI_API_KEY from the environment",
            file=sys.stderr,
        )
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the protocol's: nothing said while building may reach it
        memo = Memoryos(**settings)
    with memo:
        server = build_mcp(memo.scope, fixed_user(memo.user_id), target=memo.assistant_id)
        print(
            f"memoryscope: MemoryOS MCP server on stdio for user {memo.user_id!r}, assistant {memo.assistant_id!r} "
            f"({args.config}; data in {memo.data_storage_path})",
            file=sys.stderr,
            flush=True,
        )
        run_stdio(server)
    return 0
