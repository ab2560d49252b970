"""The JSON bodies the REST API takes. Unknown fields are refused (422), so a typo never passes
silently; times are ISO 8601 (without a zone: the config's `global.timezone`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from memoryscope.memory import MemoryTypeName

__all__ = ["MessageIn", "StoreMessages", "SearchBody", "AddMemories", "UpdateMemory", "OperationBody", "BlockBody"]

_STRICT = ConfigDict(extra="forbid")
_EARLIEST_YEAR, _LATEST_YEAR = 1000, 9000  # room on both sides for the date arithmetic of time windows


def _plausible(moment: datetime) -> datetime:
    if not _EARLIEST_YEAR <= moment.year <= _LATEST_YEAR:
        raise ValueError(f"year {moment.year} is out of range; give a time between the years {_EARLIEST_YEAR} and {_LATEST_YEAR}")
    return moment


Time = Annotated[datetime, AfterValidator(_plausible)]


class MessageIn(BaseModel):
    model_config = _STRICT

    role: Literal["user", "assistant"] = "user"
    content: str = Field(min_length=1, description="What was said.")
    time: Time | None = Field(default=None, description="When it was said (default: now).")
    name: str = Field(default="", max_length=256, description="The speaker's name, when the chat has several people.")


class StoreMessages(BaseModel):
    model_config = _STRICT

    messages: list[MessageIn] = Field(min_length=1, description="The conversation's new messages, oldest first.")
    metadata: dict[str, Any] | None = Field(default=None, description="Kept with every message (and what is learnt from it).")


class SearchBody(BaseModel):
    model_config = _STRICT

    query: str = Field(min_length=1, description="What to find memories for.")
    top_k: int = Field(default=10, ge=1, strict=True, description="How many memories at most (a number, not a text).")
    types: list[MemoryTypeName] | None = Field(default=None, description="Only memories of these types.")
    since: Time | None = Field(default=None, description="Only memories said at or after this time.")
    until: Time | None = Field(default=None, description="Only memories said before this time.")
    filters: dict[str, Any] | None = Field(default=None, description='On metadata: {"source": "crm", "rating": {"gte": 3}}.')
    query_time: Time | None = Field(default=None, description="When the question is asked (default: now).")
    threshold: float | None = Field(default=None, description="Only memories scoring at least this (0 to 1; default: no cut).")


class AddMemories(BaseModel):
    model_config = _STRICT

    texts: list[str] = Field(min_length=1, description="Each text is stored as one memory, as given (no LLM involved).")
    metadata: dict[str, Any] | None = None
    time: Time | None = Field(default=None, description="When it was said (default: now).")


class UpdateMemory(BaseModel):
    model_config = _STRICT

    text: str | None = Field(default=None, description="The new text (embedded again).")
    metadata: dict[str, Any] | None = Field(default=None, description="Keys to set; a key set to null is removed.")


class BlockBody(BaseModel):
    model_config = _STRICT

    value: str = Field(max_length=1_000_000, description="The block's whole new text (within the block's limit).")


class OperationBody(BaseModel):
    """What a caller may give an operation (the context's caller fields)."""

    model_config = _STRICT

    query: str = ""
    query_time: Time | None = None
    memory_ids: list[str] = Field(default_factory=list, description="For delete_memory.")
    new_memories: list[str] = Field(default_factory=list, description="Texts for add_memory.")
    retry_failed: bool = Field(default=False, description="consolidate_memory: take messages parked after failures too.")
