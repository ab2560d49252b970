"""The memory tools of a MemGPT-style agent, as OpenAI function schemas, and their execution.

    tools = AgentFunctions(scope, "ann", core_memory)
    tools.schemas                      # OpenAI `tools=[...]`
    outcome = tools.run("core_memory_append", '{"label": "human", "content": "plays the guitar"}')
    outcome.result                     # the text the model reads back (a JSON object)

The functions, MemGPT's, over our engine and store:

- `send_message(message)`: what the user sees; the only way the agent speaks.
- `core_memory_append(label, content)` / `core_memory_replace(label, old_content, new_content)`:
  edit a core memory block (always in the prompt; size-limited).
- `archival_memory_insert(content)`: keep a fact outside the prompt (a memory the user
  added, `obs_customized`, which retrieval and reflection read like any other).
- `archival_memory_search(query, page)`: our retrieval (`retrieve_memory`) over observations,
  insights and archival entries, with the passages of the data sources attached to the agent
  (`memoryscope load`, `/attach`), best score first, paged.
- `conversation_search(query, page)`: every past message, by text, paged; also what the
  context window evicted.
- `conversation_search_date(start_date, end_date, page)`: past messages in a date range.

Every function takes `request_heartbeat`: true asks for another step after this one, so the
model can chain calls. A call that fails (malformed JSON, a wrong argument, an unknown function,
a block over its limit) is an `Outcome` with `ok=False` and a message saying what to do; it never
raises, so the agent loop hands it back to the model as the tool's result.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from memoryscope.agent.blocks import BlockError, CoreMemory
from memoryscope.door.sources import SOURCE_KEY
from memoryscope.errors import MemoryScopeError
from memoryscope.memory import MemoryType

if TYPE_CHECKING:
    from memoryscope.app import MemoryScope

__all__ = ["AgentFunctions", "Outcome", "failed", "SCHEMAS", "TOOL_NAMES", "PAGE_SIZE", "ARCHIVAL_SOURCE"]

PAGE_SIZE = 5  # results per page of a search, as MemGPT pages them
ARCHIVAL_SOURCE = "archival"  # `metadata.source` of the memories archival_memory_insert keeps
_KNOWLEDGE = (MemoryType.OBSERVATION, MemoryType.OBS_CUSTOMIZED, MemoryType.INSIGHT)
_HEARTBEAT = {
    "type": "boolean",
    "description": "true: run another step after this call (to chain more calls); false: wait for the user.",
}
_PAGE = {"type": "integer", "minimum": 0, "description": "Which page of results, from 0 (5 results a page)."}


def _schema(name: str, description: str, properties: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {**properties, "request_heartbeat": _HEARTBEAT},
                "required": [*required, "request_heartbeat"],
                "additionalProperties": False,
            },
        },
    }


SCHEMAS = (
    _schema(
        "send_message",
        "Send a message to the user. The only way the user sees anything you say; everything else is your private thinking.",
        {"message": {"type": "string", "description": "The message, as the user will read it."}},
        ["message"],
    ),
    _schema(
        "core_memory_append",
        "Add a line to a block of your core memory (always in your prompt; each block has a size limit).",
        {
            "label": {
                "type": "string",
                "description": "The block: 'persona' (who you are), 'human' (who the user is), or another one in your prompt.",
            },
            "content": {"type": "string", "description": "The text to add, on a new line."},
        },
        ["label", "content"],
    ),
    _schema(
        "core_memory_replace",
        "Replace text in a block of your core memory. To delete text, replace it with an empty string.",
        {
            "label": {"type": "string", "description": "The block whose text changes."},
            "old_content": {"type": "string", "description": "Text now in the block, exactly as it is written there."},
            "new_content": {"type": "string", "description": "What replaces it; empty to delete it."},
        },
        ["label", "old_content", "new_content"],
    ),
    _schema(
        "archival_memory_insert",
        "Keep a fact in archival memory: unlimited, outside your prompt, found again with archival_memory_search.",
        {"content": {"type": "string", "description": "The fact, in a sentence that stands on its own."}},
        ["content"],
    ),
    _schema(
        "archival_memory_search",
        "Search archival memory: what you kept and what was learnt about the user from past conversations, best match first.",
        {"query": {"type": "string", "description": "What to look for."}, "page": _PAGE},
        ["query"],
    ),
    _schema(
        "conversation_search",
        "Search every past message of this conversation (also those no longer in your prompt) by text, best match first.",
        {"query": {"type": "string", "description": "Words to look for."}, "page": _PAGE},
        ["query"],
    ),
    _schema(
        "conversation_search_date",
        "List past messages of this conversation said between two dates (inclusive), oldest first.",
        {
            "start_date": {"type": "string", "description": "The first day, YYYY-MM-DD."},
            "end_date": {"type": "string", "description": "The last day, YYYY-MM-DD."},
            "page": _PAGE,
        },
        ["start_date", "end_date"],
    ),
)
TOOL_NAMES = tuple(schema["function"]["name"] for schema in SCHEMAS)


@dataclass(frozen=True)
class Outcome:
    """What one function call did: the `result` text the model reads back, whether it worked,
    whether another step was asked for, and the message sent (for `send_message`)."""

    name: str
    ok: bool
    result: str
    heartbeat: bool = False
    message: str | None = None


class ToolArgumentError(ValueError):
    """A call's arguments are wrong: the message tells the model what to send instead."""


