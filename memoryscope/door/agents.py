"""The door's agent verbs: a user's named MemGPT-style agents (create, list, get, delete).

An agent is a record of its user's (a state record of kind `agent`, named for the agent: names
are unique per user, as MemGPT's are) and a target of theirs: its id is the `target` under which
its core memory blocks, its queue and summary, its archival memories and its conversation live,
isolated from the user's other agents by the store's filter like any target. The record holds
the persona and human the agent began with; the blocks themselves are the engine's
(`memoryscope.agent`). A deleted agent's record stays as a tombstone (`deleted: true`), so its
name may be taken again.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from memoryscope.door.base import DoorBase
from memoryscope.door.caller import READ, WRITE, Caller
from memoryscope.door.inputs import checked_metadata
from memoryscope.errors import InvalidInputError, NotFoundError, StoreConflict, closest
from memoryscope.history import ChangeSource
from memoryscope.stores.state import StateKey, StateOwner

__all__ = ["AgentRecord", "AgentVerbs", "AGENT_KIND", "checked_name"]

_EPOCH = datetime.min.replace(tzinfo=timezone.utc)  # a damaged record's time: sorted first

AGENT_KIND = "agent"
_MAX_NAME = 100
_MAX_BLOCK_TEXT = 100_000


@dataclass(frozen=True)
class AgentRecord:
    """One agent of a user: its id (the target its memories live under), its unique name, the
    persona and human texts it began with, when it was made, and the caller's metadata."""

    id: str
    name: str
    user_id: str
    persona: str
    human: str
    created_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "name": self.name, "user_id": self.user_id, "persona": self.persona, "human": self.human,
            "created_at": self.created_at.isoformat(), "metadata": dict(self.metadata),
        }  # fmt: skip


def checked_name(name: Any, what: str) -> str:
    """A name of an agent or a data source: 1 to 100 printable characters, stripped."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError(f"{what} name is empty; give a name (1 to {_MAX_NAME} printable characters)")
    name = name.strip()
    if len(name) > _MAX_NAME or not name.isprintable():
        raise InvalidInputError(f"{what} name {name[:40]!r}: use 1 to {_MAX_NAME} printable characters")
    return name


class AgentVerbs(DoorBase):
    """create_agent, list_agents, get_agent, delete_agent (see `memoryscope.door.verbs`)."""

    def create_agent(
        self,
        caller: Caller,
        name: str | None = None,
        *,
        persona: str = "",
        human: str = "",
        metadata: Mapping[str, Any] | None = None,
    ) -> AgentRecord:
        """A new agent of the caller's user; a name another agent of theirs has is an
        InvalidInputError (code `duplicate_name`). No name: `agent-` and the start of its id."""
        caller.require(WRITE, "create_agent")
        agent_id = uuid.uuid4().hex
        name = checked_name(name, "agent") if name is not None else f"agent-{agent_id[:8]}"
        for what, text in (("persona", persona), ("human", human)):
            if not isinstance(text, str):
                raise InvalidInputError(f"create_agent: {what} must be text, got {type(text).__name__}")
            if len(text) > _MAX_BLOCK_TEXT:
                raise InvalidInputError(f"create_agent: {what} has {len(text):,} characters; at most {_MAX_BLOCK_TEXT:,}")
        extra = checked_metadata(metadata) if metadata else {}
        key = self._agent_key(caller, name)
        store = self._require_store()
        found = store.read_state([key])
        if found and not found[0].value.get("deleted"):
            raise InvalidInputError(
                f"an agent named {name!r} exists already for user {caller.user_id!r} (agent id {found[0].value.get('id')}); "
                "pick another name, or get it with get_agent", code="duplicate_name",
            )  # fmt: skip
        now = self._now(None)
        value = {
            "id": agent_id,
            "name": name,
            "persona": persona,
            "human": human,
            "created_at": now.isoformat(),
            "metadata": extra,
        }
        try:  # compare-and-set: two processes creating one name, one wins
            store.write_state({key: value}, expected={key: found[0].version if found else 0}, change=ChangeSource("create_agent"))
        except StoreConflict:
            raise InvalidInputError(
                f"an agent named {name!r} was just created by another process", code="duplicate_name"
            ) from None
        return _agent_of(caller.user_id, value)

    def list_agents(self, caller: Caller) -> list[AgentRecord]:
        """The caller's user's agents, oldest first."""
        caller.require(READ, "list_agents")
        records = self._require_store().list_state(self._agents_owner(caller), AGENT_KIND)
        agents = [_agent_of(caller.user_id, record.value) for record in records if not record.value.get("deleted")]
        return sorted(agents, key=lambda agent: agent.created_at)

    def get_agent(self, caller: Caller, agent_id: str | None = None, *, name: str | None = None) -> AgentRecord:
        """One agent of the caller's user, by id or by name (one of them); NotFoundError naming the
        agents there are when none has it."""
        caller.require(READ, "get_agent")
        if (agent_id is None) == (name is None):
            raise InvalidInputError("get_agent: give agent_id or name, one of them")
        agents = self.list_agents(caller)
        wanted = str(agent_id) if agent_id is not None else checked_name(name, "agent")
        for agent in agents:
            if (agent.id if agent_id is not None else agent.name) == wanted:
                return agent
        names = [agent.name for agent in agents]
        close = closest(wanted, names) if name is not None else None
        hint = f" Did you mean {close!r}?" if close else ""
        known = ", ".join(f"{agent.name} ({agent.id})" for agent in agents) or "none yet (create_agent makes one)"
        what = f"id {wanted!r}" if agent_id is not None else f"name {wanted!r}"
        raise NotFoundError(f"user {caller.user_id!r} has no agent with the {what}.{hint} Agents: {known}", code="unknown_agent")

    def delete_agent(self, caller: Caller, agent_id: str) -> AgentRecord:
        """Delete an agent of the caller's user: its record, and everything under its target (core
        memory, queue, archival memories, conversation). Its name is free again."""
        caller.require(WRITE, "delete_agent")
        agent = self.get_agent(caller, agent_id)
        self._run(self.agent_caller(caller, agent), "delete_all", "delete_agent")
        key = self._agent_key(caller, agent.name)
        self._require_store().write_state(
            {key: {"id": agent.id, "name": agent.name, "deleted": True}}, change=ChangeSource("delete_agent")
        )
        return agent

    def agent_caller(self, caller: Caller, agent: AgentRecord | str) -> Caller:
        """The caller acting as one of its user's agents: its target is the agent's id."""
        agent_id = agent.id if isinstance(agent, AgentRecord) else agent
        return replace(caller, target=agent_id, named=True)

    # -- pieces -------------------------------------------------------------------------------------

    @staticmethod
    def _agents_owner(caller: Caller) -> StateOwner:
        return StateOwner(caller.user_id, "", caller.write_workspace)

    def _agent_key(self, caller: Caller, name: str) -> StateKey:
        return StateKey(self._agents_owner(caller), AGENT_KIND, name)


def _agent_of(user_id: str, value: Mapping[str, Any]) -> AgentRecord:
    created = value.get("created_at")
    return AgentRecord(
        str(value.get("id", "")), str(value.get("name", "")), user_id, str(value.get("persona", "")),
        str(value.get("human", "")), datetime.fromisoformat(created) if isinstance(created, str) else _EPOCH,
        dict(value.get("metadata") or {}),
    )  # fmt: skip
