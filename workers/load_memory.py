"""Load the memories a backend step compares against: today's, the unreflected, the insights."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timedelta
from typing import ClassVar
from zoneinfo import ZoneInfo

from pydantic import Field, model_validator
from typing_extensions import Self  # typing.Self needs Python 3.11; we support 3.10

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.stores.base import MemoryFilter, MemoryStore, TimeRange
from memoryscope.timeparse.calendar_math import at
from memoryscope.worker import Worker, WorkerParams, register_worker

__all__ = ["LoadMemoryWorker"]

_OBSERVATIONS = (MemoryType.OBSERVATION, MemoryType.OBS_CUSTOMIZED)
_PAGE = 500


@register_worker("load_memory")
class LoadMemoryWorker(Worker):
    """Load valid memories of the user (and target, workspace) by kind; each kind has a top-k,
    0 skips it, and only the kinds asked for are assigned.

    - `today_memories`: observations and obs_customized said (`message_time`, else made:
      `created_at`) on "today" in the configured time zone, newest first. Today is each day
      the `pending_messages` were said on (consolidation of yesterday's chat compares with
      yesterday's memories), else the day of `query_time`, else the current day.
    - `unreflected_observations`: observations and obs_customized with `reflected=False`,
      oldest first (so none waits forever).
    - `insights`: insights, newest first.

    Used as `load_today_memory` in consolidate_memory and as `load_obs_and_insight` in
    reflect_and_reconsolidate, with MemoryScope 0.1's keys.
    """

    reads: ClassVar[tuple[str, ...]] = ("user_name", "target_name", "workspace")
    # Read when there: the pending batch and the query time say which day "today" is.
    optional_reads: ClassVar[tuple[str, ...]] = ("pending_messages", "query_time")
    writes: ClassVar[tuple[str, ...]] = ("today_memories", "unreflected_observations", "insights", "details")

    class Params(WorkerParams):
        retrieve_today_top_k: int = Field(0, ge=0, description="How many of today's observations to load; 0 skips them.")
        retrieve_not_reflected_top_k: int = Field(
            0, ge=0, description="How many observations not yet reflected on to load; 0 skips them."
        )
        retrieve_not_updated_top_k: int = Field(
            0,
            ge=0,
            description="MemoryScope 0.1 key (observations not yet checked long-term); accepted, and "
            "loaded with the unreflected observations when `retrieve_not_reflected_top_k` is 0.",
        )
        retrieve_insight_top_k: int = Field(0, ge=0, description="How many insights to load; 0 skips them.")

        @model_validator(mode="after")
        def _loads_something(self) -> Self:
            if not (
                self.retrieve_today_top_k
                or self.retrieve_not_reflected_top_k
                or self.retrieve_not_updated_top_k
                or self.retrieve_insight_top_k
            ):
                raise ValueError("every retrieve_*_top_k is 0, so nothing would be loaded")
            return self

    params: Params

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")
        self._zone: ZoneInfo = env.settings.tzinfo

    def run(self, ctx: MemoryContext) -> None:
        scope = MemoryFilter(user_name=ctx.user_name, target_name=ctx.target_name, workspace=ctx.workspace)
        p = self.params
        if p.retrieve_today_top_k:
            ctx.today_memories = tuple(self._today(scope, self._days(ctx), p.retrieve_today_top_k))
        unreflected_top_k = p.retrieve_not_reflected_top_k or p.retrieve_not_updated_top_k
        if unreflected_top_k:
            memory_filter = _filter(scope, _OBSERVATIONS, reflected=False)
            ctx.unreflected_observations = tuple(self._store.scan(memory_filter, limit=unreflected_top_k, newest_first=False))
        if p.retrieve_insight_top_k:
            memory_filter = _filter(scope, (MemoryType.INSIGHT,))
            ctx.insights = tuple(self._store.scan(memory_filter, limit=p.retrieve_insight_top_k, newest_first=True))
        ctx.details[self.name] = {
            "today": len(ctx.today_memories) if p.retrieve_today_top_k else None,
            "unreflected": len(ctx.unreflected_observations) if unreflected_top_k else None,
            "insights": len(ctx.insights) if p.retrieve_insight_top_k else None,
        }

    def _days(self, ctx: MemoryContext) -> list[date]:
        """The calendar days (in the configured zone) that count as today, newest first."""
        said = {(node.message_time or node.created_at).astimezone(self._zone).date() for node in ctx.pending_messages}
        if said:
            return sorted(said, reverse=True)
        if ctx.query_time is not None:
            moment = ctx.query_time if ctx.query_time.tzinfo is not None else ctx.query_time.replace(tzinfo=self._zone)
            return [moment.astimezone(self._zone).date()]
        return [datetime.now(self._zone).date()]

    def _today(self, scope: MemoryFilter, days: Iterable[date], top_k: int) -> list[MemoryNode]:
        found: dict[str, MemoryNode] = {}
        for day in days:
            start, end = at(day, self._zone), at(day + timedelta(days=1), self._zone)
            # A memory belongs to the day it was said on; one without a message time (added
            # directly) to the day it was made. Two scans, then that rule decides.
            for time_field in ("message_time", "created_at"):
                memory_filter = _filter(scope, _OBSERVATIONS, time_range=TimeRange(time_field, start, end))
                for node in self._scan_all(memory_filter):
                    if start <= (node.message_time or node.created_at) < end:
                        found.setdefault(node.memory_id, node)
        newest = sorted(found.values(), key=lambda node: node.message_time or node.created_at, reverse=True)
        return newest[:top_k]

    def _scan_all(self, memory_filter: MemoryFilter) -> list[MemoryNode]:
        """Every match (one user's memories of one day: a few pages at most). Stores order scans
        by `created_at`, so the newest by message time can only be picked after reading all."""
        found: list[MemoryNode] = []
        while True:
            page = self._store.scan(memory_filter, limit=_PAGE, offset=len(found), newest_first=True)
            found += page
            if len(page) < _PAGE:
                return found


def _filter(
    scope: MemoryFilter,
    memory_types: tuple[MemoryType, ...],
    *,
    reflected: bool | None = None,
    time_range: TimeRange | None = None,
) -> MemoryFilter:
    return MemoryFilter(
        user_name=scope.user_name,
        target_name=scope.target_name,
        workspace=scope.workspace,
        memory_types=memory_types,
        status=MemoryStatus.VALID,
        reflected=reflected,
        time_range=time_range,
    )
