"""`/v1`: run an operation by name, a user's profile, tiers and agent blocks, what waits and ran for a user, an export of
a user's memories and their history as JSON lines (streamed), and the config in use (secrets
hidden). A face over `memoryscope.door`, as `routes_memory`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import StreamingResponse

from memoryscope.memory_types import memory_type_specs
from memoryscope.server.config_view import describe_config
from memoryscope.server.routes_memory import Target, UserPath, Workspace, require_known_user
from memoryscope.server.schemas import BlockBody, OperationBody
from memoryscope.server.state import AdminDep, CallerDep, state_of

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["operations"])


@router.get("/operations", summary="The operations this server runs")
def operations(request: Request, who: CallerDep) -> dict[str, Any]:
    """Every configured operation (`backend`: run in the background by triggers), and the memory
    policy the service keeps (`memoryscope`, `memoryos` or `agent`)."""
    state = state_of(request)
    service = state.service
    described = service.op_description_dict
    return {
        "service": service.name,
        "policy": state.door.policy,
        "operations": [
            {"name": name, "backend": operation.backend, "description": described.get(name, "")}
            for name, operation in service.operations.items()
        ],
    }


@router.get("/memory-types", summary="The memory types this server knows, in the order listings show them")
def memory_types(who: CallerDep) -> dict[str, Any]:
    """Every registered memory type (`memoryscope.memory_types`: MemoryScope's, and those of the
    capabilities this server's workers belong to): its name, its label per language, whether
    listings show it when no types are asked for, and the package that registered it."""
    return {
        "memory_types": [
            {"name": spec.name, "labels": dict(spec.labels), "listed": spec.listed, "owner": spec.owner}
            for spec in memory_type_specs()
        ]
    }


@router.get("/config", summary="The config in use, secrets hidden (admin keys only)")
def config(request: Request, who: AdminDep) -> dict[str, Any]:
    """Every model, store, worker, operation and chat with its class and parameters (defaults
    filled in); API keys, passwords and tokens show `***`, URLs lose their passwords."""
    return describe_config(state_of(request).scope.config)


@router.post("/users/{user}/operations/{name}", summary="Run an operation by name")
def run_operation(
    user: UserPath, name: str, request: Request, who: CallerDep, body: OperationBody | None = None,
    workspace: Workspace = "", target: Target = "",
) -> dict[str, Any]:  # fmt: skip
    """Runs a configured operation (`retrieve_memory`, `consolidate_memory`, `list_memory`, ...)
    for the user; returns its result, the memories it produced and each worker's seconds. A
    backend operation runs now, under the user's lease (one backend run per user at a time)."""
    state = state_of(request)
    caller = who.for_user(state, user, workspace, target)
    given = (body or OperationBody()).model_dump()  # what was not given is left out by the door
    return state.door.run_summary(caller, name, **given).to_dict()


@router.get("/users/{user}/profile", summary="The user's profile, by the memory policy")
def profile(
    user: UserPath, request: Request, who: CallerDep, workspace: Workspace = "", target: Target = ""
) -> dict[str, Any]:
    """What is known about the user: reflection's insights (`insights`, newest first), MemoryOS's
    profile and knowledge under a MemoryOS config, the agent's `human` block under an agent config;
    `policy` says which, `text` is the profile as one text."""
    state = state_of(request)
    caller = who.for_user(state, user, workspace, target)
    require_known_user(state, caller)
    found = state.door.profile(caller)
    return {**found.to_dict(), "insights": [record.to_dict() for record in found.records if record.memory_type == "insight"]}


@router.get("/users/{user}/tiers", summary="A user's memories by the memory policy's tiers")
def tiers(
    user: UserPath, request: Request, who: CallerDep, workspace: Workspace = "", target: Target = ""
) -> dict[str, Any]:
    """Under MemoryOS: the short-term pages oldest first, the mid-term segments hottest first (each
    with `heat`, `visits`, `interaction_length`, its `pages` and `due_for_promotion`), the long-term `profile` and
    `knowledge`, and `heat_threshold`, the heat at which a segment is promoted. Under another
    policy the tiers are empty and `policy` names it."""
    state = state_of(request)
    caller = who.for_user(state, user, workspace, target)
    require_known_user(state, caller)
    return state.door.tiers(caller).to_dict()


@router.get("/users/{user}/blocks", summary="The agent's core memory blocks (agent configs)")
def blocks(user: UserPath, request: Request, who: CallerDep, target: Target = "") -> dict[str, Any]:
    """Each block by name, in the config's order: its text (`value`), `size` and `limit` in characters."""
    state = state_of(request)
    caller = who.for_user(state, user, "", target)
    return {"blocks": [block.to_dict() for block in state.door.blocks(caller)]}


@router.put("/users/{user}/blocks/{name}", summary="Set a core memory block's whole text (agent configs)")
def set_block(
    user: UserPath, name: Annotated[str, Path(min_length=1, max_length=64)], body: BlockBody, request: Request,
    who: CallerDep, target: Target = "",
) -> dict[str, Any]:  # fmt: skip
    """Within the block's limit, as the agent's own tools: over it, or an unknown block, is a 422
    that says so."""
    state = state_of(request)
    caller = who.for_user(state, user, "", target)
    return state.door.set_block(caller, name, body.value).to_dict()


@router.get("/users/{user}/status", summary="What waits and what ran for a user")
def status(
    user: UserPath, request: Request, who: CallerDep, workspace: Workspace = "", target: Target = ""
) -> dict[str, Any]:
    """Pending, backing-off and parked messages, unreflected observations and the runs that changed
    the user's memories, read from the store (any process's); what this server runs for them now."""
    state = state_of(request)
    caller = who.for_user(state, user, workspace, target)
    require_known_user(state, caller)
    now = state.service.scheduler.status()
    return {
        **state.door.status(caller).to_dict(),
        "scheduler": {"enabled": now.enabled, "started": now.started, "closed": now.closed},
    }


@router.get("/users/{user}/export", summary="Export a user's memories as JSON lines (streamed)")
def export(
    user: UserPath, request: Request, who: CallerDep, workspace: Workspace = "", target: Target = ""
) -> StreamingResponse:
    """The user's memories (every status) in this workspace and their history, one JSON object a
    line, as `memoryscope export` writes them (a header line first, an end line with the counts
    last), so `memoryscope import` reads the file back. Streamed: memory is bounded, whatever the size."""
    state = state_of(request)
    caller = who.for_user(state, user, workspace, target)
    require_known_user(state, caller)
    filename = f"memories-{''.join(c if c.isalnum() or c in '-_' else '_' for c in user)[:64]}.jsonl"
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    return StreamingResponse(state.door.export_lines(caller), media_type="application/x-ndjson", headers=headers)

