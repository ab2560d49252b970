"""Fix the query and its time before retrieval: trimmed text, a timezone-aware moment."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar
from zoneinfo import ZoneInfo

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.worker import Worker, WorkerParams, register_worker

__all__ = ["SetQueryWorker"]


@register_worker("set_query")
class SetQueryWorker(Worker):
    """Trim `query` and give `query_time` a zone.

    `query_time` defaults to now; a naive time is read in `global.timezone`; an aware one is
    shown in that zone (same instant). As in MemoryScope 0.1, a call with no query but with
    chat messages uses the last user message (and its time) as the query.
    """

    reads: ClassVar[tuple[str, ...]] = ("query", "query_time", "messages")
    writes: ClassVar[tuple[str, ...]] = ("query", "query_time")

    class Params(WorkerParams):
        pass

    def bind(self, env: Env) -> None:
        self._zone: ZoneInfo = env.settings.tzinfo

    def run(self, ctx: MemoryContext) -> None:
        query = ctx.query.strip()
        moment = ctx.query_time
        if not query:
            last = next((m for m in reversed(ctx.messages) if m.role == "user" and m.content.strip()), None)
            if last is not None:
                query = last.content.strip()
                moment = moment or last.time
        ctx.query = query
        ctx.query_time = self._localise(moment)

    def _localise(self, moment: datetime | None) -> datetime:
        if moment is None:
            return datetime.now(self._zone)
        if moment.tzinfo is None:
            return moment.replace(tzinfo=self._zone)
        return moment.astimezone(self._zone)
