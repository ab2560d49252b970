"""Turn informative messages that say when something happened into observations with an event time."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, ClassVar

from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.memory import MemoryNode
from memoryscope.timeparse import find_time_expressions
from memoryscope.timeparse.calendar_math import at
from memoryscope.timeparse.model_dates import read_model_date
from memoryscope.worker import register_worker
from memoryscope.workers._consolidation import local_time, mentions_time
from memoryscope.workers.get_observation import GetObservationWorker, ObservationParams

__all__ = ["GetObservationWithTimeWorker", "parse_llm_date"]

_EXPECTED_FORMAT = {
    "en": 'a JSON array, e.g. [{"message": 1, "content": "<fact>", "keywords": "<keywords>", "time": "YYYY-MM-DD"}], or []',
    "zh": '一个 JSON 数组，例如 [{"message": 1, "content": "<事实>", "keywords": "<关键词>", "time": "YYYY-MM-DD"}]，或 []',
}


@register_worker("get_observation_with_time")
class GetObservationWithTimeWorker(GetObservationWorker):
    """Write `timed_observations`: facts from the `informative_messages` that say when (a time
    expression, or a vague time word), each with `event_time`.

    Like `get_observation` (one batched call, same JSON items plus `"time"`), but the lines
    show when each message was said, and each fact gets an event time: the rule parser
    (`memoryscope.timeparse`) reads the SOURCE message against its message time in the
    configured zone ("last Saturday" said on 2024-10-26 → 2024-10-19); with several time
    expressions in one message the LLM's date picks the one it falls in. Only when the rules
    place nothing (a vague "recently") is the LLM's date used (`use_llm_time_fallback`).
    `meta["time_source"]` says which ("rules" or "llm"), `meta["time_text"]` what was read.
    A model date that is no date ("2024-13-45") or outside the years 1900..2200 (see
    `memoryscope.timeparse.model_dates`) is ignored: the fact is kept, without that time, and
    listed in `details[<worker name>]["dropped_times"]`. The messages of an unreadable reply are
    named in `unreadable_timed_message_ids` (a field of its own: it runs beside `get_observation`).
    """

    writes: ClassVar[tuple[str, ...]] = ("timed_observations", "unreadable_timed_message_ids", "details")
    prompt_name: ClassVar[str] = "get_observation_with_time"
    expected_format: ClassVar[dict[str, str]] = _EXPECTED_FORMAT

    class Params(ObservationParams):
        use_llm_time_fallback: bool = Field(
            True, description="Use the LLM's date when the rules place no time in the message; false leaves event_time empty."
        )

    params: Params

    def selects(self, message: MemoryNode) -> bool:
        return mentions_time(message.content, local_time(message, self._zone))

    def assign(self, ctx: MemoryContext, nodes: tuple[MemoryNode, ...], unreadable_ids: tuple[str, ...]) -> None:
        ctx.timed_observations = nodes
        ctx.unreadable_timed_message_ids = unreadable_ids

    def line(self, number: int, message: MemoryNode, speaker: str) -> str:
        colon = "：" if self._language == "zh" else ": "
        return f"{number} [{self.said_at(message)}] {speaker}{colon}{self._text(message)}"

    def event_time(self, message: MemoryNode, llm_time: str) -> tuple[datetime | None, dict[str, Any]]:
        reference = local_time(message, self._zone)
        llm_date = read_model_date(llm_time)
        llm_moment = at(llm_date.day, self._zone) if llm_date.day is not None else None
        problem = {"time_problem": llm_date.problem} if llm_date.problem else {}
        mentions = find_time_expressions(message.content, reference)
        if mentions:
            chosen = next(
                (mention for mention in mentions if llm_moment is not None and mention.start <= llm_moment < mention.end),
                mentions[0],
            )
            return chosen.start, {"time_source": "rules", "time_text": chosen.text, **problem}
        if llm_moment is not None and self.params.use_llm_time_fallback:
            return llm_moment, {"time_source": "llm", "time_text": llm_time}
        return None, problem


def parse_llm_date(text: str) -> date | None:
    """The date in an LLM's `"2024-10-19"` (also `2024/10/19`, `2024.10.19`, `2024年10月19日`,
    `2024-10` as its first day, and year-last dates only when unambiguous: `19/10/2024`), or None
    for "", "unknown", an impossible or ambiguous date (`10/01/2024`) or a year outside 1900..2200."""
    return read_model_date(text).day
