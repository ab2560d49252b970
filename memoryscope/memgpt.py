"""MemGPT's Python client (0.3.x) over MemoryScope: `create_client()`, agents, messages, sources.

    from memoryscope.memgpt import create_client      # was: from memgpt import create_client

    client = create_client()
    agent_info = client.create_agent(name="my_agent", persona="You are a friendly agent.",
                                     human="Bob is a friendly human.")
    messages = client.user_message(agent_id=agent_info.id, message="Hello, agent!")
    # [{"internal_monologue": ...}, {"function_call": "send_message({...})"},
    #  {"assistant_message": "Hi Bob!"}, {"function_return": ..., "status": "success"}]

    client.load_file_into_source("handbook.pdf", "docs")    # or `memoryscope load --name docs handbook.pdf`
    client.attach_source_to_agent(source_name="docs", agent_id=agent_info.id)

The client is local (MemGPT's `LocalClient`): it opens a config with an `agent_memory_chat`
(default `agent`: the embedded SQLite store at `MEMORYSCOPE_STORE_PATH`, the LLM at
`MEMORYSCOPE_LLM_API_BASE`), and every call is a verb of the door (`create_agent`,
`list_agents`, `load_source`, `attach_source`, ...) or a turn of the agent engine. Agents, their
core memory, their queue and the sources live in the store, so another client on the same store
sees them. Each agent is a target of the client's user: its memories are its own.

What differs from MemGPT: `base_url` (a MemGPT server) is refused with a clear error, there are no
presets or custom tools (`preset=` and `tools=` are refused when given), and `user_id` is any
text (MemGPT's were UUIDs).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memoryscope.agent.engine import Agent, TurnResult
from memoryscope.app import MemoryScope
from memoryscope.chat.agent_memory_chat import AgentMemoryChat, agent_chat
from memoryscope.door import AgentRecord, Caller, Document, SourceRecord, read_documents
from memoryscope.errors import InvalidInputError

__all__ = ["create_client", "LocalClient", "AgentState", "Source"]


@dataclass
class AgentState:
    """An agent as MemGPT's client returns it (`agent_info.id`, `.name`, `.persona`, `.human`)."""

    id: str
    name: str
    user_id: str
    persona: str
    human: str
    created_at: datetime
    preset: str | None = None
    metadata_: dict[str, Any] = field(default_factory=dict)


@dataclass
class Source:
    """A data source as MemGPT's client returns it."""

    id: str
    name: str
    user_id: str
    description: str
    created_at: datetime
    passages: int = 0
    documents: dict[str, str] = field(default_factory=dict)


def create_client(
    base_url: str | None = None,
    token: str | None = None,
    *,
    config: str | Path | Mapping[str, Any] = "agent",
    overrides: Mapping[str, Any] | None = None,
    user_id: str | None = None,
) -> LocalClient:
    """MemGPT's `create_client`: with no `base_url`, a local client on `config` (see the module)."""
    if base_url is not None:
        raise InvalidInputError(
            f"create_client(base_url={base_url!r}): MemoryScope has no MemGPT server to connect to; leave base_url out "
            "for a local client (set MEMORYSCOPE_LLM_API_BASE for the model), or use memoryscope.client for a "
            "MemoryScope server"
        )
    return LocalClient(user_id=user_id, config=config, overrides=overrides)


