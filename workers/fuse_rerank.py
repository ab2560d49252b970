"""The final order of retrieved memories: relevance, weighted by kind of memory, by time and by speaker."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from functools import lru_cache
from operator import itemgetter
from typing import ClassVar
from zoneinfo import ZoneInfo

from pydantic import Field, field_validator

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.stores.base import TimeRange
from memoryscope.worker import Worker, WorkerParams, register_worker

__all__ = ["FuseRerankWorker"]

# MemoryScope 0.1's demo weights: what the user said least, what was concluded about them most.
DEFAULT_RATIOS: dict[MemoryType, float] = {
    MemoryType.CONVERSATION: 0.5,
    MemoryType.OBSERVATION: 1.0,
    MemoryType.OBS_CUSTOMIZED: 1.2,
    MemoryType.INSIGHT: 2.0,
}


@register_worker("fuse_rerank")
class FuseRerankWorker(Worker):
    """Score = rank score × the memory type's ratio × `fuse_assistant_ratio` when it is a reply the
    assistant gave × `fuse_time_ratio` when the memory is in time × `fuse_speaker_ratio` when it
    was said by the one person the query names.

    A chat stores both sides of each turn; a conversation memory with `meta["role"] ==
    "assistant"` is the assistant's reply. Its weight is applied here, where the final order and
    the top-k are decided, so it holds whatever rank model scored the candidates: the user's own
    words rank above the assistant's echo of them, while "what did you recommend?" still finds
    the reply. With `fuse_assistant_ratio: 0` replies are never returned.

    A memory is "in time" when its `event_time` or its `message_time` falls in the `time_range`
    that `extract_time` found in the query (no range: no boost). A query that names exactly one
    of the candidates' speakers (`meta["speaker"]`, as a whole word) asks about that person, and
    what a person says about themselves is where the answer usually is ("What did Jon do after
    losing his job?"); a query naming two or more speakers, or none, gets no speaker boost, nor
    one naming the user whose memories these are (`user_name` or `target_name`): all of the
    user's own messages are theirs, and a boost would lift the unrelated ones above the facts
    learnt about them. Memories whose rank score (in
    [0, 1], see `semantic_rank`) is below `fuse_score_threshold` are dropped before weighting,
    as in MemoryScope 0.1. Memories with the same text are shown once, with their best score.
    `memories` keeps the best `fuse_rerank_top_k` (default `global.output_memory_max_count`; a
    caller's `top_k` instead, when given), best first, each carrying its final score.
    """

    reads: ClassVar[tuple[str, ...]] = ("query", "ranked", "top_k")
    # Read when present, never required: a workflow without extract_time simply gets no boost.
    optional_reads: ClassVar[tuple[str, ...]] = ("time_range",)
    writes: ClassVar[tuple[str, ...]] = ("memories",)

    class Params(WorkerParams):
        fuse_ratio_dict: dict[MemoryType, float] = Field(
            default_factory=lambda: dict(DEFAULT_RATIOS),
            description="Weight per memory type; types left out keep their default "
            "(conversation 0.5, observation 1, obs_customized 1.2, insight 2).",
        )
        fuse_time_ratio: float = Field(
            2.0, gt=0, description="Weight of a memory whose event or message time is in the query's time range."
        )
        fuse_speaker_ratio: float = Field(
            1.0, gt=0, description="Weight of a message said by the one speaker the query names (1: no boost)."
        )
        fuse_assistant_ratio: float = Field(
            0.5,
            ge=0,
            le=1,
            description="Weight of a reply the assistant gave (a conversation memory with meta role 'assistant'), "
            "on top of the conversation ratio: below the user's own words, still found when asked about. "
            "0: replies are never returned.",
        )
        fuse_score_threshold: float = Field(
            0.0, description="Drop memories whose rank score (0..1, before weighting) is below this."
        )
        fuse_rerank_top_k: int | None = Field(
            None, gt=0, description="How many memories to return; default `global.output_memory_max_count`."
        )

        @field_validator("fuse_ratio_dict")
        @classmethod
        def _complete(cls, value: dict[MemoryType, float]) -> dict[MemoryType, float]:
            negative = sorted(memory_type.value for memory_type, ratio in value.items() if ratio < 0)
            if negative:
                raise ValueError(f"ratios must not be negative: {', '.join(negative)}")
            return {**DEFAULT_RATIOS, **value}

    params: Params

    def bind(self, env: Env) -> None:
        self._zone: ZoneInfo = env.settings.tzinfo
        self._top_k = self.params.fuse_rerank_top_k or env.settings.output_memory_max_count

    def run(self, ctx: MemoryContext) -> None:
        params = self.params  # read once: ~100 memories pass through this loop per query
        window = self._window(ctx.time_range)
        ratios, threshold = params.fuse_ratio_dict, params.fuse_score_threshold
        assistant_ratio, time_ratio, speaker_ratio = (
            params.fuse_assistant_ratio,
            params.fuse_time_ratio,
            params.fuse_speaker_ratio,
        )
        speaker = named_speaker(ctx.query, ctx.ranked) if speaker_ratio != 1.0 else None
        if speaker is not None and _is_the_user(speaker, ctx):
            # every message of the user's own is theirs: a boost would lift them all, on topic or
            # not, to the level of what was learnt about the user (the facts the query asks for)
            speaker = None
        best: dict[str, tuple[float, MemoryNode]] = {}  # text -> its best score and memory
        for node in ctx.ranked:
            rank_score = 1.0 if node.score is None else node.score
            if rank_score < threshold:
                continue
            score = rank_score * ratios[node.memory_type]
            meta = node.meta
            if node.memory_type is MemoryType.CONVERSATION and meta.get("role") == "assistant":
                if assistant_ratio == 0:
                    continue
                score *= assistant_ratio
            if window is not None and _in_window(node, window):
                score *= time_ratio
            if speaker is not None and meta.get("speaker") == speaker:
                score *= speaker_ratio
            text = node.content.strip()
            seen = best.get(text)
            if seen is None or score > seen[0]:
                best[text] = (score, node)
        ordered = sorted(best.values(), key=itemgetter(0), reverse=True)
        # scored copies only of the memories kept: a copy costs microseconds and ~100 come in
        ctx.memories = tuple(node.with_score(score) for score, node in ordered[: ctx.top_k or self._top_k])

    def _window(self, time_range: TimeRange | None) -> tuple[datetime | None, datetime | None] | None:
        if time_range is None or (time_range.start is None and time_range.end is None):
            return None
        return self._aware(time_range.start), self._aware(time_range.end)

    def _aware(self, moment: datetime | None) -> datetime | None:
        if moment is not None and moment.tzinfo is None:
            return moment.replace(tzinfo=self._zone)
        return moment


def _is_the_user(speaker: str, ctx: MemoryContext) -> bool:
    """Whether `speaker` is the person whose memories these are (the user, or the target)."""
    name = speaker.strip().casefold()
    return name in {who.strip().casefold() for who in (ctx.user_name, ctx.target_name) if who.strip()}


def named_speaker(query: str, memories: Iterable[MemoryNode]) -> str | None:
    """The one speaker of `memories` that `query` names, or None when it names none or several.

    A name counts as named when it appears in the query as a whole word, ignoring case (so "Tim"
    is not found in "time"); a name in a script without spaces (Chinese) counts as a substring.
    """
    speakers = {speaker for node in memories if isinstance(speaker := node.meta.get("speaker"), str) and speaker.strip()}
    named = [speaker for speaker in speakers if _names(query, speaker)]
    return named[0] if len(named) == 1 else None


def _names(query: str, speaker: str) -> bool:
    name = speaker.strip()
    if not name.isascii():
        return name.casefold() in query.casefold()
    return _whole_word(name).search(query) is not None


@lru_cache(maxsize=1024)
def _whole_word(name: str) -> re.Pattern[str]:
    """`name` as a whole word, any case (compiled once: every query looks for each speaker)."""
    return re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])", flags=re.IGNORECASE)


def _in_window(node: MemoryNode, window: tuple[datetime | None, datetime | None]) -> bool:
    start, end = window
    for moment in (node.event_time, node.message_time):
        if moment is not None and (start is None or start <= moment) and (end is None or moment < end):
            return True
    return False