class AgentFunctions:
    """The MemGPT-style functions an agent calls on its memory (`core_memory_append`,
    `archival_memory_search`, ...), bound to one user of a scope and their core memory; what
    `memoryscope.tools.MemoryToolkit` offers your own agent, and the MCP server's tools are not."""

    def __init__(
        self,
        scope: MemoryScope,
        user: str,
        core_memory: CoreMemory,
        *,
        target_name: str = "",
        workspace: str = "",
        page_size: int = PAGE_SIZE,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.scope = scope
        self.user = user
        self.core_memory = core_memory
        self.target_name = target_name
        self.workspace = workspace
        self.page_size = page_size
        self._now = now or (lambda: datetime.now(scope.config.settings.tzinfo))
        self._functions: dict[str, Callable[[dict[str, Any]], str]] = {
            "send_message": self._send_message,
            "core_memory_append": self._core_memory_append,
            "core_memory_replace": self._core_memory_replace,
            "archival_memory_insert": self._archival_memory_insert,
            "archival_memory_search": self._archival_memory_search,
            "conversation_search": self._conversation_search,
            "conversation_search_date": self._conversation_search_date,
        }

    @property
    def schemas(self) -> list[dict[str, Any]]:
        """The functions as OpenAI tool schemas (a fresh copy to send as `tools=`)."""
        return json.loads(json.dumps(SCHEMAS))

    def run(self, name: str, arguments: str | Mapping[str, Any] | None) -> Outcome:
        """Call function `name` with `arguments` (the JSON text the model sent, or a dict)."""
        if name not in self._functions:
            known = ", ".join(TOOL_NAMES)
            return failed(name, f"there is no function {name!r}; call one of: {known}")
        try:
            given = _arguments(name, arguments)
            heartbeat = _flag(given, "request_heartbeat")
            result = self._functions[name](given)
        except (ToolArgumentError, BlockError) as error:
            return failed(name, str(error))
        except MemoryScopeError as error:  # the store or a model failed: the model may try again later
            return failed(name, f"{name} failed: {error}")
        message = given.get("message") if name == "send_message" else None
        return Outcome(name, True, result, heartbeat, message if isinstance(message, str) else None)

    # -- the functions -------------------------------------------------------------------------

    def _send_message(self, given: dict[str, Any]) -> str:
        _text(given, "message", allow_empty=False)
        return _status("OK", "message sent")

    def _core_memory_append(self, given: dict[str, Any]) -> str:
        block = self.core_memory.append(_text(given, "label"), _text(given, "content", allow_empty=False))
        return _status("OK", f"appended to {block.name}: it holds {len(block.value)} of {block.limit} characters")

    def _core_memory_replace(self, given: dict[str, Any]) -> str:
        label, old, new = _text(given, "label"), _text(given, "old_content", allow_empty=False), _text(given, "new_content")
        block = self.core_memory.replace(label, old, new)
        return _status("OK", f"replaced in {block.name}: it holds {len(block.value)} of {block.limit} characters")

    def _archival_memory_insert(self, given: dict[str, Any]) -> str:
        content = _text(given, "content", allow_empty=False)
        added = self.scope.add(
            content, self.user, infer=False, metadata={"source": ARCHIVAL_SOURCE},
            target_name=self.target_name, workspace=self.workspace,
        )  # fmt: skip
        return _status("OK", f"kept in archival memory (id {added[0].id})" if added else "kept in archival memory")

    def _archival_memory_search(self, given: dict[str, Any]) -> str:
        query, page = _text(given, "query", allow_empty=False), _page(given)
        wanted = (page + 1) * self.page_size + 1
        door = self.scope.door
        caller = door.caller(self.user, workspace=self.workspace, target=self.target_name)
        own = self.scope.search(
            query, self.user, top_k=wanted, types=list(_KNOWLEDGE), target_name=self.target_name, workspace=self.workspace,
        )  # fmt: skip
        # the passages of the data sources attached to this agent (`/attach`), beside its own memories
        passages = door.search_sources(caller, query, top_k=wanted)
        hits = [(record.score or 0.0, record.text) for record in own]
        hits += [(record.score or 0.0, f"[{record.metadata.get(SOURCE_KEY, 'source')}] {record.memory}") for record in passages]
        hits.sort(key=lambda hit: hit[0], reverse=True)
        return self._page_of([text for _, text in hits], page)

    def _conversation_search(self, given: dict[str, Any]) -> str:
        query, page = _text(given, "query", allow_empty=False), _page(given)
        found = self._search(query, (MemoryType.CONVERSATION,), page)
        return self._page_of(found, page)

    def _conversation_search_date(self, given: dict[str, Any]) -> str:
        start, end, page = _day(given, "start_date"), _day(given, "end_date"), _page(given)
        if end < start:
            raise ToolArgumentError(f"end_date {end.isoformat()} is before start_date {start.isoformat()}; swap them")
        zone = self.scope.config.settings.tzinfo
        first, after = datetime.combine(start, time(), zone), datetime.combine(end + timedelta(days=1), time(), zone)
        door = self.scope.door
        found = door.get_all(
            door.caller(self.user, workspace=self.workspace, target=self.target_name), types=[MemoryType.CONVERSATION],
            time_range_given=(first, after), limit=self.page_size + 1, offset=page * self.page_size, newest_first=False,
        )  # fmt: skip
        lines = [record.text for record in found[: self.page_size]]
        return _results(lines, page, more=len(found) > self.page_size)

    # -- helpers --------------------------------------------------------------------------------

    def _search(self, query: str, types: tuple[MemoryType, ...], page: int) -> list[str]:
        wanted = (page + 1) * self.page_size + 1  # one more than this page: is there a next one?
        records = self.scope.search(
            query, self.user, top_k=wanted, types=list(types), target_name=self.target_name, workspace=self.workspace,
        )  # fmt: skip
        return [record.text for record in records]

    def _page_of(self, lines: list[str], page: int) -> str:
        start = page * self.page_size
        return _results(lines[start : start + self.page_size], page, more=len(lines) > start + self.page_size)


def failed(name: str, message: str) -> Outcome:
    """A call that did not work; it always gets another step, so the model reads the error and can correct itself."""
    return Outcome(name, False, _status("Failed", message), heartbeat=True)


def _status(status: str, message: str) -> str:
    return json.dumps({"status": status, "message": message}, ensure_ascii=False)


def _results(lines: list[str], page: int, *, more: bool) -> str:
    if not lines:
        note = "no results" if page == 0 else f"no results on page {page}"
        return json.dumps({"status": "OK", "message": note, "results": []}, ensure_ascii=False)
    hint = f"; page {page + 1} has more" if more else ""
    message = f"page {page}: {len(lines)} result{'s' if len(lines) != 1 else ''}{hint}"
    return json.dumps({"status": "OK", "message": message, "results": lines}, ensure_ascii=False)


def _arguments(name: str, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        given: Any = {}
    elif isinstance(arguments, str):
        try:
            given = json.loads(arguments)
        except json.JSONDecodeError as error:
            raise ToolArgumentError(f"the arguments of {name} are not valid JSON ({error.msg}); send one JSON object") from None
    else:
        given = dict(arguments)
    if not isinstance(given, dict):
        raise ToolArgumentError(f"the arguments of {name} must be a JSON object, not {type(given).__name__}")
    schema = next(s["function"]["parameters"] for s in SCHEMAS if s["function"]["name"] == name)
    unknown = sorted(set(given) - set(schema["properties"]))
    if unknown:
        allowed = ", ".join(schema["properties"])
        raise ToolArgumentError(f"{name} takes no argument {', '.join(map(repr, unknown))}; it takes: {allowed}")
    missing = [key for key in schema["required"] if key not in given and key != "request_heartbeat"]
    if missing:
        raise ToolArgumentError(f"{name} needs {', '.join(map(repr, missing))}")
    return given


def _text(given: Mapping[str, Any], key: str, *, allow_empty: bool = True) -> str:
    value = given.get(key, "")
    if not isinstance(value, str):
        raise ToolArgumentError(f"{key} must be a string, not {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise ToolArgumentError(f"{key} must not be empty")
    return value


def _flag(given: Mapping[str, Any], key: str) -> bool:
    value = given.get(key, False)
    if isinstance(value, str) and value.lower() in ("true", "false"):  # a model that quotes its booleans
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise ToolArgumentError(f"{key} must be true or false, not {value!r}")
    return value


def _page(given: Mapping[str, Any]) -> int:
    value = given.get("page", 0)
    if value is None:
        return 0
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ToolArgumentError(f"page must be a whole number from 0, not {value!r}")
    return value


def _day(given: Mapping[str, Any], key: str) -> date:
    text = _text(given, key, allow_empty=False).strip()
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        raise ToolArgumentError(f"{key} must be a date written YYYY-MM-DD, not {text!r}") from None
