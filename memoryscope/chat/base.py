"""The chat contract and registry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memoryscope.models.base import ChatMessage, ToolCall, ToolCallDelta
from memoryscope.registry import Registry

__all__ = ["ChatParams", "ChatResponse", "CHATS"]


class ChatParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_service: str = Field("memoryscope_service", description="Key under `memory_service:` to use.")
    generation_model: str = Field("generation_model", description="Key under `model:` for replies.")
    stream: bool = Field(False, description="Stream replies by default.")
    retrieve_operation: str = Field("retrieve_memory", description="Operation that finds memories for a query.")
    store_operation: str = Field("read_message", description="Operation that keeps the chat's messages, if configured.")
    history_message_count: int | None = Field(
        None, ge=0, description="Most recent turns sent with each request; default: the service's `contextual_msg_max_count`."
    )
    generation_model_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Options sent with every reply request (temperature, top_p, ...); 0.1.x key."
    )
    system_prompt: str | None = Field(
        None,
        description="Replaces the introduction of the system prompt (persona) for every turn of this chat; "
        "`{assistant}`, `{user}` and `{now}` in it are filled in, other braces are left as written. A call's "
        "`system_prompt=` replaces it for that call. Default: who the assistant and the user are, and the time.",
    )


@dataclass
class ChatResponse:
    """A reply: `.message.content`; `.meta_data["memories"]`, the memories used as time-stamped
    lines in one text (as MemoryScope 0.1.x gave it), `"memory_lines"` and `"memory_ids"` the
    same one by one, `"timings"` seconds per step. Streamed, `.delta` is the new text.

    When the chat was given tools, `.tool_calls` are the functions the model called (streamed:
    the calls so far, and `.tool_call_deltas` their new parts); a reply with calls is not stored."""

    message: ChatMessage
    meta_data: dict[str, Any] = field(default_factory=dict)
    delta: str = ""
    status: bool = True  # 0.1.x's flag; a failed reply raises here instead
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_deltas: tuple[ToolCallDelta, ...] = ()


CHATS: Registry[type[Any]] = Registry("chat", None, ("memoryscope.chat",))
