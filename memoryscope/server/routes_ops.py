"""`/v1`: run an operation by name, a user's profile, the scheduler's status for a user, an
export of a user's memories as JSON lines (streamed), and the config in use (secrets hidden)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from memoryscope._scheduler_state import RunRecord, Scope
from memoryscope.context import MemoryContext
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.server.config_view import describe_config
from memoryscope.server.errors import ApiError
from memoryscope.server.routes_memory import (
    Target,
    UserPath,
    Workspace,
    aware,
    check_text,
    records,
    require_known_user,
    store_of,
)
from memoryscope.server.schemas import OperationBody
from memoryscope.server.state import AdminDep, Caller, CallerDep, ServerState, state_of
from memoryscope.stores.base import MemoryFilter
from memoryscope.transfer.jsonl import FORMAT, FORMAT_VERSION
from memoryscope.workflow import RunResult

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["operations"])


@router.get("/operations", summary="The operations this server runs")
def operations(request: Request, who: CallerDep) -> dict[str, Any]:
    service = state_of(request).service
    described = service.op_description_dict
    return {
        "service": service.name,
        "operations": [
            {"name": name, "backend": operation.backend, "description": described.get(name, "")}
            for name, operation in service.operations.items()
        ],
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
    who.require(user, workspace)
    service = state.service
    if name not in service.operations:
        known = ", ".join(service.operations)
        raise ApiError(404, "unknown_operation", f"no operation {name!r} in memory_service.{service.name}; known: {known}")
    body = body or OperationBody()
    _check_sizes(state, body)
    fields: dict[str, Any] = {"target_name": target, "workspace": workspace}
    if body.query:
        fields["query"] = body.query
    if body.query_time is not None:
        fields["query_time"] = aware(state, body.query_time)
    if body.memory_ids:
        fields["memory_ids"] = tuple(_reachable_ids(request, who, body.memory_ids))
    if body.new_memories:
        fields["new_memories"] = tuple(body.new_memories)
    if body.retry_failed:
        fields["retry_failed"] = True
    return run_summary(name, service.run_operation(name, user, **fields))


def _check_sizes(state: ServerState, body: OperationBody) -> None:
    """The limits `/search` and `/memories` keep, kept here too: an operation is no way around them."""
    check_text(state, body.query)
    limit = state.settings.max_messages_per_request
    for what, items in (("new_memories", body.new_memories), ("memory_ids", body.memory_ids)):
        if len(items) > limit:
            message = f"{len(items)} {what} in one request; at most {limit} (server.max_messages_per_request)"
            raise ApiError(413, "too_many_messages", message)
    for text in body.new_memories:
        check_text(state, text, "text")


def _reachable_ids(request: Request, who: Caller, memory_ids: list[str]) -> list[str]:
    """The ids, each of which must be a memory this caller may reach (else 404, as for one memory)."""
    found = {node.memory_id: node for node in store_of(state_of(request)).get(memory_ids)}
    for memory_id in memory_ids:
        node = found.get(memory_id)
        if node is not None and not who.permits(node.user_name, node.workspace):
            raise ApiError(404, "unknown_memory", f"no memory has the id {memory_id!r} (for this API key)")
    return memory_ids


def run_summary(name: str, result: RunResult) -> dict[str, Any]:
    context = result.context
    return {
        "operation": name,
        "run_id": result.run_id,
        "result": context.result,
        "stopped": result.stopped,
        "skipped": list(result.skipped),
        "memories": [memory.to_dict() for memory in _produced(context)],
        "added_memory_ids": list(context.added_memory_ids or ()),
        "deleted_memory_ids": list(context.deleted_memory_ids or ()),
        "unknown_memory_ids": list(context.unknown_memory_ids or ()),
        "timings": [[worker, seconds] for worker, seconds in result.timings],
        "total_seconds": result.total_seconds,
    }


def _produced(context: MemoryContext) -> tuple[MemoryNode, ...]:
    """The operation's answer (`memories`); for a backend operation, which answers with none, the
    observations and insights its `store_memory` wrote."""
    if context.memories:
        return context.memories
    written = set(context.store_outcome.memory_ids)
    return tuple(node for node in (*context.new_observations, *context.updated_insights) if node.memory_id in written)


@router.get("/users/{user}/profile", summary="The user's profile (insights)")
def profile(
    user: UserPath, request: Request, who: CallerDep, workspace: Workspace = "", target: Target = ""
) -> dict[str, Any]:
    """What reflection concluded about the user: their insights, newest first."""
    state = state_of(request)
    who.require(user, workspace)
    require_known_user(state, user, workspace, target)
    insights = state.scope.get_all(user, types=[MemoryType.INSIGHT], target_name=target, workspace=workspace)
    return {"user": user, "insights": records(insights)}


@router.get("/users/{user}/status", summary="The scheduler's status for a user")
def status(
    user: UserPath, request: Request, who: CallerDep, workspace: Workspace = "", target: Target = ""
) -> dict[str, Any]:
    """What runs for the user now, what waits, how the last backend runs went, pending messages."""
    state = state_of(request)
    who.require(user, workspace)
    require_known_user(state, user, workspace, target)
    label = Scope(user, target, workspace).label
    now = state.service.scheduler.status()
    backlog = now.messages.get(label)
    return {
        "user": user,
        "scheduler": {"enabled": now.enabled, "started": now.started, "closed": now.closed},
        "running": [
            {"operation": run.operation, "trigger": run.trigger, "started_at": run.started_at.isoformat()}
            for run in now.running
            if run.scope.label == label
        ],
        "waiting": label in now.waiting,
        "last_runs": {op: _run(record) for (who_label, op), record in now.last_runs.items() if who_label == label},
        "last_errors": {op: _run(record) for (who_label, op), record in now.last_errors.items() if who_label == label},
        "pending_messages": _jsonable(asdict(backlog)) if backlog is not None else None,
    }


def _run(record: RunRecord) -> dict[str, Any]:
    return _jsonable({key: value for key, value in asdict(record).items() if key != "user_name"})


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value.isoformat() if isinstance(value, datetime) else value for key, value in values.items()}


@router.get("/users/{user}/export", summary="Export a user's memories as JSON lines (streamed)")
def export(
    user: UserPath, request: Request, who: CallerDep, workspace: Workspace = "", target: Target = ""
) -> StreamingResponse:
    """The user's memories (every status) in this workspace and target, one JSON object a line,
    framed as `memoryscope export` frames them (a header line first, an end line with the count
    last), so `memoryscope import` reads the file back. Streamed: memory is bounded, whatever the size."""
    state = state_of(request)
    who.require(user, workspace)
    require_known_user(state, user, workspace, target)
    store = store_of(state)
    scope = MemoryFilter(user_name=user, target_name=target, workspace=workspace, status=None)

    def lines() -> Iterator[str]:
        name, dimension = store.recorded_embedding
        header = {
            "format": FORMAT, "version": FORMAT_VERSION, "embedding_model": name, "dimension": dimension,
            "vectors": False, "user_name": user, "workspace": workspace, "target_name": target,
        }  # fmt: skip
        yield json.dumps(header, ensure_ascii=False) + "\n"
        count = 0
        while True:
            page = store.scan(scope, limit=500, offset=count, newest_first=False)
            for node in page:
                yield json.dumps(node.to_dict(), ensure_ascii=False) + "\n"
            count += len(page)
            if len(page) < 500:
                break
        yield json.dumps({"format": FORMAT, "end": True, "count": count, "changes": 0}) + "\n"

    filename = f"memories-{''.join(c if c.isalnum() or c in '-_' else '_' for c in user)[:64]}.jsonl"
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    return StreamingResponse(lines(), media_type="application/x-ndjson", headers=headers)
