"""`/v1`: a user's messages and memories — store, search, list, add, get, update, delete.

Every route names the user in its path (`/v1/users/{user}/...`) and takes `workspace` and
`target` as query parameters (default ""), as the library does; a memory's own routes
(`/v1/memories/{id}`) reach it only when the caller's key reaches its user and workspace, and
answer 404 otherwise, so a key cannot even learn that another user's memory exists.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse

from memoryscope.errors import StoreError
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.memory_api import MemoryRecord
from memoryscope.server.errors import ApiError
from memoryscope.server.schemas import AddMemories, SearchBody, StoreMessages, UpdateMemory
from memoryscope.server.state import Caller, CallerDep, ServerState, state_of
from memoryscope.stores.base import MemoryFilter, MemoryStore
from memoryscope.stores.metadata import metadata_conditions

__all__ = ["router", "UserPath", "Workspace", "Target", "require_known_user", "records", "check_text"]

router = APIRouter(prefix="/v1", tags=["memories"])

UserPath = Annotated[str, Path(min_length=1, max_length=256, description="Whose memories.")]
Workspace = Annotated[str, Query(max_length=256, description="The user's workspace (default: none).")]
Target = Annotated[str, Query(max_length=256, description="Whom the memories are about, when not the user (default: none).")]


def store_of(state: ServerState) -> MemoryStore:
    if state.scope.store is None:
        raise ApiError(503, "no_store", f"{state.scope.config.source} has no memory_store; configure one to serve memories")
    return state.scope.store


def require_known_user(state: ServerState, user: str, workspace: str = "", target: str = "") -> None:
    """404 when the user has no memory (of any status) in this workspace and target."""
    scope = MemoryFilter(user_name=user, target_name=target, workspace=workspace)
    if store_of(state).count(scope) == 0:
        where = f" in workspace {workspace!r}" if workspace else ""
        raise ApiError(404, "unknown_user", f"user {user!r} has no memories{where}; store messages or add memories first")


def records(found: list[MemoryRecord]) -> list[dict[str, Any]]:
    return [record.to_dict() for record in found]


def aware(state: ServerState, moment: datetime | None) -> datetime | None:
    """A time given without a zone is read in the config's zone."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=state.scope.config.settings.tzinfo)


def _reachable_node(state: ServerState, who: Caller, memory_id: str) -> MemoryNode:
    found = store_of(state).get([memory_id])
    if not found or not who.permits(found[0].user_name, found[0].workspace):
        raise ApiError(404, "unknown_memory", f"no memory has the id {memory_id!r} (for this API key)")
    return found[0]


def checked_filters(filters: Any) -> Any:
    """`filters` as given, once the library has read them (it raises StoreError for a bad one: the caller's 422, not a 503)."""
    try:
        metadata_conditions(filters)
    except StoreError as error:
        raise ApiError(422, "invalid_filter", str(error)) from None
    return filters


def parsed_filters(text: str | None) -> Any:
    """The `filters` query parameter: a JSON object, as a search body's `filters`."""
    if not text:
        return None
    try:
        filters = json.loads(text)
    except ValueError as error:
        raise ApiError(422, "invalid_filter", f'filters must be a JSON object, e.g. {{"source": "crm"}} ({error})') from None
    if not isinstance(filters, dict):
        raise ApiError(422, "invalid_filter", f"filters must be a JSON object, got {type(filters).__name__}")
    return checked_filters(filters)


def check_text(state: ServerState, text: str, what: str = "query") -> None:
    limit = state.settings.max_query_chars
    if len(text) > limit:
        raise ApiError(422, "query_too_long", f"the {what} has {len(text)} characters; at most {limit} (server.max_query_chars)")


# -- a user's messages and memories --------------------------------------------------------------


@router.post("/users/{user}/messages", status_code=201, summary="Store messages of a conversation")
def store_messages(
    user: UserPath, body: StoreMessages, request: Request, who: CallerDep, workspace: Workspace = "",
    target: Target = "",
) -> dict[str, Any]:  # fmt: skip
    """Keep the messages as the user's conversation; consolidation learns from them by its triggers.
    A message already stored (same speaker, time and text) is not stored twice."""
    state = state_of(request)
    who.require(user, workspace)
    limit = state.settings.max_messages_per_request
    if len(body.messages) > limit:
        message = f"{len(body.messages)} messages in one request; at most {limit} (server.max_messages_per_request)"
        raise ApiError(413, "too_many_messages", message)
    for said in body.messages:
        check_text(state, said.content, "message")
    given = [
        {"role": message.role, "content": message.content, "time": aware(state, message.time), "name": message.name}
        for message in body.messages
    ]
    stored = state.scope.add(given, user_id=user, metadata=body.metadata, infer=True, target_name=target, workspace=workspace)
    return {"stored": records(stored), "count": len(stored)}


