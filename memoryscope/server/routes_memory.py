"""`/v1`: a user's messages and memories — store, search, list, add, get, update, pin, delete.

A face over `memoryscope.door`: each route turns its path, query and body into a verb's caller
and inputs, and the verb's record into JSON. Every route names the user in its path
(`/v1/users/{user}/...`) and takes `workspace` and `target` as query parameters (default ""), as
the library does; a memory's own routes (`/v1/memories/{id}`) reach it only when the caller's key
reaches its user and workspace, and answer 404 otherwise, so a key cannot even learn that another
user's memory exists.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.responses import JSONResponse

from memoryscope.door import Caller, MemoryRecord
from memoryscope.memory import MemoryType
from memoryscope.server.accepted_writes import idempotency_key_of
from memoryscope.server.errors import ApiError
from memoryscope.server.schemas import AddMemories, SearchBody, StoreMessages, UpdateMemory
from memoryscope.server.state import CallerDep, ServerState, state_of

__all__ = ["router", "UserPath", "Workspace", "Target", "require_known_user", "records"]

router = APIRouter(prefix="/v1", tags=["memories"])

UserPath = Annotated[str, Path(min_length=1, max_length=256, description="Whose memories.")]
Workspace = Annotated[str, Query(max_length=256, description="The user's workspace (default: none).")]
Target = Annotated[str, Query(max_length=256, description="Whom the memories are about, when not the user (default: none).")]
Wait = Annotated[
    bool, Query(description="false: answer 202 at once and write in the background (see memoryscope.server.accepted_writes).")
]
IdempotencyKey = Annotated[
    str | None,
    Header(alias="Idempotency-Key", max_length=200, description="Your name for this request: sent again, stores nothing twice."),
]


def require_known_user(state: ServerState, caller: Caller) -> None:
    """404 when the user has no memory (of any status) in this workspace and target."""
    if not state.door.user_exists(caller):
        where = f" in workspace {caller.workspace!r}" if caller.workspace else ""
        message = f"user {caller.user_id!r} has no memories{where}; store messages or add memories first"
        raise ApiError(404, "unknown_user", message)


def records(found: list[MemoryRecord]) -> list[dict[str, Any]]:
    return [record.to_dict() for record in found]


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
    return filters


# -- a user's messages and memories --------------------------------------------------------------


@router.post("/users/{user}/messages", status_code=201, summary="Store messages of a conversation")
def store_messages(
    user: UserPath, body: StoreMessages, request: Request, who: CallerDep, workspace: Workspace = "",
    target: Target = "", wait: Wait = True, idempotency_key: IdempotencyKey = None,
) -> Any:  # fmt: skip
    """Keep the messages as the user's conversation; consolidation learns from them by its triggers.
    A message already stored (same speaker, time and text) is not stored twice."""
    state = state_of(request)
    given = [
        {"role": message.role, "content": message.content, "time": message.time, "name": message.name}
        for message in body.messages
    ]
    caller = who.for_user(state, user, workspace, target)
    key = idempotency_key_of(idempotency_key, wait)
    store = state.door.checked_add(caller, given, metadata=body.metadata, infer=True, idempotency_key=key)
    if key is not None and not wait:
        return _accepted(state, caller, f"{len(given)} messages", key, store)
    stored = store()
    return {"stored": records(stored), "count": len(stored)}


@router.post("/users/{user}/search", summary="Retrieve memories for a query")
def search(
    user: UserPath, body: SearchBody, request: Request, who: CallerDep, workspace: Workspace = "",
    target: Target = "",
) -> JSONResponse:  # fmt: skip
    """The configured retrieval (`retrieve_memory`): the best `top_k` memories for the query, with
    their time-stamped text (`text`) and structured fields."""
    state = state_of(request)
    caller = who.for_user(state, user, workspace, target)
    found = state.door.search(
        caller, body.query, top_k=body.top_k, filters=body.filters, types=body.types,
        time_range_given=(body.since, body.until) if body.since or body.until else None, query_time=body.query_time,
        threshold=body.threshold,
    )  # fmt: skip
    if not found:  # only then is it worth a count: is the user unknown, or did nothing match?
        require_known_user(state, caller)
    # the records are JSON-ready already: skip FastAPI's generic encoding (a third of a search's HTTP cost)
    return JSONResponse({"memories": records(found)})


@router.get("/users/{user}/memories", summary="List a user's memories")
def list_memories(
    user: UserPath, request: Request, who: CallerDep, workspace: Workspace = "", target: Target = "",
    type: Annotated[list[MemoryType] | None, Query(description="Only these types (repeatable).")] = None,
    limit: Annotated[int | None, Query(ge=0, le=100_000)] = None, include_expired: bool = False,
    filters: Annotated[str | None, Query(description='On metadata, as JSON: {"source": "crm", "rating": {"gte": 3}}.')] = None,
    offset: Annotated[int, Query(ge=0, le=10_000_000, description="Skip this many (a page: limit=50&offset=50).")] = 0,
    since: Annotated[datetime | None, Query(description="Only memories said at or after this time (ISO 8601).")] = None,
    until: Annotated[datetime | None, Query(description="Only memories said before this time (ISO 8601).")] = None,
) -> dict[str, Any]:  # fmt: skip
    """Newest first, from `offset` on; expired memories (replaced by newer ones) only with
    `include_expired=true`."""
    state = state_of(request)
    caller = who.for_user(state, user, workspace, target)
    wanted = parsed_filters(filters)
    found = state.door.get_all(
        caller, filters=wanted, types=type, include_expired=include_expired, limit=limit, offset=offset,
        time_range_given=(since, until) if since or until else None,
    )  # fmt: skip
    if not found:
        require_known_user(state, caller)
    return {"memories": records(found)}


@router.post("/users/{user}/memories", status_code=201, summary="Add memories as given")
def add_memories(
    user: UserPath, body: AddMemories, request: Request, who: CallerDep, workspace: Workspace = "",
    target: Target = "", wait: Wait = True, idempotency_key: IdempotencyKey = None,
) -> Any:  # fmt: skip
    """Each text becomes one memory of type `obs_customized`, stored as written."""
    state = state_of(request)
    caller = who.for_user(state, user, workspace, target)
    key = idempotency_key_of(idempotency_key, wait)
    add = state.door.checked_add(caller, body.texts, metadata=body.metadata, infer=False, time=body.time, idempotency_key=key)
    if key is not None and not wait:
        return _accepted(state, caller, f"{len(body.texts)} texts", key, add)
    added = add()
    return {"added": records(added), "count": len(added)}


def _accepted(state: ServerState, caller: Caller, what: str, key: str, write: Callable[[], list[MemoryRecord]]) -> JSONResponse:
    """202: the write runs in the background (`accepted_writes`), its outcome kept by the door
    (`GET .../writes/{key}`); the same request with the same key does it once."""
    user = caller.user_id
    running = state.accepted.is_running(key)
    if not running:
        state.door.accept_write(caller, key, what)

    def write_and_note() -> None:
        try:
            stored = write()
        except Exception as error:
            state.door.finish_write(caller, key, None, error)
            raise
        state.door.finish_write(caller, key, stored, None)

    if not running:
        state.accepted.submit(key, f"{user}: {what}", write_and_note)
    body = {
        "status": "running" if running else "accepted",
        "idempotency_key": key,
        "poll": f"/v1/users/{user}/writes/{key}",
    }
    return JSONResponse(body, status_code=202, headers={"Idempotency-Key": key})


@router.get("/users/{user}/writes/{key}", summary="What became of a write accepted with wait=false")
def write_status(
    user: UserPath, key: str, request: Request, who: CallerDep, workspace: Workspace = "", target: Target = ""
) -> dict[str, Any]:
    """`accepted` (not begun), `done` (with the ids it stored) or `failed` (with the failure's
    code): from the store, so any server process answers it."""
    state = state_of(request)
    return state.door.accepted_write(who.for_user(state, user, workspace, target), key)


@router.delete("/users/{user}/memories", summary="Delete all of a user's memories")
def delete_all(
    user: UserPath, request: Request, who: CallerDep, workspace: Workspace = "", target: Target = ""
) -> dict[str, Any]:
    state = state_of(request)
    caller = who.for_user(state, user, workspace, target)
    require_known_user(state, caller)
    outcome = state.door.delete_all(caller)
    return {"deleted": outcome.deleted_count, "run_id": outcome.run_id}


# -- one memory ----------------------------------------------------------------------------------

MemoryId = Annotated[str, Path(min_length=1, max_length=128)]


@router.get("/memories/{memory_id}", summary="Get one memory")
def get_memory(memory_id: MemoryId, request: Request, who: CallerDep) -> dict[str, Any]:
    state = state_of(request)
    record = state.door.get(who.by_id(state), memory_id)
    if record is None:
        raise ApiError(404, "unknown_memory", f"no memory has the id {memory_id!r} (for this API key)")
    return record.to_dict()


@router.patch("/memories/{memory_id}", summary="Change a memory's text or metadata")
def update_memory(memory_id: MemoryId, body: UpdateMemory, request: Request, who: CallerDep) -> dict[str, Any]:
    state = state_of(request)
    return state.door.update(who.by_id(state), memory_id, body.text, metadata=body.metadata).to_dict()


@router.post("/memories/{memory_id}/pin", summary="Pin a memory (consolidation and reflection leave it as it is)")
def pin_memory(memory_id: MemoryId, request: Request, who: CallerDep) -> dict[str, Any]:
    state = state_of(request)
    return state.door.pin(who.by_id(state), memory_id).to_dict()


@router.delete("/memories/{memory_id}/pin", summary="Unpin a memory")
def unpin_memory(memory_id: MemoryId, request: Request, who: CallerDep) -> dict[str, Any]:
    state = state_of(request)
    return state.door.pin(who.by_id(state), memory_id, pinned=False).to_dict()


@router.delete("/memories/{memory_id}", summary="Delete one memory")
def delete_memory(memory_id: MemoryId, request: Request, who: CallerDep) -> dict[str, Any]:
    state = state_of(request)
    outcome = state.door.delete(who.by_id(state), [memory_id])
    if not outcome.deleted_count:
        raise ApiError(404, "unknown_memory", f"no memory has the id {memory_id!r} (for this API key)")
    return {"deleted": True, "id": memory_id, "run_id": outcome.run_id}


@router.get("/memories/{memory_id}/history", summary="Every change to one memory")
def memory_history(memory_id: MemoryId, request: Request, who: CallerDep) -> dict[str, Any]:
    """Oldest first; a deleted memory's history too (whose it was comes from the changes themselves)."""
    state = state_of(request)
    changes = state.door.history(who.by_id(state), memory_id)
    return {"changes": [change.to_dict() for change in changes]}


@router.post("/runs/{run_id}/undo", summary="Take back what one run changed")
def undo_run(run_id: Annotated[str, Path(min_length=1, max_length=128)], request: Request, who: CallerDep) -> dict[str, Any]:
    """Memories the run created are deleted, those it changed or deleted are put back, as far as no
    later change built on them; undoing twice changes nothing more (`already_undone`)."""
    state = state_of(request)
    return state.door.undo(who.by_id(state), run_id).to_dict()
