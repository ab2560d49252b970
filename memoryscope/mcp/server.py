"""`build_mcp`: the MemoryScope MCP server (the official `mcp` SDK's `MCPServer`) for one scope.

    server = build_mcp(scope, fixed_user("ann"))     # stdio: `memoryscope mcp --user ann`
    server.run("stdio")

Six tools, named as MemoryOS's MCP server names them: add_memory, retrieve_memory,
get_user_profile, list_memory, delete_memory, consolidate_memory. For a service that keeps memory
MemoryOS's way (the `memoryos` config), the first three take MemoryOS's arguments and answer with
its JSON (`memoryscope.mcp.memoryos_tools`), for the assistant `target`. Whose memories a call reaches
is decided by `user_resolver` from the call's context (the command line's `--user`, or the HTTP
request's API key), never by an argument: a model could write any name into one. A failure the
caller can act on (a bad time, an unknown memory id, a model that failed) comes back as an MCP
tool error with a readable message; the server keeps serving.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from memoryscope import __version__
from memoryscope.door import Door, failure_of
from memoryscope.errors import MemoryScopeError
from memoryscope.mcp.memoryos_tools import MemoryosToolHandlers, error_answer
from memoryscope.mcp.tools import McpToolHandlers
from memoryscope.memory import MemoryTypeName

if TYPE_CHECKING:
    from memoryscope.app import MemoryScope

__all__ = ["build_mcp", "fixed_user", "UserResolver"]

logger = logging.getLogger("memoryscope.mcp")

UserResolver = Callable[[Context], str]
"""Whose memories a tool call reaches, from the call's context; raises `MemoryScopeError` to refuse it."""


INSTRUCTIONS = (
    "Long-term memory of the user you are talking with. Call add_memory after each exchange worth keeping, "
    "retrieve_memory before answering anything that may depend on what the user said earlier, and get_user_profile "
    "for what is known about them. Memories are time-stamped: [2024-10-26 21:26:20 Sat] text. The user is fixed by "
    "the server; no tool takes a user name."
)


def fixed_user(user: str) -> UserResolver:
    """A resolver for a server that serves one user (stdio: `--user`, or the config's human_name)."""
    if not user.strip():
        raise MemoryScopeError("the MCP server's user is empty; pass --user NAME")
    return lambda context: user


def _shows_detail(context: Context) -> bool:
    """Whether this call may see a server-side failure's detail (an upstream host and answer, a
    file's path): over stdio, the local user who runs it may; over HTTP, an admin key (or any
    caller of a server without keys), as the REST face decides (`memoryscope.server.errors`)."""
    try:
        request = context.request_context.request
    except (AttributeError, LookupError, ValueError):
        return True
    if request is None:
        return True
    state = getattr(request, "scope", {}).get("state") or {}
    return bool(state.get("shows_detail", False))


