"""`Memory` and `AsyncMemory`: mem0's Python API over MemoryScope's door (see `memoryscope.mem0`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from memoryscope.app import MemoryScope
from memoryscope.config import load_config
from memoryscope.door import Caller
from memoryscope.errors import InvalidInputError
from memoryscope.mem0 import calls
from memoryscope.mem0.config import INLINE_KEY_PATHS, plan_of
from memoryscope.mem0.shapes import Mem0Scope, scope_of, split_filters

__all__ = ["Memory", "AsyncMemory"]

logger = logging.getLogger("memoryscope")
_T = TypeVar("_T")
_SEARCH_TOP_K = 20  # mem0's default `top_k`
_LIST_LIMIT = 100  # mem0's older default `limit` of get_all (the newer's `top_k` is 20): a list shows more


class Memory:
    """mem0's `Memory`: `add`, `search`, `get`, `get_all`, `update`, `delete`, `delete_all`,
    `history`, `reset`, answering in mem0's shapes. `config`: mem0's config dict (see
    `memoryscope.mem0.config`); `memoryscope_config`/`overrides`: the MemoryScope config it is
    read onto (default: `default`, the embedded SQLite store and the local embedding model)."""

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        memoryscope_config: str | Path = "default",
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        if config is not None and hasattr(config, "model_dump"):
            config = config.model_dump(exclude_none=True)  # mem0's own MemoryConfig object
        plan = plan_of(config)
        loaded = load_config(memoryscope_config, overrides, adjust=plan.adjust)
        # a key mem0's config holds is the user's to give in code, as mem0 takes it: no warning about it
        loaded = replace(loaded, warnings=tuple(w for w in loaded.warnings if not w.startswith(INLINE_KEY_PATHS)))
        self.notices: list[str] = list(plan.notices)
        for notice in self.notices:
            logger.warning(notice)
        self.scope = MemoryScope(config=loaded)
        self.door = self.scope.door

    @classmethod
    def from_config(cls, config_dict: Mapping[str, Any]) -> Memory:
        """mem0's `Memory.from_config({"llm": ..., "embedder": ..., "vector_store": ...})`."""
        if not isinstance(config_dict, Mapping):
            raise InvalidInputError(f"from_config takes a dict, got {type(config_dict).__name__}")
        return cls(config_dict)

    # -- mem0's verbs ----------------------------------------------------------------------------

    def add(
        self,
        messages: Any,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        timestamp: Any = None,
        expiration_date: Any = None,
        infer: bool = True,
        memory_type: str | None = None,
        prompt: str | None = None,
    ) -> dict[str, Any]:
        """Remember `messages` (a text, a message dict, or a list of them; system messages are
        left out) for the ids given (at least one). `infer=True`: the facts an LLM learns from
        them (when one is configured; else the messages as they are); `infer=False`: each message
        as one memory. `timestamp` (as mem0 Platform's: Unix seconds, or a datetime or ISO text):
        when they were said, so time questions ("last week") read from it. Returns
        `{"results": [{"id", "memory", "event": "ADD"}, ...]}`."""
        if expiration_date is not None:
            raise InvalidInputError("expiration_date is not supported by MemoryScope (memories expire when replaced)")
        if memory_type is not None:
            raise InvalidInputError(f"memory_type={memory_type!r}: procedural memories are not supported by MemoryScope")
        if prompt is not None:
            logger.warning("mem0 add(prompt=...) is not used by MemoryScope; its own consolidation prompts are")
        scope = scope_of(user_id, agent_id, run_id, verb="add")
        when = calls.said_at(timestamp, self.door)
        return calls.add(self.door, self._caller(scope), messages, metadata=metadata, infer=infer, time=when)

    def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        limit: int | None = None,
        top_k: int | None = None,
        filters: Mapping[str, Any] | None = None,
        threshold: float | None = None,
        rerank: bool = True,
        **ignored: Any,
    ) -> dict[str, Any]:
        """The best memories for `query`, best first: `{"results": [{"id", "memory", "hash",
        "metadata", "score", "created_at", "updated_at", "user_id", ...}]}`. The ids come in
        `filters` (`{"user_id": "alice"}`) or as keywords (older mem0), and match as in `get_all`;
        other `filters` keys are conditions on metadata. `top_k` (or `limit`, older mem0; default 20); `threshold`: only
        scores (0 to 1) at least that. `rerank`: MemoryScope always ranks; `explain` and
        `show_expired` are accepted and not used."""
        _check_ignored(ignored, ("explain", "show_expired", "reference_date"), "search")
        scope, conditions = split_filters(filters, user_id=user_id, agent_id=agent_id, run_id=run_id, verb="search")
        del rerank
        size = _size(top_k, limit, _SEARCH_TOP_K, "search")
        return calls.search(self.door, self._reader(scope), query, top_k=size, filters=conditions, threshold=threshold)

    def get(self, memory_id: str) -> dict[str, Any] | None:
        """One memory by id (any user's: this process owns the store), or None."""
        return calls.get(self.door, self._anyone(), memory_id)

    def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        limit: int | None = None,
        top_k: int | None = None,
        show_expired: bool = False,
    ) -> dict[str, Any]:
        """The memories that have the ids given (in `filters` or as keywords; an id not given
        matches any, within the user named, or the memories added with no `user_id` when none is
        named), newest first: `{"results": [...]}`; the first `top_k` (or `limit`; default 100)."""
        scope, conditions = split_filters(filters, user_id=user_id, agent_id=agent_id, run_id=run_id, verb="get_all")
        size = _size(top_k, limit, _LIST_LIMIT, "get_all")
        return calls.get_all(self.door, self._reader(scope), filters=conditions, limit=size, show_expired=show_expired)

    def update(
        self, memory_id: str, text: str | None = None, metadata: Mapping[str, Any] | None = None, *, data: str | None = None
    ) -> dict[str, Any]:
        """A memory's new text (`text`, or `data` as older mem0 named it) and/or metadata keys; kept in its history."""
        return calls.update(self.door, self._anyone(), memory_id, text if text is not None else data, metadata)

    def delete(self, memory_id: str) -> dict[str, Any]:
        """Delete one memory; MemoryNotFoundError (a ValueError-like error of ours) when none has the id."""
        return calls.delete(self.door, self._anyone(), memory_id)

    def delete_all(self, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> dict[str, Any]:
        """Delete every memory that has these ids (at least one; see `get_all`)."""
        return calls.delete_all(self.door, self._reader(scope_of(user_id, agent_id, run_id, verb="delete_all")))

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """Every change to one memory, oldest first: `event` ADD/UPDATE/DELETE, `old_memory`, `new_memory`, ..."""
        return calls.history(self.door, self._anyone(), memory_id)

    def reset(self) -> None:
        """Delete every memory of every user in the store."""
        calls.reset(self.door, self._anyone())

    def chat(self, query: str) -> str:
        raise NotImplementedError("Chat function not implemented yet.")  # as in mem0

    def close(self) -> None:
        self.scope.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- pieces ------------------------------------------------------------------------------------

    def _caller(self, scope: Mem0Scope) -> Caller:
        return scope.local_caller(self.door)

    def _reader(self, scope: Mem0Scope) -> Caller:
        return scope.local_caller(self.door, reading=True)

    def _anyone(self) -> Caller:
        """By memory id: this process owns the store, so it reaches any user's memory (as mem0)."""
        return self.door.caller(None, workspace=None)


def _size(top_k: int | None, limit: int | None, default: int, verb: str) -> int:
    if top_k is not None and limit is not None and top_k != limit:
        raise InvalidInputError(f"{verb}: give top_k or limit (its older name), not both ({top_k} and {limit})")
    return top_k if top_k is not None else limit if limit is not None else default


def _check_ignored(given: Mapping[str, Any], known: tuple[str, ...], verb: str) -> None:
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise TypeError(f"{verb}() got unexpected keyword arguments {unknown}")
    if given.get("reference_date") is not None:
        raise InvalidInputError(f"{verb}: reference_date is a mem0 Platform feature, not supported")


class AsyncMemory:
    """mem0's `AsyncMemory`: `Memory`'s verbs as coroutines, each run on a worker thread so the
    event loop never waits on the store or a model."""

    def __init__(self, config: Mapping[str, Any] | None = None, **options: Any) -> None:
        self.sync = Memory(config, **options)

    @classmethod
    def from_config(cls, config_dict: Mapping[str, Any]) -> AsyncMemory:
        if not isinstance(config_dict, Mapping):
            raise InvalidInputError(f"from_config takes a dict, got {type(config_dict).__name__}")
        return cls(config_dict)

    async def add(self, messages: Any, **options: Any) -> dict[str, Any]:
        return await self._thread(self.sync.add, messages, **options)

    async def search(self, query: str, **options: Any) -> dict[str, Any]:
        return await self._thread(self.sync.search, query, **options)

    async def get(self, memory_id: str) -> dict[str, Any] | None:
        return await self._thread(self.sync.get, memory_id)

    async def get_all(self, **options: Any) -> dict[str, Any]:
        return await self._thread(self.sync.get_all, **options)

    async def update(
        self, memory_id: str, text: str | None = None, metadata: Mapping[str, Any] | None = None, **options: Any
    ) -> dict[str, Any]:
        return await self._thread(self.sync.update, memory_id, text, metadata, **options)

    async def delete(self, memory_id: str) -> dict[str, Any]:
        return await self._thread(self.sync.delete, memory_id)

    async def delete_all(
        self, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> dict[str, Any]:
        return await self._thread(self.sync.delete_all, user_id, agent_id, run_id)

    async def history(self, memory_id: str) -> list[dict[str, Any]]:
        return await self._thread(self.sync.history, memory_id)

    async def reset(self) -> None:
        await self._thread(self.sync.reset)

    def close(self) -> None:
        self.sync.close()

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.sync.close)

    @staticmethod
    async def _thread(call: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        return await asyncio.to_thread(call, *args, **kwargs)
