"""Take the user's pending messages and keep those that say something worth remembering."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

from pydantic import Field, field_validator

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.llm_output import extract_json
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.models.base import ChatMessage, GenerationModel
from memoryscope.prompts import load_prompts
from memoryscope.stores.base import MemoryFilter, MemoryStore
from memoryscope.worker import LLMWorkerParams, Worker, register_worker
from memoryscope.workers._consolidation import (
    ask_in_chunks,
    chunks_within_budget,
    estimate_tokens,
    json_items,
    require_model,
    shown_line,
    subject_name,
)

__all__ = ["InfoFilterWorker", "parse_scores"]

logger = logging.getLogger(__name__)

NO_NEW_MESSAGES = "no new messages"
_NO_NEW_MESSAGES = {"en": "no new messages", "zh": "没有新消息"}
# `3: 2`, `[3] 2`, `Result: <3> <2>`, `- 3. score 2`, `句子3：2分`: a sentence number, then a score 0-3.
_SCORE_LINE = re.compile(
    r"^\s*(?:[-*•]\s*)?(?:(?:result|sentence|message|结果|句子|消息)\s*[:：]?\s*)?[<\[(（【#]?\s*(\d+)\s*[>\])）】]?"
    r"\s*[.:：、,，=\-]?\s*[<\[(（【]?\s*(?:(?:score|分数)\s*[:：=]?\s*)?([0-3])(?!\d)",
    re.IGNORECASE,
)
_EXPECTED_FORMAT = {
    "en": "one line per sentence, `<number>: <score>`, e.g.\n1: 3\n2: 0",
    "zh": "每个句子一行，`<序号>: <分数>`，例如\n1: 3\n2: 0",
}


@register_worker("info_filter")
class InfoFilterWorker(Worker):
    """Load the pending conversation memories and score the user's ones for information.

    Pending means `reflected=False` (not consolidated yet), of this user, target and workspace:
    the first stored, at most `max_pending_messages` (the rest wait for the next run), in the
    order they were said. With none,
    the workflow stops with "no new messages". All of them become `pending_messages` (so the
    last step marks them consolidated); the user's ones are scored 0-3 by the generation model
    in ONE call per prompt-budget chunk (numbered lines in, `N: score` lines out), and those
    scored in `preserved_scores` become `informative_messages`. Assistant messages are kept
    but never mined. A message the model did not score counts as not informative and is named
    in `details[<worker name>]["unscored_message_ids"]`.
    """

    reads: ClassVar[tuple[str, ...]] = ("user_name", "target_name", "workspace")
    writes: ClassVar[tuple[str, ...]] = ("pending_messages", "informative_messages")
    needs_generation_model: ClassVar[bool] = True

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
        where = f"worker.{self.name}"
        self._store: MemoryStore = env.require_store(where)
        self._model: GenerationModel | None = env.generation_model(
            self.params.generation_model, f"{where}.generation_model", self.params.generation_model_kwargs
        )
        self._language: str = env.settings.language
        self._zone: ZoneInfo = env.settings.tzinfo
        self._prompts = load_prompts("info_filter", self._language)

    def run(self, ctx: MemoryContext) -> None:
        pending = self._pending(ctx)
        if not pending:
            ctx.pending_messages = ()
            ctx.informative_messages = ()
            ctx.result = _NO_NEW_MESSAGES.get(self._language, NO_NEW_MESSAGES)
            ctx.stop(NO_NEW_MESSAGES)
            return
        users = [node for node in pending if node.meta.get("role", "user") == "user"]
        scores, calls = self._scores(ctx, users) if users else ({}, 0)
        preserved = set(self.params.preserved_scores)
        informative = tuple(node for node in users if scores.get(node.memory_id) in preserved)
        unscored = [node.memory_id for node in users if node.memory_id not in scores]
        if unscored:
            logger.warning("worker %s: %d message(s) got no score; kept as not informative", self.name, len(unscored))
        ctx.pending_messages = tuple(pending)
        ctx.informative_messages = informative
        ctx.details[self.name] = {
            "pending": len(pending),
            "scored": len(scores),
            "informative": len(informative),
            "unscored_message_ids": unscored,
            "llm_calls": calls,
        }

    def _pending(self, ctx: MemoryContext) -> list[MemoryNode]:
        memory_filter = MemoryFilter(
            user_name=ctx.user_name,
            target_name=ctx.target_name,
            workspace=ctx.workspace,
            memory_types=(MemoryType.CONVERSATION,),
            reflected=False,
        )
        found = self._store.scan(memory_filter, limit=self.params.max_pending_messages, newest_first=False)
        return sorted(found, key=lambda node: (node.message_time or node.created_at, node.created_at))

    def _scores(self, ctx: MemoryContext, users: Sequence[MemoryNode]) -> tuple[dict[str, int], int]:
        """memory_id → score for the messages the model scored, and how many chunks were asked."""
        model = require_model(self._model, self.name, self.params.generation_model)
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
            values = {"user": name, "count": len(chunk), "sentences": "\n".join(numbered)}
            return [
                ChatMessage("system", self._prompts["system"].format(**values)),
                ChatMessage("user", self._prompts["user"].format(**values)),
            ]

        scores: dict[str, int] = {}
        answers = ask_in_chunks(
            model,
            chunks,
            build,
            lambda reply: parse_scores(reply) or None,
            expected_format=_EXPECTED_FORMAT.get(self._language, _EXPECTED_FORMAT["en"]),
            language=self._language,
            what="message scores",
        )
        for chunk, answer in answers:
            for number, score in (answer or {}).items():
                if 1 <= number <= len(chunk):
                    scores[users[chunk[number - 1]].memory_id] = score
        return scores, len(chunks)


def parse_scores(reply: str) -> dict[int, int]:
    """Sentence number → score 0-3 from `N: score` lines (tolerating `<N> <score>`, `[N] score`,
    chatter around them), or from JSON (`{"1": 3}`, `[{"message": 1, "score": 3}]`). First wins."""
    scores: dict[int, int] = {}
    for line in reply.splitlines():
        match = _SCORE_LINE.match(line)
        if match:
            scores.setdefault(int(match.group(1)), int(match.group(2)))
    if scores:
        return scores
    for item in json_items(reply) or []:
        number = _integer(next((item[key] for key in ("message", "sentence", "index", "id", "n") if key in item), None))
        score = _integer(item.get("score"))
        if number is not None and score in (0, 1, 2, 3):
            scores.setdefault(number, score)
    if scores:
        return scores
    found = extract_json(reply)
    if isinstance(found, dict):
        for key, value in found.items():
            number, score = _integer(key), _integer(value)
            if number is not None and score in (0, 1, 2, 3):
                scores.setdefault(number, score)
    return scores


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None
