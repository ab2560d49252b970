"""The turns a chat keeps, and which of them go with the next query (MemoryScope 0.1.x's
`history_message_strategy`: 'auto', None or a number of turns)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from memoryscope.context import Message
from memoryscope.errors import MemoryScopeError
from memoryscope.models.base import ChatMessage

if TYPE_CHECKING:
    from memoryscope.stores.base import MemoryStore

__all__ = ["ChatTurn", "HistoryStrategy", "history_turns", "turn_messages", "said"]

HistoryStrategy = Literal["auto"] | int | None
HISTORY_STRATEGIES = "'auto' (the turns not consolidated yet), None (no turns) or a number of recent turns"


@dataclass(frozen=True)
class ChatTurn:
    """One exchange: the user's query, the reply, when it was asked, the memories it stored
    (`stored_ids`: the user's message and the reply; `reply_ids`: those of the reply)."""

    query: str
    reply: str
    time: datetime
    stored_ids: tuple[str, ...] = ()
    user_name: str = ""
    reply_ids: tuple[str, ...] = ()

    @property
    def message_ids(self) -> tuple[str, ...]:
        """The stored ids of the user's message."""
        return tuple(memory_id for memory_id in self.stored_ids if memory_id not in self.reply_ids)


def history_turns(turns: Sequence[ChatTurn], strategy: HistoryStrategy, cap: int, store: MemoryStore | None) -> list[ChatTurn]:
    """Of one user's `turns` (oldest first), those sent with the next query.

    'auto': the turns whose messages consolidation has not taken in yet, at most `cap` (they are
    among the latest: consolidation takes messages oldest first); None: none; n: the last n."""
    if strategy is None or strategy is False:
        return []
    if strategy == "auto":
        return _pending(list(turns[-cap:]), store) if cap else []
    if isinstance(strategy, int) and not isinstance(strategy, bool) and strategy >= 0:
        return list(turns[-strategy:]) if strategy else []
    raise MemoryScopeError(f"history_message_strategy must be {HISTORY_STRATEGIES}, got {strategy!r}")


def turn_messages(turn: ChatTurn) -> list[ChatMessage]:
    return [ChatMessage("user", turn.query), ChatMessage("assistant", turn.reply)]


def said(turn: ChatTurn, user_name: str, assistant_name: str) -> tuple[Message, ...]:
    """The turn as the messages a worker reads (`chat_history`), with their speakers."""
    return (
        Message("user", turn.query, turn.time, name=turn.user_name or user_name),
        Message("assistant", turn.reply, turn.time, name=assistant_name),
    )


def _pending(turns: list[ChatTurn], store: MemoryStore | None) -> list[ChatTurn]:
    """The turns whose messages consolidation has not taken in yet (all of them without a store)."""
    ids = [memory_id for turn in turns for memory_id in turn.stored_ids]
    if store is None or not ids:
        return turns
    consolidated = {node.memory_id for node in store.get(ids) if node.reflected}
    return [turn for turn in turns if not turn.stored_ids or not set(turn.stored_ids) <= consolidated]
