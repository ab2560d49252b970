"""Show memories to a person: time-stamped lines grouped by kind, each with its id."""

from __future__ import annotations

from typing import ClassVar
from zoneinfo import ZoneInfo

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.worker import Worker, WorkerParams, register_worker

__all__ = ["PrintMemoryWorker"]

_EXPIRED = "expired"
# Groups in the order they are shown: what was concluded first, raw conversation and expired last.
_GROUPS = (
    MemoryType.INSIGHT.value,
    MemoryType.OBS_CUSTOMIZED.value,
    MemoryType.OBSERVATION.value,
    MemoryType.CONVERSATION.value,
    _EXPIRED,
)
_HEADERS = {
    "en": {
        MemoryType.INSIGHT.value: "insight memory",
        MemoryType.OBS_CUSTOMIZED.value: "added memory",
        MemoryType.OBSERVATION.value: "observation memory",
        MemoryType.CONVERSATION.value: "conversation memory",
        _EXPIRED: "expired memory",
    },
    "zh": {
        MemoryType.INSIGHT.value: "洞察记忆",
        MemoryType.OBS_CUSTOMIZED.value: "自定义记忆",
        MemoryType.OBSERVATION.value: "观察记忆",
        MemoryType.CONVERSATION.value: "对话记忆",
        _EXPIRED: "过期记忆",
    },
}
_NO_MEMORIES = {"en": "No memories.", "zh": "暂无记忆。"}


@register_worker("print_memory")
class PrintMemoryWorker(Worker):
    """Render `memories` as `result`, for `/list_memory` and the like.

    One section per kind (insight, added, observation, conversation, expired; empty kinds are
    left out), in the order given within a section:

        ----- observation memory (1) -----
        [2024-10-26 21:26:20 Sat] user plays the guitar (id: 6f1c...)

    Times are shown in `global.timezone`, weekday and headers in `global.language`; the id is
    what `/delete_memory` takes.
    """

    reads: ClassVar[tuple[str, ...]] = ("memories",)
    writes: ClassVar[tuple[str, ...]] = ("result",)

    class Params(WorkerParams):
        pass

    def bind(self, env: Env) -> None:
        self._language: str = env.settings.language
        self._zone: ZoneInfo = env.settings.tzinfo

    def run(self, ctx: MemoryContext) -> None:
        if not ctx.memories:
            ctx.result = _NO_MEMORIES[self._language]
            return
        sections: dict[str, list[MemoryNode]] = {group: [] for group in _GROUPS}
        for node in ctx.memories:
            group = _EXPIRED if node.status is MemoryStatus.EXPIRED else node.memory_type.value
            sections[group].append(node)
        headers = _HEADERS[self._language]
        lines: list[str] = []
        for group, nodes in sections.items():
            if not nodes:
                continue
            lines.append(f"----- {headers[group]} ({len(nodes)}) -----")
            lines.extend(f"{node.format(self._language, self._zone)} (id: {node.memory_id})" for node in nodes)
        ctx.result = "\n".join(lines)
