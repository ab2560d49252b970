"""mem0's REST paths on this server: `POST /memories`, `GET /memories`, `GET /memories/{id}`,
`POST /search`, `PUT /memories/{id}`, `GET /memories/{id}/history`, `DELETE /memories/{id}`,
`DELETE /memories`, `POST /reset`, with mem0's bodies and answers (its `server/main.py`).

Aliases, not a second API: each route makes the request's caller as `/v1` does (the same API
keys, rate, browser guard and body limit), with mem0's `user_id`, `agent_id` and `run_id` as the
user, target and workspace (`memoryscope.mem0.shapes`: exactly them for `POST /memories`; for a
read and `DELETE /memories`, an id not given matches any, which a key scoped to workspaces may
not ask: 403 unless `run_id` names one of its workspaces), and calls the same door verbs through
`memoryscope.mem0.calls`, which the Python drop-in calls too. Errors answer as `/v1`'s do (a
missing id is 422 here, where mem0 says 400). `POST /reset` needs an admin key (the door's
`reset` verb asks for the admin scope); `GET /memories` without an id is refused (mem0 lists
every memory to an admin).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from memoryscope.errors import InvalidInputError
from memoryscope.mem0 import calls
from memoryscope.mem0.shapes import Mem0Scope, scope_of, split_filters
from memoryscope.server.state import Caller, CallerDep, ServerState, VerbCaller, state_of

__all__ = ["router"]

logger = logging.getLogger("memoryscope.server")
router = APIRouter(tags=["mem0 paths"])

_SEARCH_TOP_K = 20  # mem0's default
_LIST_LIMIT = 100
MemoryId = Annotated[str, Path(min_length=1, max_length=128)]
EntityId = Annotated[str | None, Query(max_length=256)]


class Mem0Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: str = Field(..., description="Role of the message (user, assistant; system messages are not kept).")
    content: str = Field(..., description="Message content.")
    name: str | None = None


class MemoryCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messages: list[Mem0Message] = Field(..., description="List of messages to store.")
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None
    infer: bool | None = Field(None, description="Whether to extract facts from messages. Defaults to True.")
    expiration_date: str | None = Field(None, description="Not supported by MemoryScope (an error when given).")
    memory_type: str | None = Field(None, description="Not supported by MemoryScope (an error when given).")
    prompt: str | None = Field(None, description="Not used by MemoryScope.")


class MemoryUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str | None = Field(None, description="New content to update the memory with.")
    metadata: dict[str, Any] | None = Field(None, description="Metadata to update.")


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(..., description="Search query.")
    user_id: str | None = Field(None, description="Deprecated in mem0: pass inside `filters` instead.")
    run_id: str | None = Field(None, description="Deprecated in mem0: pass inside `filters` instead.")
    agent_id: str | None = Field(None, description="Deprecated in mem0: pass inside `filters` instead.")
    filters: dict[str, Any] | None = None
    top_k: int | None = Field(None, description="Maximum number of results to return (default 20).")
    threshold: float | None = Field(None, description="Minimum score (0 to 1) for results.")
    explain: bool | None = Field(None, description="Accepted; not used.")
    show_expired: bool | None = Field(None, description="Accepted; not used.")


def _caller(state: ServerState, who: Caller, scope: Mem0Scope) -> VerbCaller:
    return who.for_user(state, scope.user, scope.run_id, scope.agent_id)


def _reader(state: ServerState, who: Caller, scope: Mem0Scope) -> VerbCaller:
    return who.for_user(state, scope.user, scope.read_workspace, scope.read_target)


@router.post("/memories", summary="Create memories (mem0's path)")
def add_memory(body: MemoryCreate, request: Request, who: CallerDep) -> dict[str, Any]:
    for name in ("expiration_date", "memory_type"):
        if getattr(body, name) is not None:
            raise InvalidInputError(f"{name} is not supported by MemoryScope; leave it out")
    if body.prompt is not None:
        logger.info("POST /memories: `prompt` is not used by MemoryScope")
    state = state_of(request)
    scope = scope_of(body.user_id, body.agent_id, body.run_id, verb="add")
    messages = [message.model_dump(exclude_none=True) for message in body.messages]
    infer = True if body.infer is None else body.infer
    return calls.add(state.door, _caller(state, who, scope), messages, metadata=body.metadata, infer=infer)


@router.get("/memories", summary="Get memories (mem0's path)")
def get_all_memories(
    request: Request, who: CallerDep, user_id: EntityId = None, run_id: EntityId = None, agent_id: EntityId = None,
    top_k: Annotated[int | None, Query(ge=0, le=100_000)] = None, show_expired: bool = False,
) -> dict[str, Any]:  # fmt: skip
    state = state_of(request)
    scope = scope_of(user_id, agent_id, run_id, verb="get_all")
    limit = _LIST_LIMIT if top_k is None else top_k
    return calls.get_all(state.door, _reader(state, who, scope), filters=None, limit=limit, show_expired=show_expired)


@router.get("/memories/{memory_id}", summary="Get a memory (mem0's path)")
def get_memory(memory_id: MemoryId, request: Request, who: CallerDep) -> dict[str, Any] | None:
    """The memory, or null (as mem0) when no memory this key reaches has the id."""
    state = state_of(request)
    return calls.get(state.door, who.by_id(state), memory_id)


@router.post("/search", summary="Search memories (mem0's path)")
def search_memories(body: SearchRequest, request: Request, who: CallerDep) -> dict[str, Any]:
    state = state_of(request)
    scope, conditions = split_filters(
        body.filters, user_id=body.user_id, agent_id=body.agent_id, run_id=body.run_id, verb="search"
    )  # fmt: skip
    top_k = _SEARCH_TOP_K if body.top_k is None else body.top_k
    caller = _reader(state, who, scope)
    return calls.search(state.door, caller, body.query, top_k=top_k, filters=conditions, threshold=body.threshold)


@router.put("/memories/{memory_id}", summary="Update a memory (mem0's path)")
def update_memory(memory_id: MemoryId, body: MemoryUpdate, request: Request, who: CallerDep) -> dict[str, Any]:
    state = state_of(request)
    return calls.update(state.door, who.by_id(state), memory_id, body.text, body.metadata)


@router.get("/memories/{memory_id}/history", summary="Get memory history (mem0's path)")
def memory_history(memory_id: MemoryId, request: Request, who: CallerDep) -> list[dict[str, Any]]:
    state = state_of(request)
    return calls.history(state.door, who.by_id(state), memory_id)


@router.delete("/memories/{memory_id}", summary="Delete a memory (mem0's path)")
def delete_memory(memory_id: MemoryId, request: Request, who: CallerDep) -> dict[str, Any]:
    state = state_of(request)
    calls.delete(state.door, who.by_id(state), memory_id)
    return {"message": "Memory deleted successfully"}


@router.delete("/memories", summary="Delete all memories of the ids given (mem0's path)")
def delete_all_memories(
    request: Request, who: CallerDep, user_id: EntityId = None, run_id: EntityId = None, agent_id: EntityId = None
) -> dict[str, Any]:
    state = state_of(request)
    calls.delete_all(state.door, _reader(state, who, scope_of(user_id, agent_id, run_id, verb="delete_all")))
    return {"message": "All relevant memories deleted"}


@router.post("/reset", summary="Reset all memories (mem0's path; admin keys only)")
def reset_memory(request: Request, who: CallerDep) -> dict[str, Any]:
    state = state_of(request)
    calls.reset(state.door, who.by_id(state))
    return {"message": "All memories reset"}