class LocalClient:
    """MemGPT 0.3.x's `LocalClient` (see the module). `close()` (or `with`) closes the store."""

    def __init__(
        self,
        auto_save: bool = False,
        user_id: str | None = None,
        debug: bool = False,
        *,
        config: str | Path | Mapping[str, Any] = "agent",
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self.auto_save = auto_save  # every turn is saved anyway; kept for MemGPT's signature
        self.debug = debug
        if isinstance(config, Mapping):
            self.scope = MemoryScope(config=config, overrides=overrides)
        else:
            self.scope = MemoryScope(config, overrides=overrides)
        try:
            self._chat: AgentMemoryChat = agent_chat(self.scope)
        except Exception:
            self.scope.close()
            raise
        self.door = self.scope.door
        self.user_id = user_id if user_id is not None else self._chat.user_name
        self._caller: Caller = self.door.caller(self.user_id)

    def close(self) -> None:
        self.scope.close()

    def __enter__(self) -> LocalClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- agents -------------------------------------------------------------------------------

    def list_agents(self) -> list[AgentState]:
        return [_agent_state(agent) for agent in self.door.list_agents(self._caller)]

    def agent_exists(self, agent_id: str | None = None, agent_name: str | None = None) -> bool:
        if not (agent_id or agent_name):
            raise ValueError("Either agent_id or agent_name must be provided")
        if agent_id and agent_name:
            raise ValueError("Only one of agent_id or agent_name can be provided")
        agents = self.door.list_agents(self._caller)
        return any((agent.id == str(agent_id)) if agent_id else (agent.name == agent_name) for agent in agents)

    def create_agent(
        self,
        name: str | None = None,
        preset: str | None = None,
        persona: str | None = None,
        human: str | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        tools: list[str] | None = None,
    ) -> AgentState:
        """A new agent; a name another agent of this user has is a ValueError, as in MemGPT.
        `persona`/`human`: the text its core memory blocks begin with (default: the config's)."""
        if preset is not None or tools:
            given = "preset=" if preset is not None else "tools="
            raise InvalidInputError(f"create_agent: {given} is MemGPT's; MemoryScope's agent has its memory functions only")
        first = self._chat.first_values()
        record = self.door.create_agent(
            self._caller, name, persona=first.get("persona", "") if persona is None else persona,
            human=first.get("human", "") if human is None else human, metadata=metadata,
        )  # fmt: skip
        self._agent(record).core.blocks()  # the blocks are made now: the agent is whole in the store
        return _agent_state(record)

    def get_agent(self, agent_id: str | None = None, agent_name: str | None = None) -> AgentState:
        return _agent_state(self._record(agent_id, agent_name))

    def delete_agent(self, agent_id: str) -> None:
        record = self.door.delete_agent(self._caller, str(agent_id))
        self._chat.forget_agent(self.user_id, record.id)

    # -- memory -------------------------------------------------------------------------------

    def get_agent_memory(self, agent_id: str) -> dict[str, Any]:
        """`{"core_memory": {"persona": ..., "human": ...}, "recall_memory": n, "archival_memory": n}`."""
        view = self._agent(self._record(agent_id)).overview()
        blocks = {name: block["value"] for name, block in view["blocks"].items()}
        return {"core_memory": blocks, "recall_memory": view["recall_messages"], "archival_memory": view["archival_memories"]}

    def update_agent_core_memory(self, agent_id: str, new_memory_contents: Mapping[str, str]) -> dict[str, Any]:
        """Set whole blocks (`{"human": "..."}`); the blocks before and after."""
        agent = self._agent(self._record(agent_id))
        old = {name: block.value for name, block in agent.core.blocks().items()}
        agent.core.set_many(dict(new_memory_contents))
        new = {name: block.value for name, block in agent.core.blocks().items()}
        return {"old_core_memory": old, "new_core_memory": new}

    def insert_archival_memory(self, agent_id: str, memory: str) -> list[str]:
        """Keep `memory` in the agent's archival memory; the ids of what was kept."""
        agent = self._record(agent_id)
        added = self.door.add(self.door.agent_caller(self._caller, agent), memory, infer=False, metadata={"source": "archival"})
        return [record.id for record in added]

    def get_agent_archival_memory(self, agent_id: str, limit: int | None = 1000) -> list[dict[str, str]]:
        """The agent's archival memories, newest first: `[{"id": ..., "contents": ...}]`."""
        agent = self._record(agent_id)
        records = self.door.get_all(self.door.agent_caller(self._caller, agent), limit=limit)
        return [{"id": record.id, "contents": record.memory} for record in records if record.memory_type != "conversation"]

    def delete_archival_memory(self, agent_id: str, memory_id: str) -> None:
        agent = self._record(agent_id)
        outcome = self.door.delete(self.door.agent_caller(self._caller, agent), [str(memory_id)])
        if outcome.unknown_ids:
            raise InvalidInputError(f"agent {agent.name!r} has no archival memory {memory_id!r}")

    # -- messages -----------------------------------------------------------------------------

    def user_message(self, agent_id: str, message: str) -> list[dict[str, Any]]:
        """Send `message` to the agent; what it did, as MemGPT's client lists it (see the module)."""
        result = self._agent(self._record(agent_id)).send(message)
        return messages_of(result)

    def send_message(
        self, message: str, role: str = "user", agent_id: str | None = None, agent_name: str | None = None, stream: bool = False
    ) -> list[dict[str, Any]]:
        if stream:
            raise InvalidInputError("send_message(stream=True) is not supported; the messages come back when the turn ends")
        if role != "user":
            raise InvalidInputError(f"send_message: role {role!r} is not supported; send role='user'")
        return self.user_message(self._record(agent_id, agent_name).id, message)

    def run_command(self, agent_id: str, command: str) -> str | None:
        """MemGPT's commands that need no terminal: `summarize`, `attach NAME`, `detach NAME`."""
        agent = self._agent(self._record(agent_id))
        name, _, argument = command.strip().lstrip("/").partition(" ")
        if name == "summarize":
            return f"summarized {agent.summarize()} messages"
        if name == "attach":
            return f"attached {agent.attach_source(argument.strip())}"
        if name == "detach":
            agent.detach_source(argument.strip())
            return f"detached {argument.strip()}"
        raise InvalidInputError(f"run_command: unknown command {command!r}; summarize, attach NAME or detach NAME")

    def save(self) -> None:
        """Nothing to do: the agent's state is saved after every turn."""

    # -- data sources -------------------------------------------------------------------------

    def create_source(self, name: str, description: str | None = None) -> Source:
        return _source(self.door.load_source(self._caller, name, [], description=description).source)

    def list_sources(self) -> list[Source]:
        return [_source(source) for source in self.door.list_sources(self._caller)]

    def get_source(self, source_id: str | None = None, source_name: str | None = None) -> Source:
        return _source(self._source_record(source_id, source_name))

    def delete_source(self, source_id: str | None = None, source_name: str | None = None) -> None:
        self.door.delete_source(self._caller, self._source_record(source_id, source_name).name)

    def load_file_into_source(self, filename: str | Path, source_id: str | Source) -> Source:
        """Read a file (text, Markdown, PDF) or a folder's files into a source (made when new;
        `source_id` may be its id, its name or the `Source`)."""
        documents, _skipped = read_documents([filename])
        return self.load_text_into_source(documents, source_id)

    def load_text_into_source(self, documents: list[Document], source_id: str | Source) -> Source:
        name = self._source_name(source_id)
        return _source(self.door.load_source(self._caller, name, documents).source)

    def attach_source_to_agent(
        self, source_id: str | Source | None = None, agent_id: str | None = None, *, source_name: str | None = None
    ) -> None:
        """Let the agent's `archival_memory_search` find the source's passages."""
        if agent_id is None:
            raise InvalidInputError("attach_source_to_agent needs agent_id")
        name = self._source_name(source_id if source_name is None else source_name)
        self.door.attach_source(self.door.agent_caller(self._caller, self._record(agent_id)), name)

    def attach_source(self, agent_id: str, source_name: str) -> None:
        self.attach_source_to_agent(source_name=source_name, agent_id=agent_id)

    def detach_source(self, source_id: str | Source, agent_id: str) -> None:
        name = self._source_name(source_id)
        self.door.detach_source(self.door.agent_caller(self._caller, self._record(agent_id)), name)

    def list_attached_sources(self, agent_id: str) -> list[Source]:
        caller = self.door.agent_caller(self._caller, self._record(agent_id))
        return [_source(self.door.get_source(self._caller, name)) for name in self.door.attached_sources(caller)]

    # -- pieces -------------------------------------------------------------------------------

    def _record(self, agent_id: str | None = None, agent_name: str | None = None) -> AgentRecord:
        if agent_id is not None:
            return self.door.get_agent(self._caller, str(agent_id))
        if agent_name is not None:
            return self.door.get_agent(self._caller, name=agent_name)
        raise ValueError("Either agent_id or agent_name must be provided")

    def _agent(self, record: AgentRecord) -> Agent:
        return self._chat.named_agent(self.user_id, record)

    def _source_record(self, source_id: str | None, source_name: str | None) -> SourceRecord:
        if (source_id is None) == (source_name is None):
            raise ValueError("Give source_id or source_name, one of them")
        if source_name is not None:
            return self.door.get_source(self._caller, source_name)
        return self.door.get_source(self._caller, self._source_name(source_id))

    def _source_name(self, source: str | Source | None) -> str:
        """A source named by its id, its name or the `Source`: its name (a new name is a new source)."""
        if isinstance(source, Source):
            return source.name
        if not isinstance(source, str) or not source.strip():
            raise InvalidInputError("name the data source (its name or its id)")
        by_id = {record.id: record.name for record in self.door.list_sources(self._caller)}
        return by_id.get(source.strip(), source.strip())


def messages_of(result: TurnResult) -> list[dict[str, Any]]:
    """A turn as MemGPT 0.3.x's client lists it: per step its `internal_monologue`, then per call
    its `function_call` (`name({arguments})`), the `assistant_message` a `send_message` sent and
    the `function_return` (with `status` success or error); each with an `id` and a UTC `date`."""
    date = datetime.now(timezone.utc).isoformat()
    out: list[dict[str, Any]] = []

    def add(entry: dict[str, Any]) -> None:
        out.append({**entry, "id": uuid.uuid4().hex, "date": date})

    for step in result.steps:
        if not step.calls and step.thought.strip() and step.thought.strip() in result.messages:
            add({"assistant_message": step.thought.strip()})  # a model that answered in plain text: what it said
            continue
        if step.thought:
            add({"internal_monologue": step.thought})
        for call in step.calls:
            arguments = _arguments(call.arguments)
            message = arguments.get("message") if call.name == "send_message" else None
            arguments.pop("request_heartbeat", None)
            add({"function_call": f"{call.name}({arguments})"})
            if call.ok and isinstance(message, str):
                add({"assistant_message": message})
            add({"function_return": "None" if call.name == "send_message" and call.ok else call.result,
                 "status": "success" if call.ok else "error"})  # fmt: skip
    return out


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {"arguments": text}
    return value if isinstance(value, dict) else {"arguments": value}


def _agent_state(record: AgentRecord) -> AgentState:
    return AgentState(record.id, record.name, record.user_id, record.persona, record.human, record.created_at,
                      metadata_=dict(record.metadata))  # fmt: skip


def _source(record: SourceRecord) -> Source:
    return Source(
        record.id, record.name, record.user_id, record.description, record.created_at, record.passages, dict(record.documents)
    )
