"""Find the dates a query is about, so retrieval can favour memories from then."""

from __future__ import annotations

import logging
import re
from datetime import date, datetime, timedelta
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.llm_output import item_field, iter_json
from memoryscope.stores.base import TimeRange
from memoryscope.timeparse import has_unresolved_time_word, resolve_time_range
from memoryscope.timeparse.calendar_math import at
from memoryscope.timeparse.model_dates import ModelDate, date_texts, read_model_date
from memoryscope.worker import LLMWorker, LLMWorkerParams, register_worker

__all__ = ["ExtractTimeWorker", "parse_date_range"]

logger = logging.getLogger(__name__)

_WEEKDAYS = {
    "en": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "zh": ("星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日"),
}
_START_KEYS = ("start", "from", "begin", "start_date", "开始", "起始", "开始日期")
_END_KEYS = ("end", "to", "until", "end_date", "结束", "截止", "结束日期")
# `start: 2024/10/01, end: 2024/10/15` (no JSON at all), `start：2024年10月1日，end：...`
_LOOSE_FIELD = re.compile(
    r"""["']?(?<![A-Za-z])(start|end|from|to|开始|结束)["']?\s*[:=：]\s*["']?([^"',，;；\n}]+)""", re.IGNORECASE
)


@register_worker("extract_time")
class ExtractTimeWorker(LLMWorker):
    """Set `time_range` (on `event_time`) from the time words in `query`, read at `query_time`.

    Rules first (English and Chinese, see `memoryscope.timeparse`): "last Saturday", "三周前",
    "in March 2023" resolve locally in well under a millisecond. Only when the rules place
    nothing and the query still has a vague time word ("recently", "around the holidays", 前阵子)
    is the generation model asked, for `{"start": ..., "end": ...}`. A query with no time word
    costs no model call. An unusable reply (also a date that is no date, or outside the years
    1900..2200: see `memoryscope.timeparse.model_dates`), or a failed call, leaves `time_range` None.
    """

    reads: ClassVar[tuple[str, ...]] = ("query", "query_time")
    writes: ClassVar[tuple[str, ...]] = ("time_range",)
    needs_generation_model: ClassVar[bool] = False  # the rules work alone: the model only places vague words
    prompt_name: ClassVar[str] = "extract_time"

    class Params(LLMWorkerParams):
        generation_model: str = Field(
            "generation_model", description="Key under `model:` of the LLM asked about vague time words."
        )
        use_llm_fallback: bool = Field(
            True,
            description="Ask the LLM when the rules place nothing but the query has a vague time word; "
            "false keeps the worker rule-only (no model calls).",
        )

    params: Params

    def llm_enabled(self) -> bool:
        return self.params.use_llm_fallback

    def run(self, ctx: MemoryContext) -> None:
        reference = self._reference(ctx.query_time)
        found = resolve_time_range(ctx.query, reference)
        if found is None and self._model is not None and has_unresolved_time_word(ctx.query):
            found = self._ask_model(ctx.query, reference)
        ctx.time_range = None if found is None else TimeRange("event_time", found[0], found[1])

    def _reference(self, moment: datetime | None) -> datetime:
        """The query time in the configured zone: calendar words mean the user's calendar."""
        if moment is None:
            return datetime.now(self._zone)
        if moment.tzinfo is None:
            return moment.replace(tzinfo=self._zone)
        return moment.astimezone(self._zone)

    def _ask_model(self, query: str, reference: datetime) -> tuple[datetime, datetime] | None:
        if self._model is None:
            return None
        messages = self.prompt_messages(
            now=reference.strftime("%Y-%m-%d %H:%M"),
            weekday=_WEEKDAYS.get(self._language, _WEEKDAYS["en"])[reference.weekday()],
            query=query,
        )
        try:
            reply = self._model.chat(messages)
        except Exception as error:  # the time hint is optional: retrieval goes on without it
            logger.warning("worker %s: the model could not place the time in the query (%s); no time range", self.name, error)
            return None
        found = parse_date_range(reply, self._zone)
        if found is None:
            logger.info("worker %s: no usable date range in the model's reply %r", self.name, reply[:200])
        return found


def parse_date_range(reply: str, zone: ZoneInfo) -> tuple[datetime, datetime] | None:
    """`[first day 00:00, day after the last 00:00)` from a reply like `{"start": "2024-10-01",
    "end": "2024-10-15"}` (end included), also single-quoted, a table, `start: ..., end: ...`
    lines or "from 2024/10/01 to 2024/10/15", inside code fences or chatter; None for `{}` or
    anything unusable. Dates may be written as `memoryscope.timeparse.model_dates` reads them
    (`2024/10/01`, `2024.10.1`, `2024年10月1日`, unambiguous `19/10/2024`; a year-last date
    that is ambiguous alone takes the order of the other). One date alone is that day; dates in
    the wrong order are swapped. A date that is impossible or outside the years 1900..2200 counts
    as none (it is logged)."""
    start_text, end_text = _range_texts(reply)
    start, end = _days(start_text, end_text)
    if start is None and end is None:
        return None
    first, last = start or end, end or start
    if first is None or last is None:  # both set by now; keeps the type checker informed
        return None
    first, last = min(first, last), max(first, last)
    return at(first, zone), at(last + timedelta(days=1), zone)


def _range_texts(reply: str) -> tuple[Any, Any]:
    """What the reply gives as start and end: from the first object (or table row) that has
    either, else from `start: ...` fields, else the one or two dates it names; `{}` gives none."""
    empty_object = False
    for value in iter_json(reply):
        row = value[0] if isinstance(value, list) and value and isinstance(value[0], dict) else value
        if isinstance(row, dict):
            start, end = item_field(row, _START_KEYS), item_field(row, _END_KEYS)
            if start is not None or end is not None:
                return start, end
            empty_object = empty_object or not row
    if empty_object:
        return None, None
    loose = {name.lower(): value.strip() for name, value in _LOOSE_FIELD.findall(reply)}
    if loose:
        return loose.get("start", loose.get("from", loose.get("开始"))), loose.get("end", loose.get("to", loose.get("结束")))
    named = date_texts(reply, need_day=True)
    return (named[0], named[-1]) if 1 <= len(named) <= 2 else (None, None)


def _days(start_text: Any, end_text: Any) -> tuple[date | None, date | None]:
    """The two dates; a year-last date ambiguous alone ("01/10/2024") takes the order the other shows."""
    start, end = _read(start_text), _read(end_text)
    order = start.day_first if start.day_first is not None else end.day_first
    if order is not None:
        start, end = _read(start_text, order), _read(end_text, order)
    for text, found in ((start_text, start), (end_text, end)):
        if found.problem:
            logger.warning("extract_time: ignored the model's date %.40r: %s", text, found.problem)
    return start.day, end.day


def _read(value: Any, day_first: bool | None = None) -> ModelDate:
    return read_model_date(value, need_day=True, day_first=day_first) if isinstance(value, str) else ModelDate(None)
