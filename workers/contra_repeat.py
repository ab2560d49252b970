"""Check new observations against each other and today's memories: keep, drop repeats, expire contradictions."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.llm_output import Relation, as_number, item_field, relation_and_number, reply_lines
from memoryscope.memory import MemoryNode, MemoryStatus
from memoryscope.text import content_words
from memoryscope.worker import LLMWorker, LLMWorkerParams, register_worker
from memoryscope.workers._consolidation import json_items, normalise, subject_name

__all__ = ["ContraRepeatWorker", "parse_decisions", "Decision"]

logger = logging.getLogger(__name__)

Verdict = Relation  # "keep", "repeat" or "contradict"
_NUMBER_KEYS = ("fact", "new", "new_fact", "number", "index", "id", "#", "事实", "序号")
_VERDICT_KEYS = ("decision", "verdict", "judgment", "relation", "action", "result", "label", "判断", "结论")
_OTHER_KEYS = ("other", "target", "of", "with", "k", "known", "old", "other_fact", "另一条", "对应")
_EXPECTED_FORMAT = {
    "en": "one line per new fact: `<number>: keep`, `<number>: repeat <K>` or `<number>: contradict <K>`",
    "zh": "每条新事实一行：`<序号>: 保留`、`<序号>: 重复 <K>` 或 `<序号>: 矛盾 <K>`",
}


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    other: int | None = None  # the fact number K a repeat or contradiction refers to


@dataclass
class _Review:
    """The state of one run: kept new observations (in order), expired nodes, and notes."""

    kept: dict[str, MemoryNode]
    expired: dict[str, MemoryNode] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)

    def note(self, key: str, entry: Any) -> None:
        self.notes.setdefault(key, []).append(entry)


@register_worker("contra_repeat")
class ContraRepeatWorker(LLMWorker):
    """Write `new_observations` (what to store) and `expired_memories` (what a newer fact replaced).

    The new `observations` and `timed_observations` are first cleared of exact duplicates
    (the same normalised text as an earlier new one, whose sources they join, or as one of
    `today_memories`) with no LLM. Then ONE call shows the rest beside the today memories most
    like them (at most `contra_repeat_max_count`) and asks, per new fact, `keep`, `repeat K` or
    `contradict K`. A repeat is dropped (a repeat of another new fact adds its sources to that
    one). In a contradiction the fact said later wins: the other becomes `expired` with
    `superseded_by` = the winner's id (a new fact that loses is stored expired, for the
    record). An unreadable answer (after one repair request) keeps every new fact, noted in
    `details[<worker name>]`. With `global.enable_today_contra_repeat: false` everything
    passes through unchecked.
    """

    reads: ClassVar[tuple[str, ...]] = ("observations", "timed_observations", "today_memories")
    writes: ClassVar[tuple[str, ...]] = ("new_observations", "expired_memories", "details")
    prompt_name: ClassVar[str] = "contra_repeat"
    expected_format: ClassVar[dict[str, str]] = _EXPECTED_FORMAT
    answer_name: ClassVar[str] = "repeat/contradiction decisions"

    class Params(LLMWorkerParams):
        generation_model: str = Field("generation_model", description="Key under `model:` of the LLM that compares facts.")
        contra_repeat_max_count: int = Field(
            50, gt=0, description="Most of today's memories shown beside the new facts: those sharing most words with them."
        )

    params: Params

    def bind(self, env: Env) -> None:
        super().bind(env)
        self._enabled: bool = env.settings.enable_today_contra_repeat

    def run(self, ctx: MemoryContext) -> None:
        incoming = sorted((*ctx.observations, *ctx.timed_observations), key=_said)
        if not self._enabled:
            ctx.new_observations = tuple(incoming)
            ctx.expired_memories = ()
            ctx.details[self.name] = {"new": len(incoming), "kept": len(incoming), "checked": False}
            return
        known = [node for node in ctx.today_memories if node.status is MemoryStatus.VALID]
        review = self._drop_exact_duplicates(incoming, known)
        calls = 0
        if review.kept and len(review.kept) + len(known) >= 2:
            shown = self._most_similar(known, list(review.kept.values()))
            self._compare(ctx, review, shown)
            calls = 1
        ctx.new_observations = tuple(review.kept.values())
        ctx.expired_memories = tuple(review.expired.values())
        ctx.details[self.name] = {
            "new": len(incoming),
            "kept": len(review.kept),
            "expired": len(review.expired),
            "compared_with": len(known),
            "llm_calls": calls,
            **review.notes,
        }

    def _drop_exact_duplicates(self, incoming: Sequence[MemoryNode], known: Sequence[MemoryNode]) -> _Review:
        review = _Review(kept={})
        known_text = {normalise(node.content): node for node in known}
        known_ids = {node.memory_id for node in known}
        first_new: dict[str, str] = {}  # normalised text → id of the first new node with it
        for node in incoming:
            text = normalise(node.content)
            if node.memory_id in known_ids or text in known_text:
                same = known_text.get(text)
                review.note("duplicates", {"dropped": node.memory_id, "of": same.memory_id if same else node.memory_id})
            elif text in first_new:
                review.note("duplicates", {"dropped": node.memory_id, "of": first_new[text]})
                self._join_sources(review, first_new[text], node)
            elif node.memory_id in review.kept:
                self._join_sources(review, node.memory_id, node)
            else:
                first_new[text] = node.memory_id
                review.kept[node.memory_id] = node
        return review

    def _most_similar(self, known: Sequence[MemoryNode], new: Sequence[MemoryNode]) -> list[MemoryNode]:
        """At most `contra_repeat_max_count` known memories, those sharing most words with a new
        one (newest first among equals), shown oldest first."""
        limit = self.params.contra_repeat_max_count
        if len(known) > limit:
            new_words = [set(content_words(node.content)) for node in new]

            def likeness(node: MemoryNode) -> float:
                words = set(content_words(node.content))
                if not words:
                    return 0.0
                return max((len(words & other) / math.sqrt(len(words) * len(other)) for other in new_words if other), default=0.0)

            known = sorted(known, key=lambda node: (likeness(node), _said(node)), reverse=True)[:limit]
        return sorted(known, key=_said)

    def _compare(self, ctx: MemoryContext, review: _Review, shown: Sequence[MemoryNode]) -> None:
        new = list(review.kept.values())
        numbered: list[tuple[MemoryNode, bool]] = [(node, False) for node in shown] + [(node, True) for node in new]
        lines = [f"{number} {node.format(self._language, self._zone)}" for number, (node, _) in enumerate(numbered, start=1)]
        messages = self.prompt_messages(
            user=subject_name(ctx),
            known="\n".join(lines[: len(shown)]) or self._prompts.get("none", "(none)"),
            new="\n".join(lines[len(shown) :]),
        )
        decisions = self.ask(messages, lambda reply: parse_decisions(reply) or None)
        if decisions is None:
            review.notes["unreadable"] = True
            logger.warning("worker %s: unreadable decisions; keeping all %d new observations", self.name, len(new))
            return
        for number in range(len(shown) + 1, len(numbered) + 1):
            decision = decisions.get(number)
            if decision is None or decision.verdict == "keep":
                continue
            node = numbered[number - 1][0]
            other_number = decision.other
            if other_number is None or not 1 <= other_number <= len(numbered) or other_number == number:
                review.note("ignored", {"fact": number, "decision": decision.verdict, "other": other_number})
                continue
            other, other_is_new = numbered[other_number - 1]
            if decision.verdict == "repeat":
                self._repeat(review, node, other, other_is_new)
            else:
                self._contradict(review, node, other, other_is_new)

    def _repeat(self, review: _Review, node: MemoryNode, other: MemoryNode, other_is_new: bool) -> None:
        if node.memory_id not in review.kept or (other_is_new and other.memory_id not in review.kept):
            return  # already dropped or expired, or a repeat of something no longer kept
        dropped = review.kept.pop(node.memory_id)  # the current version, with any sources joined to it
        if other_is_new:
            self._join_sources(review, other.memory_id, dropped)
        review.note("repeats", {"dropped": node.memory_id, "of": other.memory_id})

    def _contradict(self, review: _Review, node: MemoryNode, other: MemoryNode, other_is_new: bool) -> None:
        if node.memory_id not in review.kept or other.memory_id in review.expired:
            return
        if other_is_new and other.memory_id not in review.kept:
            return  # a fact dropped as a repeat contradicts nothing any more
        # The fact said later holds; on a tie, the one the model flagged.
        winner, loser = (other, node) if _said(other) > _said(node) else (node, other)
        current = review.kept.pop(loser.memory_id, loser)  # a new loser may have had sources joined to it
        review.expired[loser.memory_id] = current.replace(status=MemoryStatus.EXPIRED, superseded_by=winner.memory_id)
        review.note("contradictions", {"expired": loser.memory_id, "superseded_by": winner.memory_id})

    @staticmethod
    def _join_sources(review: _Review, keeper_id: str, repeat: MemoryNode) -> None:
        keeper = review.kept[keeper_id]
        sources = tuple(dict.fromkeys((*keeper.source_message_ids, *repeat.source_message_ids)))
        review.kept[keeper_id] = keeper.replace(source_message_ids=sources)


def parse_decisions(reply: str) -> dict[int, Decision]:
    """Fact number → decision from `N: keep` / `N: repeat K` / `N: contradict K` lines (every
    form the prompts teach, English or Chinese, any case and inflection: "Contradiction with K",
    "duplicate of fact K", "no relation", "被包含 K"; bold numbers, brackets, table rows and
    chatter around them), or from JSON items or table rows like `{"fact": N, "decision":
    "repeat", "other": K}`. First wins; a repeat or contradiction of no fact K is left out."""
    decisions: dict[int, Decision] = {}
    for line in reply_lines(reply):
        found = relation_and_number(line.text) if line.number is not None else None
        if line.number is not None and found is not None:
            _add_decision(decisions, line.number, found[0], found[1])
    if decisions:
        return decisions
    for item in json_items(reply) or []:
        found = relation_and_number(str(item_field(item, _VERDICT_KEYS) or ""))
        if found is not None:
            other = as_number(item_field(item, _OTHER_KEYS))
            _add_decision(decisions, as_number(item_field(item, _NUMBER_KEYS)), found[0], found[1] if other is None else other)
    return decisions


def _add_decision(decisions: dict[int, Decision], number: int | None, verdict: Verdict, other: int | None) -> None:
    if number is not None and (verdict == "keep" or other is not None):
        decisions.setdefault(number, Decision(verdict, None if verdict == "keep" else other))


def _said(node: MemoryNode) -> datetime:
    return node.message_time or node.created_at
