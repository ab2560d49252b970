"""The table of verbs: every operation a user can ask for, declared once.

Each verb names its typed input (the `Door` method of the same name), the caller scope it needs,
the operation of the service it runs (writes always run as an operation, so size caps, ownership,
history, run ids and `undo` hold for every face), its output record, the errors it raises, and
how each face spells it. The README's verb table is this table (`python -m memoryscope.door`
prints it).

An operation a verb runs that the config does not define is built in (`VERB_OPERATIONS`): a
0.1.x config without `add_memory` still adds, through the same worker the shipped configs use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memoryscope.door.caller import ADMIN, READ, WRITE
from memoryscope.errors import InvalidInputError, MemoryScopeError, NotFoundError, PermissionDeniedError, TooLargeError

__all__ = ["Verb", "VERBS", "VERB_OPERATIONS", "verb_table"]


@dataclass(frozen=True)
class Verb:
    name: str
    summary: str
    scope: str  # what the caller needs: read, write or admin
    operation: str  # the operation it runs ("" for a read of the store)
    output: str  # the record it answers with
    errors: tuple[type[MemoryScopeError], ...]
    python: str
    cli: str
    rest: str
    mcp: str = ""


_BAD = (InvalidInputError,)
_SIZED = (InvalidInputError, TooLargeError)
_BY_ID = (InvalidInputError, NotFoundError)

VERBS: tuple[Verb, ...] = (
    Verb("add", "remember messages (kept as the conversation) or texts as given", WRITE, "read_message | add_memory",
         "list[MemoryRecord]", _SIZED, "add(messages, user_id, infer=)", "add TEXT... [--no-infer]",
         "POST /v1/users/{u}/messages, POST /v1/users/{u}/memories", "add_memory"),
    Verb("search", "the memories that best answer a query", READ, "retrieve_memory", "list[MemoryRecord]", _SIZED,
         "search(query, user_id)", "search QUERY", "POST /v1/users/{u}/search", "retrieve_memory"),
    Verb("get", "one memory by id", READ, "", "MemoryRecord", _BY_ID, "get(memory_id, user_id=)", "get ID [--user U]",
         "GET /v1/memories/{id}"),
    Verb("get_all", "a user's memories, newest first", READ, "", "list[MemoryRecord]", _BAD, "get_all(user_id)",
         "run list_memory", "GET /v1/users/{u}/memories", "list_memory"),
    Verb("update", "change a memory's text or metadata", WRITE, "update_memory", "MemoryRecord", (*_BY_ID, TooLargeError),
         "update(memory_id, text, metadata=)", "update ID --text", "PATCH /v1/memories/{id}"),
    Verb("delete", "delete memories by id", WRITE, "delete_memory", "WriteOutcome", _BY_ID, "delete(memory_id, user_id=)",
         "delete ID... [--user U]", "DELETE /v1/memories/{id}", "delete_memory"),
    Verb("delete_all", "delete every memory of a named user", WRITE, "delete_all", "WriteOutcome", _BAD,
         "delete_all(user_id)", "delete --all --user U --yes", "DELETE /v1/users/{u}/memories"),
    Verb("history", "every change to one memory, oldest first", READ, "", "list[MemoryChange]", _BY_ID,
         "history(memory_id)", "history ID | --user U | --run RUN", "GET /v1/memories/{id}/history"),
    Verb("reset", "delete every memory of every user (admin)", ADMIN, "delete_all", "WriteOutcome", _BAD,
         "memoryscope.mem0.Memory().reset()", "delete --all-users --yes", "POST /reset"),
    Verb("pin", "keep a memory from consolidation and reflection", WRITE, "pin_memory", "MemoryRecord", _BY_ID,
         "pin(memory_id)", "pin ID [--user U]", "POST /v1/memories/{id}/pin"),
    Verb("unpin", "undo pin", WRITE, "unpin_memory", "MemoryRecord", _BY_ID, "unpin(memory_id)", "unpin ID",
         "DELETE /v1/memories/{id}/pin"),
    Verb("undo", "take one run's changes back", WRITE, "undo_run", "UndoOutcome", _BY_ID, "undo(run_id)", "undo RUN [--user U]",
         "POST /v1/runs/{run}/undo"),
    Verb("profile", "what is known about the user, by the memory policy", READ, "", "Profile", _BAD,
         "profile(user_id)", "profile --user U", "GET /v1/users/{u}/profile", "get_user_profile"),
    Verb("tiers", "a user's memories by the policy's tiers (MemoryOS: short, mid with heat, long)", READ, "", "Tiers",
         _BAD, "tiers(user_id)", "tiers --user U [--json]", "GET /v1/users/{u}/tiers"),
    Verb("blocks", "an agent's core memory blocks by name, with size and limit", READ, "", "list[BlockRecord]", _BAD,
         "blocks(user_id)", "agent: /memory", "GET /v1/users/{u}/blocks"),
    Verb("set_block", "set a core memory block's whole text, within its limit", WRITE, "", "BlockRecord", _BAD,
         "set_block(name, value, user_id=)", "agent: /set NAME TEXT", "PUT /v1/users/{u}/blocks/{name}"),
    Verb("status", "what waits and what ran for a user (from the store)", READ, "", "Status", _BAD, "status(user_id)",
         "status --user U", "GET /v1/users/{u}/status"),
    Verb("write_status", "what became of a write accepted for later (HTTP `?wait=false`), by its idempotency key", READ, "",
         "dict", (*_BAD, NotFoundError), "", "", "GET /v1/users/{u}/writes/{key}"),
    Verb("export", "a user's memories and their history as JSON lines", READ, "", "JSON lines", _BAD,
         "export(out, user_id)", "export --out FILE --user U", "GET /v1/users/{u}/export"),
    Verb("import", "memories from JSON lines (any users: admin)", ADMIN, "", "int", (*_BAD, PermissionDeniedError),
         "import_memories(source)", "import FILE", ""),
    Verb("run", "any configured operation (consolidate, reflect, MemoryOS update, ...)", WRITE, "(named)", "RunResult",
         (*_SIZED, NotFoundError), "default_service.run_operation(name, user_id)",
         "run OPERATION --user U",
         "POST /v1/users/{u}/operations/{name}", "consolidate_memory"),
    # MemGPT's agents and data sources (`memoryscope.memgpt`, `memoryscope agent`, `memoryscope load`)
    Verb("create_agent", "a new named agent of the user (names unique per user)", WRITE, "", "AgentRecord", _BAD,
         "memgpt client.create_agent(name, persona=, human=)", "agent --agent NAME (made on first use)", ""),
    Verb("list_agents", "the user's agents", READ, "", "list[AgentRecord]", _BAD, "memgpt client.list_agents()",
         "agent --list", ""),
    Verb("get_agent", "one agent of the user, by id or name", READ, "", "AgentRecord", _BY_ID,
         "memgpt client.get_agent(agent_id= or agent_name=)", "agent --agent NAME", ""),
    Verb("delete_agent", "delete an agent and everything it remembers", WRITE, "delete_all", "AgentRecord", _BY_ID,
         "memgpt client.delete_agent(agent_id)", "agent --delete NAME", ""),
    Verb("load_source", "files or text, cut into passages, into a named data source of the user", WRITE, "add_passages",
         "SourceLoad", _SIZED, "memgpt client.load_file_into_source(filename, source)",
         "load --name NAME PATH... (- is stdin)", ""),
    Verb("list_sources", "the user's data sources", READ, "", "list[SourceRecord]", _BAD, "memgpt client.list_sources()",
         "load --list", ""),
    Verb("get_source", "one data source of the user, by name or id", READ, "", "SourceRecord", _BY_ID,
         "memgpt client.get_source(source_name=)", "load --list", ""),
    Verb("delete_source", "delete a data source and its passages", WRITE, "delete_memory", "SourceRecord", _BY_ID,
         "memgpt client.delete_source(source_name=)", "load --delete NAME", ""),
    Verb("attach_source", "let an agent's archival_memory_search find a data source's passages", WRITE, "", "SourceRecord",
         _BY_ID, "memgpt client.attach_source_to_agent(source, agent_id)", "agent: /attach NAME", ""),
    Verb("detach_source", "undo attach_source", WRITE, "", "None", _BY_ID, "memgpt client.detach_source(source, agent_id)",
         "agent: /detach NAME", ""),
    Verb("search_sources", "the passages of an agent's attached sources that best answer a query", READ, "",
         "list[MemoryRecord]", _SIZED, "agent tool archival_memory_search", "agent: archival_memory_search", ""),
)

# Operations the writing verbs run, built into every service whose config does not define them:
# operation name -> (worker class, its params).
VERB_OPERATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "add_memory": ("update_memory", {"method": "add"}),
    "delete_memory": ("update_memory", {"method": "delete"}),
    "delete_all": ("update_memory", {"method": "delete_all"}),
    "update_memory": ("update_memory", {"method": "update"}),
    "pin_memory": ("update_memory", {"method": "pin"}),
    "unpin_memory": ("update_memory", {"method": "unpin"}),
    "undo_run": ("undo_run", {}),
    "add_passages": ("update_memory", {"method": "add", "memory_type": "source_passage"}),
}


def verb_table() -> str:
    """The verbs as a markdown table (verb, Python, CLI, REST, MCP): the README's."""
    rows = ["| verb | Python (`MemoryScope`) | CLI (`memoryscope ...`) | REST | MCP tool |", "|---|---|---|---|---|"]
    for verb in VERBS:
        cells = [f"`{verb.name}`", verb.python, verb.cli, verb.rest, verb.mcp]
        shown = [f"`{cell}`" if cell and index else (cell or "—") for index, cell in enumerate(cells)]
        rows.append("| " + " | ".join(shown) + " |")
    return "\n".join(rows)
