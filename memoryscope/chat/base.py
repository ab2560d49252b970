"""The chat contract and registry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memoryscope.models.base import ChatMessage
from memoryscope.registry import Registry

__all__ = ["ChatParams", "ChatResponse", "CHATS"]


class ChatParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_service: str = Field("memoryscope_service", description="Key under `memory_service:` to use.")
    generation_model: str = Field("generation_model", description="Key under `model:` for replies.")
    stream: bool = Field(False, description="Stream replies by default.")
    retrieve_operation: str = Field("retrieve_memory", description="Operation that finds memories for a query.")
    store_operation: str = Field("read_message", description="Operation that keeps the chat's messages, if configured.")
    history_message_count: int = Field(6, ge=0, description="Recent turns sent with each request.")


@dataclass
class ChatResponse:
    """A reply: `.message.content`, and `.meta_data["memories"]` (time-stamped lines) plus timings."""

    message: ChatMessage
    meta_data: dict[str, Any] = field(default_factory=dict)


CHATS: Registry[type[Any]] = Registry("chat", None, ("memoryscope.chat",))
