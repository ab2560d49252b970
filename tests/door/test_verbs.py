"""The verb table is the one list: each verb is a method of the door, each writing verb's
operation exists (configured or built in), the README shows the table as the code has it, and
every error kind has one answer per face."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryscope.door import VERB_OPERATIONS, VERBS, Caller, Door, Reach, failure_of, verb_table
from memoryscope.door.failures import EXIT_FAILED, EXIT_MISUSE, EXIT_NOT_FOUND
from memoryscope.errors import (
    InvalidInputError,
    MemoryScopeError,
    ModelError,
    NotFoundError,
    PermissionDeniedError,
    StoreError,
    TooLargeError,
    TooManyError,
    WorkerError,
)
from memoryscope.worker import WORKERS

README = Path(__file__).resolve().parents[2] / "README.md"
DOOR_METHODS = {"import": "import_memories", "unpin": "pin", "write_status": "accepted_write"}
HTTP_ONLY = {"write_status"}  # a write accepted for later exists only where a face answers before writing (HTTP's 202)


def test_each_verb_is_a_door_method_and_each_verb_operation_a_registered_worker() -> None:
    for verb in VERBS:
        assert callable(getattr(Door, DOOR_METHODS.get(verb.name, verb.name))), verb.name
        assert verb.scope in ("read", "write", "admin") and verb.errors
        assert (verb.python and verb.cli) or (verb.name in HTTP_ONLY and verb.rest), verb.name
    for operation, (worker, params) in VERB_OPERATIONS.items():
        cls = WORKERS.get(worker)
        cls.Params.model_validate(params)  # the params are the worker's own
        assert any(operation in verb.operation for verb in VERBS) or operation in ("add_memory", "update_memory")


def test_the_readme_shows_the_table_as_the_code_has_it() -> None:
    assert verb_table() in README.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("error", "kind", "exit_code", "status"),
    [
        (NotFoundError("x", code="unknown_memory"), "unknown_memory", EXIT_NOT_FOUND, 404),
        (TooLargeError("x", code="query_too_long"), "query_too_long", EXIT_MISUSE, 422),
        (TooManyError("x", code="too_many_messages"), "too_many_messages", EXIT_MISUSE, 413),
        (PermissionDeniedError("x"), "forbidden", EXIT_MISUSE, 403),
        (InvalidInputError("x"), "invalid_request", EXIT_MISUSE, 422),
        (MemoryScopeError("x"), "invalid_request", EXIT_MISUSE, 422),
        (StoreError("x"), "store_error", EXIT_FAILED, 503),
        (ModelError("b", "m", "http://127.0.0.1:1", "x"), "model_error", EXIT_FAILED, 502),
        (WorkerError("op", "w", NotFoundError("x")), "not_found", EXIT_NOT_FOUND, 404),  # as what made it fail
        (WorkerError("op", "w", ValueError("x")), "operation_failed", EXIT_FAILED, 500),
    ],
)
def test_one_answer_per_error_kind_in_every_medium(error: Exception, kind: str, exit_code: int, status: int) -> None:
    failure = failure_of(error)
    assert (failure.kind, failure.exit_code, failure.http_status) == (kind, exit_code, status)


def test_a_caller_is_checked_and_scopes_the_store_filter() -> None:
    with pytest.raises(InvalidInputError, match="user_id is empty"):
        Caller(" ")
    with pytest.raises(InvalidInputError, match="at most 256"):
        Caller("ann", workspace="w" * 257)
    reader = Caller("ann", "work", scopes=frozenset({"read"}))
    with pytest.raises(PermissionDeniedError, match="needs the 'write' scope"):
        reader.require("write", "add")
    narrowed = reader.memory_filter(memory_ids=("a",))
    assert (narrowed.user_name, narrowed.workspace, narrowed.memory_ids) == ("ann", "work", ("a",))
    assert Reach(frozenset({"ann"}), None).permits("ann", "any") and not Reach(frozenset({"ann"}), None).permits("bob", "")
    assert Reach(None, frozenset({"acme"})).permits("bob", "acme") and not Reach(None, frozenset({"acme"})).permits("bob", "")
