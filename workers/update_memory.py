"""Memory management: add the user's own memories, change, pin or delete some, or delete them all."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, ClassVar, Literal
from zoneinfo import ZoneInfo

from pydantic import Field, field_validator

from memoryscope.context import MemoryContext, Message
from memoryscope.env import Env
from memoryscope.errors import InvalidInputError, NotFoundError, TooLargeError
from memoryscope.history import ChangeSource
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.stores.base import MemoryFilter, MemoryStore
from memoryscope.worker import Worker, WorkerParams, register_worker

__all__ = ["UpdateMemoryWorker"]

_ADDED_NAMESPACE = uuid.UUID("2f0c8a4e-5b1d-5e7a-9c36-8d4e1b7a0f52")  # fixed: ids are stable across processes

# MemoryScope 0.1 method names → ours.
_ALIASES = {"from_query": "add", "delete_memory": "delete", "modify_action_status": "delete"}
_PAGE = 1000
_CONSOLIDATION = "is MemoryScope 0.1's consolidation writer; here it is its own worker: use `class: store_memory`"
_MESSAGES = {
    "en": {
        "add": "added {count} {memories}",
        "delete": "deleted {count} {memories}",
        "unknown": "; no memory of yours has the id {ids}",
        "delete_all": "deleted all {count} {memories}",
        "nothing": "nothing to add: give the memory text",
        "no_ids": "nothing deleted: give the ids of the memories to delete (list_memory shows them)",
        "update": "updated {count} {memories}",
        "pin": "pinned {count} {memories}",
        "unpin": "unpinned {count} {memories}",
    },
    "zh": {
        "add": "添加了 {count} 条记忆",
        "delete": "删除了 {count} 条记忆",
        "unknown": "；你的记忆中没有编号 {ids}",
        "delete_all": "删除了全部 {count} 条记忆",
        "nothing": "没有可添加的内容：请给出记忆文本",
        "no_ids": "未删除任何记忆：请给出要删除的记忆编号（list_memory 可查看）",
        "update": "更新了 {count} 条记忆",
        "pin": "固定了 {count} 条记忆",
        "unpin": "取消固定了 {count} 条记忆",
    },
}


@register_worker("update_memory")
class UpdateMemoryWorker(Worker):
    """Change the user's memories directly, by `method`:

    - `add`: each of `new_memories` (or else the query, as in MemoryScope 0.1) becomes a memory
      of type `memory_type` (`obs_customized`; a data source's passages: `source_passage`) said at
      `query_time` (default: now); a `Message` in `new_memories` keeps its own time, role and metadata.
    - `update`: the one memory in `memory_ids` gets the text in `new_memories` (embedded again)
      and/or the metadata keys of `new_metadata` (a None value removes its key).
    - `pin` / `unpin`: the memories in `memory_ids` are kept from (or left to) consolidation and
      reflection: the only way `pinned` is set.
    - `delete`: the memories with the ids in `memory_ids`, if they are this user's (same user,
      target and workspace); other ids are reported as unknown and never touched. Without ids,
      the user's memories whose text is exactly the query (MemoryScope 0.1's `query=` form).
    - `delete_all`: every memory of this user, target and workspace, and the state records of
      an agent of theirs (core memory blocks, queue, checkpoints; not restored by an undo).

    `result` says what was done; `added_memory_ids`, `deleted_memory_ids` and
    `unknown_memory_ids` name the memories, `deleted_count` counts those deleted.
    """

    reads: ClassVar[tuple[str, ...]] = ("query", "query_time", "new_memories", "memory_ids", "new_metadata")
    writes: ClassVar[tuple[str, ...]] = (
        "result",
        "added_memory_ids",
        "deleted_memory_ids",
        "unknown_memory_ids",
        "deleted_count",
        "updated_memory_ids",
    )

    class Params(WorkerParams):
        method: Literal["add", "delete", "delete_all", "update", "pin", "unpin"] = Field(
            ...,
            description="`add`, `delete`, `delete_all`, `update`, `pin` or `unpin`; MemoryScope 0.1's `from_query` (add), "
            "`delete_memory` and `modify_action_status` (delete) are accepted too.",
        )
        memory_key: Any = Field(
            None, description="MemoryScope 0.1's `from_memory_key` input; not used here (see `store_memory`)."
        )
        memory_type: str = Field(
            "obs_customized",
            description="The type of the memories `add` writes (a registered memory type): `obs_customized`, the "
            "user's own memories; `source_passage` for a data source's passages.",
        )
        max_memory_chars: int = Field(
            100_000,
            gt=0,
            description="The longest memory `add` keeps, in characters: a longer one fails the call and nothing of it "
            "is stored (as `read_message`'s `max_message_chars`).",
        )

        @field_validator("method", mode="before")
        @classmethod
        def _read_legacy(cls, value: Any) -> Any:
            if value == "from_memory_key":
                raise ValueError(f"method 'from_memory_key' {_CONSOLIDATION}")
            return _ALIASES.get(value, value) if isinstance(value, str) else value

        @field_validator("memory_type")
        @classmethod
        def _registered(cls, value: str) -> str:
            return MemoryType(value).value  # ValueError naming the registered types

        @field_validator("memory_key")
        @classmethod
        def _no_memory_key(cls, value: Any) -> Any:
            if value is not None:
                raise ValueError(f"`memory_key` only serves method 'from_memory_key', which {_CONSOLIDATION}")
            return value

    params: Params

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")
        self._zone: ZoneInfo = env.settings.tzinfo
        self._messages = _MESSAGES[env.settings.language]

    def run(self, ctx: MemoryContext) -> None:
        method = self.params.method
        if method == "add":
            self._add(ctx)
        elif method == "delete":
            self._delete(ctx)
        elif method == "update":
            self._update(ctx)
        elif method in ("pin", "unpin"):
            self._pin(ctx, method == "pin")
        else:
            count = self._store.delete_by_filter(_scope(ctx), change=ChangeSource.of(ctx))
            # an agent's state records (core memory blocks, queue, checkpoints) say what the memories said
            self._store.delete_state(ctx.user_name, target_name=ctx.target_name, workspace=ctx.workspace)
            ctx.deleted_count = count
            ctx.result = self._messages["delete_all"].format(count=count, memories=_memories(count))

    def _add(self, ctx: MemoryContext) -> None:
        said_at = self._aware(ctx.query_time)
        given = [item if isinstance(item, Message) else Message("user", item, said_at) for item in ctx.new_memories]
        given = [
            Message(item.role, item.content.strip(), item.time, message_id=item.message_id, metadata=item.metadata)
            for item in given
        ]
        if not given:
            given = [Message("user", ctx.query.strip(), said_at)]
        for position, item in enumerate(given, start=1):
            self._check_size(item.content, position, len(given))
        nodes = [self._node(ctx, item) for item in given if item.content]
        if not nodes:
            ctx.added_memory_ids = ()
            ctx.result = self._messages["nothing"]
            return
        self._store.upsert(nodes, change=ChangeSource.of(ctx))
        ctx.added_memory_ids = tuple(node.memory_id for node in nodes)
        ctx.result = self._messages["add"].format(count=len(nodes), memories=_memories(len(nodes)))

    def _check_size(self, text: str, position: int, count: int) -> None:
        limit = self.params.max_memory_chars
        if len(text) > limit:
            raise TooLargeError(
                f"memory {position} has {len(text)} characters, more than `max_memory_chars` ({limit}) of worker "
                f"{self.name!r}; none of the {count} memories was written. Shorten it, or raise the limit."
            )

    def _node(self, ctx: MemoryContext, message: Message) -> MemoryNode:
        meta = dict(message.metadata)
        if message.role != "user":
            meta["role"] = message.role
        node = MemoryNode(
            user_name=ctx.user_name,
            target_name=ctx.target_name,
            workspace=ctx.workspace,
            memory_type=MemoryType(self.params.memory_type),
            content=message.content,
            message_time=message.time,
            meta=meta,
        )
        # a message with an id (an idempotent request's) is one memory however often it is added
        return node.replace(memory_id=added_memory_id(ctx, message.message_id)) if message.message_id else node

    def _owned(self, ctx: MemoryContext, memory_ids: list[str]) -> dict[str, MemoryNode]:
        """The caller's memories among `memory_ids` (any status), by id: the store's filter decides
        whose they are, so another user's id is simply not found."""
        scope = MemoryFilter(
            user_name=ctx.user_name, target_name=ctx.target_name, workspace=ctx.workspace, memory_ids=tuple(memory_ids)
        )
        return {node.memory_id: node for node in self._store.scan(scope, limit=max(len(memory_ids), 1))}

    def _update(self, ctx: MemoryContext) -> None:
        asked = [memory_id.strip() for memory_id in ctx.memory_ids if memory_id.strip()]
        if len(asked) != 1:
            raise InvalidInputError(f"update changes one memory; give one id, got {len(asked)}")
        texts = [item.content if isinstance(item, Message) else item for item in ctx.new_memories]
        if len(texts) > 1:
            raise InvalidInputError(f"update takes one new text, got {len(texts)}")
        if not texts and ctx.new_metadata is None:
            raise InvalidInputError("update needs a new text or metadata (or both)")
        node = self._owned(ctx, asked).get(asked[0])
        if node is None:
            message = f"no memory of yours has the id {asked[0]!r} (list them with get_all or list_memory)"
            raise NotFoundError(message, code="unknown_memory")
        changes: dict[str, Any] = {}
        if texts:
            text = texts[0].strip()
            if not text:
                raise InvalidInputError("update: the new text is empty; delete the memory instead")
            self._check_size(text, 1, 1)
            changes["content"] = text
        if ctx.new_metadata is not None:
            merged = dict(node.meta)
            for key, value in ctx.new_metadata.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            changes["meta"] = merged
        self._store.update(node.memory_id, change=ChangeSource.of(ctx), **changes)
        self._changed(ctx, "update", [node.memory_id], [])

    def _pin(self, ctx: MemoryContext, pinned: bool) -> None:
        asked = list(dict.fromkeys(memory_id.strip() for memory_id in ctx.memory_ids if memory_id.strip()))
        if not asked:
            raise InvalidInputError(f"{'pin' if pinned else 'unpin'} needs the id of a memory")
        owned = self._owned(ctx, asked)
        changed = []
        for memory_id in asked:
            node = owned.get(memory_id)
            if node is None:
                continue
            meta = {key: value for key, value in node.meta.items() if key != "pinned"}
            if pinned:
                meta["pinned"] = True
            if meta != node.meta:
                self._store.update(memory_id, change=ChangeSource.of(ctx), meta=meta)
            changed.append(memory_id)
        self._changed(ctx, "pin" if pinned else "unpin", changed, [memory_id for memory_id in asked if memory_id not in owned])

    def _changed(self, ctx: MemoryContext, method: str, changed: list[str], unknown: list[str]) -> None:
        ctx.updated_memory_ids = tuple(changed)
        ctx.unknown_memory_ids = tuple(unknown)
        result = self._messages[method].format(count=len(changed), memories=_memories(len(changed)))
        if unknown:
            result += self._messages["unknown"].format(ids=", ".join(unknown))
        ctx.result = result

    def _delete(self, ctx: MemoryContext) -> None:
        asked = list(dict.fromkeys(memory_id.strip() for memory_id in ctx.memory_ids if memory_id.strip()))
        if not asked and ctx.query.strip():
            asked = self._ids_with_text(ctx, ctx.query.strip())
        if not asked:
            ctx.deleted_memory_ids = ()
            ctx.unknown_memory_ids = ()
            ctx.deleted_count = 0
            ctx.result = self._messages["no_ids"]
            return
        mine = self._owned(ctx, asked)
        owned = [memory_id for memory_id in asked if memory_id in mine]
        unknown = [memory_id for memory_id in asked if memory_id not in mine]
        count = self._store.delete(owned, change=ChangeSource.of(ctx)) if owned else 0
        ctx.deleted_memory_ids = tuple(owned)
        ctx.unknown_memory_ids = tuple(unknown)
        ctx.deleted_count = count
        result = self._messages["delete"].format(count=count, memories=_memories(count))
        if unknown:
            result += self._messages["unknown"].format(ids=", ".join(unknown))
        ctx.result = result

    def _ids_with_text(self, ctx: MemoryContext, text: str) -> list[str]:
        """Ids of the user's memories whose content is exactly `text` (scanned page by page)."""
        ids: list[str] = []
        offset = 0
        while page := self._store.scan(_scope(ctx), limit=_PAGE, offset=offset):
            ids.extend(node.memory_id for node in page if node.content.strip() == text)
            offset += len(page)
        return ids

    def _aware(self, moment: datetime | None) -> datetime:
        if moment is None:
            return datetime.now(self._zone)
        return moment.replace(tzinfo=self._zone) if moment.tzinfo is None else moment


def _scope(ctx: MemoryContext) -> MemoryFilter:
    return MemoryFilter(user_name=ctx.user_name, target_name=ctx.target_name, workspace=ctx.workspace)


def added_memory_id(ctx: MemoryContext, message_id: str) -> str:
    """The memory id of an added text that came with `message_id`, for this user (the same in
    every process and run)."""
    return uuid.uuid5(_ADDED_NAMESPACE, f"{ctx.user_name}\x1f{ctx.target_name}\x1f{ctx.workspace}\x1f{message_id}").hex


def _memories(count: int) -> str:
    """The English noun for `count` memories (the Chinese templates need none)."""
    return "memory" if count == 1 else "memories"
