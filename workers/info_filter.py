"""Take the user's pending messages and keep those that say something worth remembering."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import Field, field_validator

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.history import ChangeSource
from memoryscope.llm_output import as_number, extract_json, item_field, reply_lines
from memoryscope.memory import MemoryNode, utc_now
from memoryscope.message_retries import (
    DEFAULT_BACKOFF_S,
    DEFAULT_MAX_FAILURES,
    FAILED,
    backlog,
    cleared,
    note_failure,
    pending_filter,
    pending_messages,
    waiting_note,
)
from memoryscope.models.base import ChatMessage
from memoryscope.stores.base import MemoryStore
from memoryscope.worker import LLMWorker, LLMWorkerParams, register_worker
from memoryscope.workers._consolidation import chunks_within_budget, estimate_tokens, json_items, shown_line, subject_name

__all__ = ["InfoFilterWorker", "parse_scores"]

logger = logging.getLogger(__name__)

NO_NEW_MESSAGES = "no new messages"
_NO_NEW_MESSAGES = {"en": "no new messages", "zh": "没有新消息"}
_SEPARATOR = {"en": "; ", "zh": "；"}
_ALL_LEFT_PENDING = {
    "en": "left {n} message(s) pending: the model's answer about them was unreadable",
    "zh": "{n} 条消息仍待整理：模型对它们的回答无法解析",
}
# What may follow a sentence's number before its score 0-3: `3`, `<3>`, `score 3`, `gets a score of 3`,
# `3 points`, `得分3`, `3分`. Only these filler words: "1 is about music" and "1 [2024-...]" give none.
_SCORE = re.compile(
    r"^[<\[(（【]?\s*(?:(?:(?:is|was|gets?|got|has|receives?|received|earns?|given|scores?|scored|rated|rating|a|an|the|of"
    r"|with)\b|得分|分数|评分|打分|为|是|得)\s*[:：=]?\s*)*[<\[(（【]?\s*([0-3])(?!\d)(?![.,]\d)",
    re.IGNORECASE,
)
_NUMBER_KEYS = ("message", "sentence", "index", "id", "n", "number", "#", "no", "序号", "句子", "编号")
_SCORE_KEYS = ("score", "rating", "points", "分数", "得分", "评分")
_EXPECTED_FORMAT = {
    "en": "one line per sentence, `<number>: <score>`, e.g.\n1: 3\n2: 0",
    "zh": "每个句子一行，`<序号>: <分数>`，例如\n1: 3\n2: 0",
}


@register_worker("info_filter")
class InfoFilterWorker(LLMWorker):
    """Load the pending conversation memories and score the user's ones for information.

    Pending means `reflected=False` (not consolidated yet), of this user, target and workspace:
    the first stored, at most `max_pending_messages` (the rest wait for the next run), in the
    order they were said; messages backing off or parked after failures (see
    `memoryscope.message_retries`) only when the caller asks `retry_failed`. With none, the
    workflow stops with "no new messages", and `result` adds what still waits (backing off
    until when, parked). The user's ones are scored 0-3 by the generation
    model in ONE call per prompt-budget chunk (numbered lines in, `N: score` lines out), and
    those scored in `preserved_scores` become `informative_messages`. Assistant messages are
    kept but never mined. A message a readable answer left out counts as not informative and is
    named in `details[<worker name>]["unscored_message_ids"]`.

    The messages of a chunk whose answer stayed unreadable after the one repair request are
    left pending: their failure is noted on them at once (count, error, backoff; parked after
    `max_consolidation_failures`), in a write of their own that never revives a deleted message,
    and they are named in `details[<worker name>]["failed_message_ids"]`. The others become
    `pending_messages` (so the last step marks them consolidated); when none is left, the
    workflow stops saying so.
    """

    reads: ClassVar[tuple[str, ...]] = ("user_name", "target_name", "workspace", "retry_failed")
    # `result` and the stop: when nothing is pending, or every message was left pending
    writes: ClassVar[tuple[str, ...]] = ("pending_messages", "informative_messages", "result", "details")
    prompt_name: ClassVar[str] = "info_filter"
    expected_format: ClassVar[dict[str, str]] = _EXPECTED_FORMAT
    answer_name: ClassVar[str] = "message scores"

    class Params(LLMWorkerParams):
        generation_model: str = Field("generation_model", description="Key under `model:` of the LLM that scores messages.")
        preserved_scores: tuple[int, ...] = Field(
            (2, 3),
            description='Scores (0-3) that make a message informative; a list, or "2,3" as MemoryScope 0.1 wrote it.',
        )
        info_filter_msg_max_size: int = Field(
            200, gt=10, description="Most characters of one message shown to the LLM; longer ones keep head and tail."
        )
        max_pending_messages: int = Field(
            50, gt=0, description="Most pending messages taken per run, first stored first; the rest wait for the next run."
        )
        prompt_token_budget: int = Field(
            3000,
            gt=200,
            description="Estimated prompt tokens per LLM call; more messages than fit are split into further calls.",
        )
        max_consolidation_failures: int = Field(
            DEFAULT_MAX_FAILURES,
            gt=0,
            le=1000,
            description="Runs a message may fail on (the model's answer about it unreadable after one repair request) "
            "before it is parked as failed: then only `retry_failed` (`memoryscope run consolidate_memory "
            "--retry-failed`) takes it again.",
        )
        retry_backoff_s: float = Field(
            DEFAULT_BACKOFF_S,
            ge=0,
            le=86_400,
            description="How long a message waits after its first failure; doubled after each further one, at most a day.",
        )

        @field_validator("preserved_scores", mode="before")
        @classmethod
        def _read_comma_list(cls, value: Any) -> Any:
            if isinstance(value, str):
                return tuple(int(part) for part in value.replace("，", ",").split(",") if part.strip())
            if isinstance(value, int):
                return (value,)
            return value

        @field_validator("preserved_scores")
        @classmethod
        def _scores_in_range(cls, value: tuple[int, ...]) -> tuple[int, ...]:
            if not value or any(score not in (0, 1, 2, 3) for score in value):
                raise ValueError(f"preserved_scores must be some of 0, 1, 2, 3; got {list(value)}")
            return value

    params: Params

    def bind(self, env: Env) -> None:
        self._store: MemoryStore = env.require_store(f"worker.{self.name}")
        super().bind(env)

    def run(self, ctx: MemoryContext) -> None:
        pending = self._pending(ctx)
        if not pending:
            ctx.pending_messages = ()
            ctx.informative_messages = ()
            ctx.result = self._with_waiting(ctx, _NO_NEW_MESSAGES.get(self._language, NO_NEW_MESSAGES))
            ctx.stop(NO_NEW_MESSAGES)
            return
        users = [node for node in pending if node.meta.get("role", "user") == "user"]
        scores, unreadable, calls = self._scores(ctx, users) if users else ({}, set(), 0)
        failed = self._note_failures(ctx, [node for node in users if node.memory_id in unreadable]) if unreadable else []
        preserved = set(self.params.preserved_scores)
        taken = [cleared(node) for node in pending if node.memory_id not in unreadable]  # consolidated: notes gone
        informative = tuple(node for node in taken if scores.get(node.memory_id) in preserved)
        unscored = [node.memory_id for node in users if node.memory_id not in scores and node.memory_id not in unreadable]
        if unscored:
            logger.warning("worker %s: %d message(s) got no score; kept as not informative", self.name, len(unscored))
        ctx.pending_messages = tuple(taken)
        ctx.informative_messages = informative
        ctx.details[self.name] = {
            "pending": len(pending),
            "scored": len(scores),
            "informative": len(informative),
            "unscored_message_ids": unscored,
            "failed_message_ids": [node.memory_id for node in failed],
            "parked": sum(1 for node in failed if node.meta.get(FAILED)),
            "llm_calls": calls,
        }
        if not taken:
            left = _ALL_LEFT_PENDING.get(self._language, _ALL_LEFT_PENDING["en"]).format(n=len(failed))
            ctx.result = self._with_waiting(ctx, left)
            ctx.stop(_ALL_LEFT_PENDING["en"].format(n=len(failed)))

    def _with_waiting(self, ctx: MemoryContext, said: str) -> str:
        """`said`, and what still waits (backing off until when, parked): "no new messages" is
        never all a user reads while messages wait."""
        memory_filter = pending_filter(ctx.user_name, ctx.target_name, ctx.workspace)
        note = waiting_note(backlog(self._store, memory_filter), self._language, self._zone)
        return f"{said}{_SEPARATOR.get(self._language, '; ')}{note}" if note else said

    def _pending(self, ctx: MemoryContext) -> list[MemoryNode]:
        memory_filter = pending_filter(ctx.user_name, ctx.target_name, ctx.workspace)
        found = pending_messages(self._store, memory_filter, self.params.max_pending_messages, retry_failed=ctx.retry_failed)
        return sorted(found, key=lambda node: (node.message_time or node.created_at, node.created_at))

    def _note_failures(self, ctx: MemoryContext, nodes: Sequence[MemoryNode]) -> list[MemoryNode]:
        """Note on `nodes` that the model's answer about them was unreadable, and write that now:
        they stay pending, whatever the rest of the run does. A message deleted meanwhile stays
        deleted (`requires`)."""
        model = self._model.model_name if self._model is not None else self.params.generation_model
        error = f"worker {self.name}: the message scores from {model} stayed unreadable after one repair request"
        now, params = utc_now(), self.params
        noted = [
            note_failure(node, error, now, max_failures=params.max_consolidation_failures, backoff_s=params.retry_backoff_s)
            for node in nodes
        ]
        requires = {node.memory_id: (node.memory_id,) for node in noted}
        dropped = set(self._store.upsert(noted, requires=requires, change=ChangeSource.of(ctx)))
        written = [node for node in noted if node.memory_id not in dropped]
        parked = sum(1 for node in written if node.meta.get(FAILED))
        logger.warning(
            "worker %s: the scores of %d message(s) stayed unreadable; left pending (%d parked as failed)",
            self.name, len(written), parked,
        )  # fmt: skip
        return written

    def _scores(self, ctx: MemoryContext, users: Sequence[MemoryNode]) -> tuple[dict[str, int], set[str], int]:
        """memory_id → score for the messages the model scored, the ids of those whose answer
        stayed unreadable, and how many chunks were asked."""
        name = subject_name(ctx)
        lines = [
            shown_line(0, node, self._language, self._zone, speaker=name, max_chars=self.params.info_filter_msg_max_size)
            for node in users
        ]
        fixed = estimate_tokens(self._prompts["system"]) + estimate_tokens(self._prompts["user"]) + 2 * len(name)
        chunks = chunks_within_budget(lines, fixed, self.params.prompt_token_budget)

        def build(chunk: Sequence[int]) -> list[ChatMessage]:
            numbered = [
                shown_line(
                    position, users[index], self._language, self._zone, speaker=name,
                    max_chars=self.params.info_filter_msg_max_size,
                )
                for position, index in enumerate(chunk, start=1)
            ]  # fmt: skip
            return self.prompt_messages(user=name, count=len(chunk), sentences="\n".join(numbered))

        scores: dict[str, int] = {}
        unreadable: set[str] = set()
        for chunk in chunks:
            answer = self.ask(build(chunk), lambda reply: parse_scores(reply) or None)
            if answer is None:
                unreadable.update(users[index].memory_id for index in chunk)
                continue
            for number, score in answer.items():
                if 1 <= number <= len(chunk):
                    scores[users[chunk[number - 1]].memory_id] = score
        return scores, unreadable, len(chunks)


def parse_scores(reply: str) -> dict[int, int]:
    """Sentence number → score 0-3, first wins, from `N: score` lines (also `**N**: score`,
    `[N] score`, `| N | score |` table rows, "Sentence N gets a score of S", "N. S points",
    chatter around them), else from JSON or a table (`{"1": 3}`, `[{"message": 1, "score": 3}]`,
    `| Sentence | Score |`, single quotes and trailing commas too)."""
    scores: dict[int, int] = {}
    for line in reply_lines(reply):
        match = _SCORE.match(line.text) if line.number is not None else None
        if line.number is not None and match:
            scores.setdefault(line.number, int(match.group(1)))
    if scores:
        return scores
    for item in json_items(reply) or []:
        _add_score(scores, item_field(item, _NUMBER_KEYS), item_field(item, _SCORE_KEYS))
    if scores:
        return scores
    found = extract_json(reply)
    if isinstance(found, dict):
        for key, value in found.items():
            _add_score(scores, key, value)
    return scores


def _add_score(scores: dict[int, int], number: Any, score: Any) -> None:
    index, value = as_number(number), as_number(score)
    if index is not None and value in (0, 1, 2, 3):
        scores.setdefault(index, value)