def build_mcp(
    scope: MemoryScope, user_resolver: UserResolver, workspace: str = "", door: Door | None = None, target: str = ""
) -> MCPServer:
    """The MCP server over `scope`'s verbs (or `door`: a server's, with its limits); each call's
    user from `user_resolver`; `target` the assistant whose memories they are (MemoryOS's
    `assistant_id`; "" for none)."""
    verbs = door or scope.door
    tools = McpToolHandlers(verbs, workspace, target)
    # the SDK calls logging.basicConfig(level=log_level); WARNING is Python's own default, so nothing changes for the host
    server: MCPServer = MCPServer("memoryscope", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    def run(context: Context, action: Callable[..., str], *args: Any) -> str:
        try:
            return action(user_resolver(context), *args)
        except MemoryScopeError as error:
            # the kind from the door's one table of failures, then what to do about it
            failure = failure_of(error)
            if failure.http_status >= 500 and not _shows_detail(context):
                incident = uuid.uuid4().hex[:12]
                logger.warning("incident %s: MCP tool failed: %s: %s", incident, failure.kind, error)
                raise ToolError(
                    f"{failure.kind}: the server failed on this call (incident {incident}; its log has the detail)"
                ) from None
            raise ToolError(f"{failure.kind}: {error}") from None

    if verbs.memoryos:
        _memoryos_tools(server, MemoryosToolHandlers(verbs, workspace, target), user_resolver)
    else:
        _memory_tools(server, tools, run)
    _shared_tools(server, tools, run)
    return server


Runner = Callable[..., str]


def _memory_tools(server: MCPServer, tools: McpToolHandlers, run: Runner) -> None:
    """add_memory, retrieve_memory, get_user_profile: MemoryScope's, answering in text."""

    @server.tool(
        structured_output=False,
        annotations=ToolAnnotations(title="Remember a turn", read_only_hint=False, destructive_hint=False),
    )
    def add_memory(
        user_input: Annotated[str, Field(min_length=1, description="What the user said, verbatim.")],
        ctx: Context,
        agent_response: Annotated[
            str | None, Field(description="Your reply to it, if any; stored as the assistant's message.")
        ] = None,
    ) -> str:
        """Store one exchange (the user's message and your reply) in the user's long-term memory.

        Facts about the user are drawn from stored messages in the background (or by consolidate_memory),
        so call this after every exchange that tells something about the user."""
        return run(ctx, tools.add_memory, user_input, agent_response)

    @server.tool(structured_output=False, annotations=ToolAnnotations(title="Retrieve memories", read_only_hint=True))
    def retrieve_memory(
        query: Annotated[str, Field(min_length=1, description="What to look for, in natural language.")],
        ctx: Context,
        since: Annotated[
            str | None,
            Field(
                description="Only memories from this time on: ISO 8601, e.g. 2024-10-26 or 2024-10-26T21:26:20+08:00 "
                "(no zone: the server's zone)."
            ),
        ] = None,
        until: Annotated[str | None, Field(description="Only memories up to this time (ISO 8601, as since).")] = None,
        top_k: Annotated[int, Field(ge=1, le=100, description="How many memories to return at most.")] = 10,
        threshold: Annotated[
            float | None, Field(ge=0, le=1, description="Only memories scored at least this (0 to 1); none: the best top_k.")
        ] = None,
    ) -> str:
        """The user's memories that best answer `query`, best first, one per line:
        `[time] text  (id: ID; type)`. Use before answering anything that depends on the user's past."""
        return run(ctx, tools.retrieve_memory, query, since, until, top_k, threshold)

    @server.tool(structured_output=False, annotations=ToolAnnotations(title="User profile", read_only_hint=True))
    def get_user_profile(ctx: Context) -> str:
        """What is known about the user as a person: the insights drawn from their conversations, newest first."""
        return run(ctx, tools.get_user_profile)


def _shared_tools(server: MCPServer, tools: McpToolHandlers, run: Runner) -> None:
    """list_memory, delete_memory, consolidate_memory: on every server."""

    @server.tool(structured_output=False, annotations=ToolAnnotations(title="List memories", read_only_hint=True))
    def list_memory(
        ctx: Context,
        type: Annotated[
            MemoryTypeName | None,
            Field(
                description="Only this kind: observation (facts), insight (profile), conversation (messages), "
                "obs_customized (added as given)."
            ),
        ] = None,
        limit: Annotated[int | None, Field(ge=1, description="At most this many, newest first.")] = None,
    ) -> str:
        """The user's stored memories, newest first, one per line: `[time] text  (id: ID; type)`."""
        return run(ctx, tools.list_memory, type, limit)

    @server.tool(
        structured_output=False,
        annotations=ToolAnnotations(title="Delete a memory", read_only_hint=False, destructive_hint=True, idempotent_hint=True),
    )
    def delete_memory(
        memory_id: Annotated[str, Field(min_length=1, description="The id shown by list_memory or retrieve_memory.")],
        ctx: Context,
    ) -> str:
        """Delete one of the user's memories, e.g. when the user asks you to forget something."""
        return run(ctx, tools.delete_memory, memory_id)

    @server.tool(structured_output=False, annotations=ToolAnnotations(title="Consolidate now", read_only_hint=False))
    def consolidate_memory(ctx: Context) -> str:
        """Draw facts about the user from the messages stored since the last consolidation, now (it calls a
        language model and may take a while). It also runs by itself in the background."""
        return run(ctx, tools.consolidate_memory)


def _memoryos_tools(server: MCPServer, tools: MemoryosToolHandlers, user_resolver: UserResolver) -> None:
    """add_memory, retrieve_memory, get_user_profile: MemoryOS's arguments, and its JSON answers
    (a failure too: `{"status": "error", "message": ...}`, as MemoryOS's server answers)."""

    def run(context: Context, doing: str, action: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
        try:
            user = user_resolver(context)
        except MemoryScopeError as error:  # a call refused is an MCP error, as on every server
            raise ToolError(f"{failure_of(error).kind}: {error}") from None
        try:
            return action(user, *args)
        except MemoryScopeError as error:
            failure = failure_of(error)
            if failure.http_status >= 500 and not _shows_detail(context):
                incident = uuid.uuid4().hex[:12]
                logger.warning("incident %s: MCP tool failed: %s: %s", incident, failure.kind, error)
                return error_answer(
                    f"Error {doing}: the server failed on this call (incident {incident}; its log has the detail)"
                )
            return error_answer(f"Error {doing}: {failure.kind}: {error}")

    @server.tool(annotations=ToolAnnotations(title="Remember a turn", read_only_hint=False, destructive_hint=False))
    def add_memory(
        user_input: Annotated[str, Field(description="What the user said.")],
        agent_response: Annotated[str, Field(description="What the assistant answered.")],
        ctx: Context,
        timestamp: Annotated[
            str | None, Field(description="When it was said: YYYY-MM-DD HH:MM:SS (default: now; no zone: the server's).")
        ] = None,
        meta_data: Annotated[dict[str, Any] | None, Field(description="Metadata kept with the turn (a JSON object).")] = None,
    ) -> dict[str, Any]:
        """Add a new memory to MemoryOS: one exchange between the user and the assistant, kept as a
        short-term page (older pages move to mid-term topics; hot topics update the user profile)."""
        return run(ctx, "adding memory", tools.add_memory, user_input, agent_response, timestamp, meta_data)

    @server.tool(annotations=ToolAnnotations(title="Retrieve memories", read_only_hint=True))
    def retrieve_memory(
        query: Annotated[str, Field(description="What to look for, in natural language.")],
        ctx: Context,
        relationship_with_user: Annotated[str, Field(description="The assistant's relationship to the user.")] = "friend",
        style_hint: Annotated[str, Field(description="A hint on the style of the answer.")] = "",
        max_results: Annotated[int, Field(ge=1, le=1000, description="At most this many of each kind of result.")] = 10,
    ) -> dict[str, Any]:
        """Retrieve the memories and context related to the query: the short-term memory, the user
        profile, the related mid-term pages and the related user and assistant knowledge."""
        return run(ctx, "retrieving memory", tools.retrieve_memory, query, relationship_with_user, style_hint, max_results)

    @server.tool(annotations=ToolAnnotations(title="User profile", read_only_hint=True))
    def get_user_profile(
        ctx: Context,
        include_knowledge: Annotated[bool, Field(description="Include the knowledge about the user.")] = True,
        include_assistant_knowledge: Annotated[bool, Field(description="Include the assistant's knowledge.")] = False,
    ) -> dict[str, Any]:
        """Get the user profile drawn from past conversations (personality, preferences, background),
        with the related knowledge."""
        return run(ctx, "getting user profile", tools.get_user_profile, include_knowledge, include_assistant_knowledge)
