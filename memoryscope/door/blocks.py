"""The `blocks` and `set_block` verbs: an agent's core memory blocks (`configs/agent.yaml`), each
by name with its text and its limit, and a block's whole text set, within the same limits as the
agent's own tools (`core_memory_append`, `core_memory_replace`).

The blocks belong to the agent chat (`memoryscope.agent.blocks.CoreMemory`, above the door): the
app hands the door a way to reach a user's core memory (`core_memory_of`), so every face reads and
edits blocks through these verbs, and the agent's checks (known block, limit) are the ones that
hold. A refused edit is the caller's mistake (`InvalidInputError`, its message the agent's own).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from memoryscope.door.base import DoorBase
from memoryscope.door.caller import READ, WRITE, Caller
from memoryscope.errors import InvalidInputError

__all__ = ["BlockRecord", "BlockVerbs", "CoreMemoryLike", "CoreMemoryOf"]

_MAX_TEXT = 1_000_000  # no block is configured larger; the block's own limit is checked by the agent


class CoreMemoryLike(Protocol):
    """What the door asks of a user's core memory (`memoryscope.agent.blocks.CoreMemory`)."""

    def blocks(self) -> Mapping[str, Any]: ...

    def set(self, name: str, value: str) -> Any: ...


CoreMemoryOf = Callable[[str, str], CoreMemoryLike]  # (user, target) -> that agent's core memory


@dataclass(frozen=True)
class BlockRecord:
    """One core memory block: its name, text, limit in characters and when it last changed."""

    name: str
    value: str
    limit: int
    updated_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "size": len(self.value),
            "limit": self.limit,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
        }


def _record(block: Any) -> BlockRecord:
    return BlockRecord(str(block.name), str(block.value), int(block.limit), getattr(block, "updated_at", None))


class BlockVerbs(DoorBase):
    def blocks(self, caller: Caller) -> list[BlockRecord]:
        """The caller's agent's core memory blocks, in the config's order (made on first use)."""
        caller.require(READ, "blocks")
        return [_record(block) for block in self._core_memory(caller, "blocks").blocks().values()]

    def set_block(self, caller: Caller, name: str, value: str) -> BlockRecord:
        """Make `value` the whole text of block `name`; refused (InvalidInputError naming the block
        and the limit) when the block is unknown or `value` is over its limit."""
        caller.require(WRITE, "set_block")
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"set_block: name must be a block's name, got {name!r}")
        if not isinstance(value, str) or len(value) > _MAX_TEXT:
            raise InvalidInputError(f"set_block: value must be a text of at most {_MAX_TEXT} characters")
        core = self._core_memory(caller, "set_block")
        try:
            block = core.set(name, value)
        except ValueError as error:  # the agent's BlockError: unknown block, over the limit
            raise InvalidInputError(str(error), code="invalid_block") from None
        return _record(block)

    def _core_memory(self, caller: Caller, verb: str) -> CoreMemoryLike:
        if self.core_memory_of is None:
            raise InvalidInputError(
                f"{verb}: this config has no agent, so no core memory blocks (use configs/agent.yaml or a config "
                "with an agent_memory_chat)",
                code="no_agent",
            )
        if caller.target is None:
            raise InvalidInputError(f"{verb}: name the agent (target) whose blocks these are", code="invalid_target")
        return self.core_memory_of(caller.user_id, caller.target)
