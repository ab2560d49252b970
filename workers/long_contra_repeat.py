"""Expire long-term memories that the new insights and observations contradict or repeat."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.llm_output import as_number, item_field, relation, relation_and_number, reply_lines
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType, utc_now
from memoryscope.models.token_count import count_tokens
from memoryscope.stores.base import MemoryFilter, MemoryStore, SearchMode
from memoryscope.worker import LLMWorkerParams, register_worker
from memoryscope.workers._consolidation import json_items

from ._insight import ReflectionWorker, is_unknown, person

__all__ = ["LongContraRepeatWorker", "parse_judgments", "CONTRADICTION", "REPEAT"]

CONTRADICTION = "contradiction"
REPEAT = "repeat"
_KNOWLEDGE = (MemoryType.OBSERVATION, MemoryType.OBS_CUSTOMIZED, MemoryType.INSIGHT)
_FORMAT = '[{"old": 3, "new": 1, "judgment": "contradiction"}]  (or [] when no older memory is contradicted or repeated)'
_JUDGED = {"contradict": CONTRADICTION, "repeat": REPEAT}
_OLD_KEYS = ("old", "old_memory", "older", "memory", "旧", "旧记忆", "较早的记忆")
_NEW_KEYS = ("new", "new_fact", "fact", "新", "新事实")
_JUDGMENT_KEYS = ("judgment", "judgement", "status", "relation", "decision", "verdict", "label", "result", "判断", "结论")
# After an older memory's number: the new fact's (`N1`, `<N1>`, `new N1`), then the judgment.
_NEW_NUMBER = re.compile(r"(?:new(?:\s+fact)?\s*)?[<\[(]?\s*N?(\d{1,6})(?!\d)\s*[>\])]?[\s,;:：|=>-]*", re.IGNORECASE)


@register_worker("long_contra_repeat")
class LongContraRepeatWorker(ReflectionWorker):
    """Set `expired_memories`: older valid memories that a new fact contradicts or repeats.

    New facts are the `updated_insights` (first) and the `unreflected_observations` (newest
    first). For each, the store is searched (dense, scoped to the user, target and workspace)
    for its `long_contra_repeat_top_k` most similar valid observations, obs_customized and
    insights; those with a cosine similarity of at least `long_contra_repeat_threshold` are
    compared, the best of every fact first, as many as `max_prompt_tokens` allows (new facts
    take at most half of it). The new facts themselves, and the old versions of updated
    insights, are never candidates. ONE model call judges every candidate against every new
    fact; a contradicted or repeated memory comes back with `status` expired and
    `superseded_by` the id of the new fact that did it. Expirations an earlier step made are
    kept. With `global.enable_long_contra_repeat` off, or nothing similar enough, no call is
    made. An answer unreadable after one repair expires nothing (`details[<worker>]`).
    """

    reads: ClassVar[tuple[str, ...]] = ("updated_insights", "unreflected_observations")
    # Kept and added to when an earlier step expired memories already.
    optional_reads: ClassVar[tuple[str, ...]] = ("expired_memories",)
    writes: ClassVar[tuple[str, ...]] = ("expired_memories", "details")
    prompt_name: ClassVar[str] = "long_contra_repeat"
    expected_format: ClassVar[str] = _FORMAT
    answer_name: ClassVar[str] = "contradiction judgments"

    class Params(LLMWorkerParams):
        generation_model: str = Field("generation_model", description="Key under `model:` of the LLM that judges.")
        embedding_model: str | None = Field(
            None,
            description="Key under `model:` that embeds the new facts for the search; it must be the store's model. "
            "Default: the store's own embedding model.",
        )
        long_contra_repeat_top_k: int = Field(10, ge=1, description="Most similar older memories fetched per new fact.")
        long_contra_repeat_threshold: float = Field(
            0.3,
            description="Compare only older memories at least this similar (cosine) to a new fact; "
            "the budget and the top-k bound the comparison anyway, so lean low.",
        )
        max_prompt_tokens: int = Field(4000, ge=300, description="Token budget for the facts and memories in the prompt.")

    params: Params

    def bind(self, env: Env) -> None:
        super().bind(env)
        where = f"worker.{self.name}"
        self._enabled: bool = env.settings.enable_long_contra_repeat
        self._store: MemoryStore = env.require_store(where)
        self._embedder = env.query_embedding_model(self.params.embedding_model, f"{where}.embedding_model")

    def run(self, ctx: MemoryContext) -> None:
        earlier = ctx.expired_memories
        details: dict[str, Any] = {"enabled": self._enabled, "checked": 0, "compared": 0, "calls": 0, "expired": []}
        ctx.details[self.name] = details
        if not self._enabled:
            return
        newest_first = sorted(ctx.unreflected_observations, key=lambda node: node.shown_time, reverse=True)
        facts = _unique([*ctx.updated_insights, *newest_first])
        facts = facts[: self._fitting(facts, self.params.max_prompt_tokens // 2)]
        if not facts:
            return
        excluded = {node.memory_id for node in (*ctx.updated_insights, *ctx.unreflected_observations, *earlier)}
        used = sum(count_tokens(self._line("N1", node)) + 1 for node in facts)
        olds = self._candidates(ctx, facts, excluded, self.params.max_prompt_tokens - used)
        details.update(checked=len(facts), compared=len(olds))
        if not olds:
            return
        messages = self.prompt_messages(
            person=person(ctx),
            new_facts="\n".join(self._line(f"N{number}", node) for number, node in enumerate(facts, start=1)),
            old_memories="\n".join(self._line(str(number), node) for number, node in enumerate(olds, start=1)),
        )
        details["calls"] = 1
        judgments = self.ask(messages, lambda reply: parse_judgments(reply, len(olds), len(facts)))
        if judgments is None:
            details["unreadable"] = True
            return
        now = utc_now()
        expired: dict[str, MemoryNode] = {}
        for old_number, new_number, judgment in judgments:
            old = olds[old_number - 1]
            if old.memory_id in expired:
                continue
            newer = facts[new_number - 1]
            expired[old.memory_id] = old.replace(
                status=MemoryStatus.EXPIRED, superseded_by=newer.memory_id, updated_at=now, score=None
            )
            details["expired"].append({"memory_id": old.memory_id, "superseded_by": newer.memory_id, "judgment": judgment})
        ctx.expired_memories = (*earlier, *expired.values())

    def _candidates(self, ctx: MemoryContext, facts: Sequence[MemoryNode], excluded: set[str], budget: int) -> list[MemoryNode]:
        """Similar older memories: every fact's best first, then every fact's second, ... within `budget`."""
        scope = MemoryFilter(
            user_name=ctx.user_name,
            target_name=ctx.target_name,
            workspace=ctx.workspace,
            memory_types=_KNOWLEDGE,
            status=MemoryStatus.VALID,
        )
        vectors = self._vectors([node.content for node in facts])
        ranked: list[list[MemoryNode]] = []
        for index, fact in enumerate(facts):
            hits = self._store.search(
                scope,
                query=fact.content,
                vector=None if vectors is None else vectors[index],
                mode=SearchMode.DENSE,
                top_k=self.params.long_contra_repeat_top_k,
            )
            threshold = self.params.long_contra_repeat_threshold
            ranked.append([hit for hit in hits if hit.memory_id not in excluded and (hit.score or 0.0) >= threshold])
        chosen: dict[str, MemoryNode] = {}
        used = 0
        for depth in range(self.params.long_contra_repeat_top_k):
            for hits in ranked:
                if depth >= len(hits) or hits[depth].memory_id in chosen:
                    continue
                cost = count_tokens(self._line("99", hits[depth])) + 1
                if used + cost > budget:
                    return _oldest_first(chosen.values())
                chosen[hits[depth].memory_id] = hits[depth]
                used += cost
        return _oldest_first(chosen.values())

    def _vectors(self, texts: list[str]) -> np.ndarray | None:
        """The facts' query vectors in one batch, or None to let the store embed each query."""
        if self._embedder is None:
            return None
        return np.asarray(self._embedder.embed_queries(texts), dtype=np.float32)

    def _fitting(self, nodes: Sequence[MemoryNode], budget: int) -> int:
        used = 0
        for count, node in enumerate(nodes):
            used += count_tokens(self._line("N99", node)) + 1
            if used > budget and count > 0:
                return count
        return len(nodes)

    def _line(self, label: str, node: MemoryNode) -> str:
        return f"{label}. {node.format(self._language, self._zone)}"


