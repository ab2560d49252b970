"""Memory tools for agents you build yourself: MemGPT's memory functions over MemoryScope.

    from openai import OpenAI
    from memoryscope import MemoryScope
    from memoryscope.tools import memory_tools

    scope = MemoryScope("default")
    tools = memory_tools(scope, "ann")                 # bound to one user
    client = OpenAI()
    messages = [{"role": "user", "content": "I moved to Hangzhou"}]
    while True:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools.schemas)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        messages += [tools.execute(call) for call in message.tool_calls]   # tool results, in OpenAI's format

`schemas` are OpenAI tool schemas; `execute(tool_call)` runs one call (an OpenAI SDK tool call
object, or its dict) and returns the `{"role": "tool", ...}` message to append; a bad call comes
back as a tool result saying what was wrong, never as an exception. `llama_index_tools()` gives
the same functions as LlamaIndex `FunctionTool`s. The functions are those of
`memoryscope.agent.tools`: core memory blocks (kept in the store per user), archival memory,
and search over past messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, create_model

from memoryscope.agent.blocks import BlockSpec, CoreMemory
from memoryscope.agent.tools import TOOL_NAMES, AgentFunctions, Outcome, failed
from memoryscope.errors import MemoryScopeError

if TYPE_CHECKING:
    from memoryscope.app import MemoryScope

__all__ = ["MemoryToolkit", "memory_tools", "DEFAULT_BLOCKS", "TOOL_NAMES"]

DEFAULT_BLOCKS = (BlockSpec("persona", 2000, ""), BlockSpec("human", 2000, ""))


class MemoryToolkit:
    """The memory functions of one user: schemas to send, one dispatcher to run them."""

    def __init__(
        self,
        scope: MemoryScope,
        user_id: str,
        *,
        blocks: Sequence[BlockSpec] = DEFAULT_BLOCKS,
        functions: Sequence[str] | None = None,
        target_name: str = "",
        workspace: str = "",
    ) -> None:
        if scope.store is None:
            raise MemoryScopeError("memory tools keep their memory in the store: configure a memory_store")
        unknown = sorted(set(functions or ()) - set(TOOL_NAMES))
        if unknown:
            raise MemoryScopeError(f"no memory function {', '.join(map(repr, unknown))}; known: {', '.join(TOOL_NAMES)}")
        self.user_id = user_id
        self.functions = tuple(functions or TOOL_NAMES)
        self.core_memory = CoreMemory(scope.store, user_id, blocks, target_name=target_name, workspace=workspace)
        self._tools = AgentFunctions(scope, user_id, self.core_memory, target_name=target_name, workspace=workspace)

    @property
    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI tool schemas of the chosen functions (send as `tools=`)."""
        return [schema for schema in self._tools.schemas if schema["function"]["name"] in self.functions]

    def run(self, name: str, arguments: str | Mapping[str, Any] | None = None) -> Outcome:
        """Run function `name` with its arguments (JSON text or a dict)."""
        if name not in self.functions:
            return failed(name, f"there is no function {name!r} here; call one of: {', '.join(self.functions)}")
        return self._tools.run(name, arguments)

    def execute(self, tool_call: Any) -> dict[str, Any]:
        """Run one tool call of a model's reply; the `tool` message to append to the conversation."""
        call_id, name, arguments = _parts(tool_call)
        outcome = self.run(name, arguments)
        return {"role": "tool", "tool_call_id": call_id, "name": name, "content": outcome.result}

    def llama_index_tools(self) -> list[Any]:
        """The functions as LlamaIndex `FunctionTool`s (their schemas are the OpenAI ones above)."""
        from llama_index.core.tools import FunctionTool, ToolMetadata  # imported here: heavy

        tools = []
        for schema in self.schemas:
            function = schema["function"]
            tools.append(
                FunctionTool(
                    fn=self._caller(function["name"]),
                    metadata=ToolMetadata(
                        name=function["name"], description=function["description"], fn_schema=_fn_schema(function)
                    ),
                )
            )
        return tools

    def _caller(self, name: str) -> Any:
        def call(**arguments: Any) -> str:
            return self.run(name, arguments).result

        call.__name__ = name
        return call


def memory_tools(scope: MemoryScope, user_id: str, **options: Any) -> MemoryToolkit:
    """The memory functions bound to `user_id` of `scope` (see `MemoryToolkit` for the options)."""
    return MemoryToolkit(scope, user_id, **options)


_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "boolean": bool}


def _fn_schema(function: Mapping[str, Any]) -> type[BaseModel]:
    """The function's JSON schema as the pydantic model LlamaIndex describes a tool by."""
    parameters = function["parameters"]
    fields: dict[str, Any] = {}
    for name, spec in parameters["properties"].items():
        kind = _JSON_TYPES[spec["type"]]
        described = Field(description=spec.get("description", ""))
        if name in parameters["required"]:
            fields[name] = (kind, described)
        else:
            fields[name] = (kind | None, Field(None, description=spec.get("description", "")))
    return create_model(function["name"], **fields)


def _parts(tool_call: Any) -> tuple[str, str, Any]:
    """(id, name, arguments) of an OpenAI SDK tool call, its dict, or a {"name", "arguments"} dict."""
    if isinstance(tool_call, Mapping):
        function = tool_call.get("function") or tool_call
        return str(tool_call.get("id") or ""), str(function.get("name") or ""), function.get("arguments")
    function = getattr(tool_call, "function", None)
    if function is None:
        raise MemoryScopeError(
            f"execute: expected a tool call (id, function.name, function.arguments), got {type(tool_call).__name__}"
        )
    return str(getattr(tool_call, "id", "") or ""), str(getattr(function, "name", "")), getattr(function, "arguments", None)