@router.post("/users/{user}/search", summary="Retrieve memories for a query")
def search(
    user: UserPath, body: SearchBody, request: Request, who: CallerDep, workspace: Workspace = "",
    target: Target = "",
) -> JSONResponse:  # fmt: skip
    """The configured retrieval (`retrieve_memory`): the best `top_k` memories for the query, with
    their time-stamped text (`text`) and structured fields."""
    state = state_of(request)
    who.require(user, workspace)
    check_text(state, body.query)
    if body.top_k > state.settings.max_top_k:
        raise ApiError(422, "top_k_too_large", f"top_k {body.top_k} is over {state.settings.max_top_k} (server.max_top_k)")
    checked_filters(body.filters)
    since, until = aware(state, body.since), aware(state, body.until)
    if since is not None and until is not None and since > until:
        raise ApiError(422, "invalid_time_range", f"since ({since.isoformat()}) is after until ({until.isoformat()}); swap them")
    found = state.scope.search(
        body.query, user_id=user, top_k=body.top_k, filters=body.filters, types=body.types,
        time_range=(since, until) if since or until else None, query_time=aware(state, body.query_time),
        target_name=target, workspace=workspace,
    )  # fmt: skip
    if not found:  # only then is it worth a count: is the user unknown, or did nothing match?
        require_known_user(state, user, workspace, target)
    # the records are JSON-ready already: skip FastAPI's generic encoding (a third of a search's HTTP cost)
    return JSONResponse({"memories": records(found)})


@router.get("/users/{user}/memories", summary="List a user's memories")
def list_memories(
    user: UserPath, request: Request, who: CallerDep, workspace: Workspace = "", target: Target = "",
    type: Annotated[list[MemoryType] | None, Query(description="Only these types (repeatable).")] = None,
    limit: Annotated[int | None, Query(ge=0, le=100_000)] = None, include_expired: bool = False,
    filters: Annotated[str | None, Query(description='On metadata, as JSON: {"source": "crm", "rating": {"gte": 3}}.')] = None,
) -> dict[str, Any]:  # fmt: skip
    """Newest first; expired memories (replaced by newer ones) only with `include_expired=true`."""
    state = state_of(request)
    who.require(user, workspace)
    wanted = parsed_filters(filters)
    require_known_user(state, user, workspace, target)
    found = state.scope.get_all(
        user, filters=wanted, types=type, include_expired=include_expired, limit=limit, target_name=target, workspace=workspace
    )
    return {"memories": records(found)}


@router.post("/users/{user}/memories", status_code=201, summary="Add memories as given")
def add_memories(
    user: UserPath, body: AddMemories, request: Request, who: CallerDep, workspace: Workspace = "",
    target: Target = "",
) -> dict[str, Any]:  # fmt: skip
    """Each text becomes one memory of type `obs_customized`, stored as written."""
    state = state_of(request)
    who.require(user, workspace)
    if len(body.texts) > state.settings.max_messages_per_request:
        raise ApiError(413, "too_many_messages", f"at most {state.settings.max_messages_per_request} texts a request")
    for text in body.texts:
        check_text(state, text, "text")
    added = state.scope.add(
        body.texts, user_id=user, metadata=body.metadata, infer=False, time=aware(state, body.time),
        target_name=target, workspace=workspace,
    )  # fmt: skip
    return {"added": records(added), "count": len(added)}


@router.delete("/users/{user}/memories", summary="Delete all of a user's memories")
def delete_all(
    user: UserPath, request: Request, who: CallerDep, workspace: Workspace = "", target: Target = ""
) -> dict[str, Any]:
    state = state_of(request)
    who.require(user, workspace)
    require_known_user(state, user, workspace, target)
    return {"deleted": state.scope.delete_all(user, target_name=target, workspace=workspace)}


# -- one memory ----------------------------------------------------------------------------------

MemoryId = Annotated[str, Path(min_length=1, max_length=128)]


@router.get("/memories/{memory_id}", summary="Get one memory")
def get_memory(memory_id: MemoryId, request: Request, who: CallerDep) -> dict[str, Any]:
    state = state_of(request)
    _reachable_node(state, who, memory_id)
    record = state.scope.get(memory_id)
    if record is None:
        raise ApiError(404, "unknown_memory", f"no memory has the id {memory_id!r}")
    return record.to_dict()


@router.patch("/memories/{memory_id}", summary="Change a memory's text or metadata")
def update_memory(memory_id: MemoryId, body: UpdateMemory, request: Request, who: CallerDep) -> dict[str, Any]:
    state = state_of(request)
    _reachable_node(state, who, memory_id)
    if body.text is not None:
        check_text(state, body.text, "text")
    return state.scope.update(memory_id, body.text, metadata=body.metadata).to_dict()


@router.delete("/memories/{memory_id}", summary="Delete one memory")
def delete_memory(memory_id: MemoryId, request: Request, who: CallerDep) -> dict[str, Any]:
    state = state_of(request)
    _reachable_node(state, who, memory_id)
    return {"deleted": state.scope.delete(memory_id), "id": memory_id}


@router.get("/memories/{memory_id}/history", summary="Every change to one memory")
def memory_history(memory_id: MemoryId, request: Request, who: CallerDep) -> dict[str, Any]:
    """Oldest first; a deleted memory's history too (whose it was comes from the changes themselves)."""
    state = state_of(request)
    changes = state.scope.history(memory_id)
    owners = {(change.user_name, change.workspace) for change in changes}
    if not changes or not all(who.permits(user, workspace) for user, workspace in owners):
        raise ApiError(404, "unknown_memory", f"no memory has the id {memory_id!r} (for this API key)")
    return {"changes": [change.to_dict() for change in changes]}