def parse_judgments(reply: str, old_count: int, new_count: int) -> list[tuple[int, int, str]] | None:
    """[(older memory number, new fact number, "contradiction" | "repeat")] from the reply.

    Reads JSON items or table rows like `{"old": 3, "new": 1, "judgment": "contradiction"}`
    (also wrapped in an object, fenced, single-quoted or with chatter; numbers may be strings
    or `N1`), or lines such as `<3> <N1> <contradiction>` or `3: contradicted by N1`. Every
    label the prompts teach counts, in any case and inflection ("contradict", "Contradicts",
    "矛盾", "duplicate", "contained", "被包含"). Entries that keep the memory, or name numbers
    out of range, are left out. `[]` (or "none"/"无") means nothing to expire; None:
    unreadable, also when no entry has a label any prompt teaches.
    """
    items = json_items(reply)
    if items is not None:
        entries = [(item_field(i, _OLD_KEYS), item_field(i, _NEW_KEYS), item_field(i, _JUDGMENT_KEYS)) for i in items]
        return _valid(entries, old_count, new_count)
    lines: list[tuple[Any, Any, Any]] = []
    for line in reply_lines(reply):
        paired = _NEW_NUMBER.match(line.text) if line.number is not None else None
        found = relation_and_number(line.text) if line.number is not None else None
        if paired and relation(line.text[paired.end() :]):
            lines.append((line.number, paired.group(1), line.text[paired.end() :]))
        elif found is not None:
            lines.append((line.number, found[1], found[0]))
    if lines:
        return _valid(lines, old_count, new_count)
    if is_unknown(reply):
        return []
    return None


def _valid(entries: Sequence[tuple[Any, Any, Any]], old_count: int, new_count: int) -> list[tuple[int, int, str]] | None:
    """The in-range entries that expire a memory; None when no entry has a label at all."""
    valid: list[tuple[int, int, str]] = []
    with_label = 0
    for old, new, word in entries:
        kind = relation(word)
        with_label += kind is not None
        old_number, new_number, judgment = as_number(old), as_number(new), _JUDGED.get(kind or "")
        if judgment is None or old_number is None or new_number is None:
            continue
        if 1 <= old_number <= old_count and 1 <= new_number <= new_count:
            valid.append((old_number, new_number, judgment))
    return valid if with_label or not entries else None


def _unique(nodes: Sequence[MemoryNode]) -> list[MemoryNode]:
    seen: dict[str, MemoryNode] = {}
    for node in nodes:
        seen.setdefault(node.memory_id, node)
    return list(seen.values())


def _oldest_first(nodes: Any) -> list[MemoryNode]:
    return sorted(nodes, key=lambda node: node.shown_time)
