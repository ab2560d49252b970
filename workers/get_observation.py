"""Turn informative messages that say nothing about time into observations about the user."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.llm_output import as_number, item_field
from memoryscope.memory import MemoryNode, MemoryType, format_time
from memoryscope.models.base import ChatMessage
from memoryscope.text import clean_model_text
from memoryscope.worker import LLMWorker, LLMWorkerParams, register_worker
from memoryscope.workers._consolidation import (
    NONE_WORDS,
    chunks_within_budget,
    estimate_tokens,
    json_items,
    local_time,
    mentions_time,
    normalise,
    observation_id,
    subject_name,
    truncate_middle,
)

__all__ = ["GetObservationWorker", "ObservationParams", "parse_observations"]

logger = logging.getLogger(__name__)

_MESSAGE_KEYS = ("message", "sentence", "msg", "index", "id", "n", "number", "#", "消息")
_CONTENT_KEYS = ("content", "observation", "fact", "text", "内容", "事实")
_KEYWORD_KEYS = ("keywords", "keyword", "key_words", "tags", "关键词")
_TIME_KEYS = ("time", "date", "event_time", "时间", "日期")
# Longest observation kept: a fact is a sentence; longer text is chatter or a pasted message.
_MAX_CONTENT_CHARS = 500
_MAX_KEYWORD_CHARS = 200  # longer keyword lists are cut (at a word boundary)
_MAX_TIME_CHARS = 64  # what of the model's "time" is read and kept in meta["time_text"]
_EXPECTED_FORMAT = {
    "en": 'a JSON array, e.g. [{"message": 1, "content": "<fact>", "keywords": "<keywords>"}], or [] for none',
    "zh": '一个 JSON 数组，例如 [{"message": 1, "content": "<事实>", "keywords": "<关键词>"}]，没有则回复 []',
}


class ObservationParams(LLMWorkerParams):
    generation_model: str = Field("generation_model", description="Key under `model:` of the LLM that writes observations.")
    observation_msg_max_size: int = Field(
        1000, gt=10, description="Most characters of one message shown to the LLM; longer ones keep head and tail."
    )
    max_observations_per_message: int = Field(
        5, gt=0, description="Most observations kept from one message; more are skipped as likely garbage."
    )
    prompt_token_budget: int = Field(
        3000, gt=200, description="Estimated prompt tokens per LLM call; more messages than fit are split into further calls."
    )


@dataclass
class _Outcome:
    """What one run made, and what it left out and why."""

    nodes: dict[str, MemoryNode] = field(default_factory=dict)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    unreadable_message_ids: list[str] = field(default_factory=list)
    dropped_times: list[dict[str, Any]] = field(default_factory=list)


@register_worker("get_observation")
class GetObservationWorker(LLMWorker):
    """Write `observations`: facts about the user from the `informative_messages` that have no
    time expression (those with one are `get_observation_with_time`'s).

    ONE call per prompt-budget chunk (normally one per run) asks for a JSON array of
    `{"message": N, "content": ..., "keywords": ...}`: third-person facts in the configured
    language. What the model wrote is cleaned first (`memoryscope.text.clean_model_text`: no
    control characters, escape sequences or bidi overrides; content must be a string of at most
    500 characters, keywords a string or list, cut to 200). Each becomes an `observation` node:
    `value` = keywords, `message_time` = its
    message's time, `source_message_ids` = the message's memory id, and a memory id derived
    from user, sources and content (a redo of the same batch writes the same nodes). Items that
    are empty, "none", too long, point at no message, or exceed `max_observations_per_message` are
    skipped, and listed in `details[<worker name>]`. A whole reply that stays unreadable after one
    repair request is skipped too: its messages are named in `unreadable_message_ids`, and
    `store_memory` leaves them pending.
    """

    reads: ClassVar[tuple[str, ...]] = ("informative_messages",)
    writes: ClassVar[tuple[str, ...]] = ("observations", "unreadable_message_ids", "details")
    prompt_name: ClassVar[str] = "get_observation"
    expected_format: ClassVar[dict[str, str]] = _EXPECTED_FORMAT
    answer_name: ClassVar[str] = "observations"

    class Params(ObservationParams):
        pass

    params: ObservationParams

    def run(self, ctx: MemoryContext) -> None:
        messages = [node for node in ctx.informative_messages if self.selects(node)]
        outcome = self._extract(ctx, messages) if messages else _Outcome()
        self.assign(ctx, tuple(outcome.nodes.values()), tuple(outcome.unreadable_message_ids))
        ctx.details[self.name] = {
            "messages": len(messages),
            "observations": len(outcome.nodes),
            "skipped": outcome.skipped,
            "dropped_times": outcome.dropped_times,
        }

    # -- what differs in get_observation_with_time --

    def selects(self, message: MemoryNode) -> bool:
        """Whether this worker handles `message`: here, those that say nothing about time."""
        return not mentions_time(message.content, local_time(message, self._zone))

    def assign(self, ctx: MemoryContext, nodes: tuple[MemoryNode, ...], unreadable_ids: tuple[str, ...]) -> None:
        """Set this worker's fields: the facts, and the messages whose facts stayed unreadable."""
        ctx.observations = nodes
        ctx.unreadable_message_ids = unreadable_ids

    def line(self, number: int, message: MemoryNode, speaker: str) -> str:
        colon = "：" if self._language == "zh" else ": "
        return f"{number} {speaker}{colon}{self._text(message)}"

    def event_time(self, message: MemoryNode, llm_time: str) -> tuple[datetime | None, dict[str, Any]]:
        """When the fact happened, and notes for `meta`; facts from timeless messages have none."""
        return None, {}

    def said_at(self, message: MemoryNode) -> str:
        """When `message` was said, as the prompts show it: `2024-10-26 21:26:20 Sat`."""
        return format_time(local_time(message, self._zone), self._language)

    # -- shared --

    def _text(self, message: MemoryNode) -> str:
        return " ".join(truncate_middle(message.content, self.params.observation_msg_max_size).split())

    def _extract(self, ctx: MemoryContext, messages: Sequence[MemoryNode]) -> _Outcome:
        outcome = _Outcome()
        speaker = subject_name(ctx)
        lines = [self.line(0, message, speaker) for message in messages]
        fixed = estimate_tokens(self._prompts["system"]) + estimate_tokens(self._prompts["user"]) + 8 * len(speaker)
        chunks = chunks_within_budget(lines, fixed, self.params.prompt_token_budget)

        def build(chunk: Sequence[int]) -> list[ChatMessage]:
            numbered = [self.line(position, messages[index], speaker) for position, index in enumerate(chunk, start=1)]
            return self.prompt_messages(user=speaker, count=len(chunk), messages="\n".join(numbered))

        for chunk in chunks:
            items = self.ask(build(chunk), parse_observations)
            if items is None:
                outcome.unreadable_message_ids += [messages[index].memory_id for index in chunk]
                continue
            per_message: dict[str, int] = {}
            for item in items:
                self._take(ctx, item, [messages[index] for index in chunk], per_message, outcome)
        if outcome.skipped or outcome.unreadable_message_ids:
            logger.warning(
                "worker %s: skipped %d observation item(s) and %d message(s) with unreadable answers",
                self.name, len(outcome.skipped), len(outcome.unreadable_message_ids),
            )  # fmt: skip
        return outcome

    def _take(
        self,
        ctx: MemoryContext,
        item: dict[str, Any],
        chunk: Sequence[MemoryNode],
        per_message: dict[str, int],
        outcome: _Outcome,
    ) -> None:
        """Add the observation `item` describes to `outcome`, or note why it was skipped."""
        number = as_number(item_field(item, _MESSAGE_KEYS))
        if number is None or not 1 <= number <= len(chunk):
            outcome.skipped.append({"item": _short(item), "reason": "no such message"})
            return
        source = chunk[number - 1]
        content, problem = _clean_content(item_field(item, _CONTENT_KEYS))
        if content is None:
            outcome.skipped.append({"message_id": source.memory_id, "item": _short(item), "reason": problem})
            return
        if per_message.get(source.memory_id, 0) >= self.params.max_observations_per_message:
            outcome.skipped.append({"message_id": source.memory_id, "item": _short(item), "reason": "too many for one message"})
            return
        memory_id = observation_id(ctx, (source.memory_id,), content)
        if memory_id in outcome.nodes:
            return  # the same fact twice from the same message: one node
        llm_time = clean_model_text(item_field(item, _TIME_KEYS), _MAX_TIME_CHARS)
        event_time, notes = self.event_time(source, llm_time)
        time_problem = notes.pop("time_problem", None)
        if time_problem:
            outcome.dropped_times.append(
                {"memory_id": memory_id, "message_id": source.memory_id, "time": llm_time, "reason": time_problem}
            )
        per_message[source.memory_id] = per_message.get(source.memory_id, 0) + 1
        outcome.nodes[memory_id] = MemoryNode(
            user_name=ctx.user_name,
            target_name=ctx.target_name,
            workspace=ctx.workspace,
            memory_id=memory_id,
            memory_type=MemoryType.OBSERVATION,
            content=content,
            value=_keywords(item_field(item, _KEYWORD_KEYS)),
            event_time=event_time,
            message_time=source.message_time or source.created_at,
            source_message_ids=(source.memory_id,),
            meta={"worker": self.name, **notes},
        )


def parse_observations(reply: str) -> list[dict[str, Any]] | None:
    """The observation items of a reply (a JSON array of objects, in fences or chatter, also
    single-quoted or with trailing commas, or the rows of a markdown table), `[]` for "none",
    None when the reply has no such array (then the caller asks for a repair)."""
    return json_items(reply)


def _clean_content(value: Any) -> tuple[str | None, str]:
    """The fact as one clean line, or None and why it is no fact (not text, empty, "none",
    markup, too long)."""
    if not isinstance(value, str):
        return None, "no usable content"
    text = clean_model_text(value).strip("\"'“”‘’「」").strip()
    if len(text) > _MAX_CONTENT_CHARS:
        return None, "too long"
    if not text or text[0] in "{[<":
        return None, "no usable content"
    if text.casefold().rstrip(".。") in NONE_WORDS or normalise(text) in NONE_WORDS:
        return None, "no usable content"
    if not any(char.isalpha() for char in text):
        return None, "no usable content"
    return text, ""


def _keywords(value: Any) -> str:
    """The keywords as one clean line: a string, or a list's plain items joined (nested parts left out)."""
    if isinstance(value, list):
        value = [part for part in value if isinstance(part, str | int | float) and not isinstance(part, bool)]
    elif not isinstance(value, str):
        return ""
    text = clean_model_text(value, _MAX_KEYWORD_CHARS)
    return "" if normalise(text) in NONE_WORDS else text


def _short(item: dict[str, Any]) -> str:
    return repr(item)[:200]
