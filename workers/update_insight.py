"""Work out the values of the person's profile attributes (insights) from the new observations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.memory import MemoryNode, MemoryType, utc_now
from memoryscope.models.base import ChatMessage, RankModel
from memoryscope.models.token_count import count_tokens
from memoryscope.text import content_words
from memoryscope.worker import LLMWorkerParams, register_worker

from ._insight import (
    MAX_VALUE_CHARS,
    ReflectionWorker,
    cap_value,
    clean_value,
    insight_id,
    is_unknown,
    normalize_key,
    normalize_value,
    parse_values,
    person,
    render_insight,
    strip_key,
)

__all__ = ["UpdateInsightWorker", "parse_values"]

_FORMAT = '{"1": "value of attribute 1", "2": "unknown"}  (one entry per attribute number)'
_KEPT_OBSERVATION_IDS = 50  # provenance kept in an insight's meta; older ids are dropped
_COLON = {"en": ": ", "zh": "："}


@dataclass(frozen=True)
class _Subject:
    """One attribute to work out: its key, the insight it already is (if any), its evidence."""

    key: str
    existing: MemoryNode | None
    observations: tuple[MemoryNode, ...] = ()  # relevant ones, most relevant first
    best: float = 0.0  # its best relevance score


@register_worker("update_insight")
class UpdateInsightWorker(ReflectionWorker):
    """Set `updated_insights`: new insights, and existing ones whose value changed.

    Subjects are the new `insight_subjects` and the keys of the existing `insights`. For each,
    the relevant `unreflected_observations` are picked: scored by the rank model when
    `global.enable_ranker` is on (the embedding similarity rides along as each memory's score,
    which `fusion_rank` uses), else by embedding similarity (scaled to [0, 1] per subject) or
    keyword overlap, whichever is higher. Similarity counts relative to the other subjects (see
    `_relevance`). An observation is relevant to a subject when it scores at least
    `update_insight_threshold` for it, or scores best for it among all subjects (so a weak
    embedding model cannot leave a fact out altogether), or scores the same for all of them;
    each subject keeps its best `update_insight_obs_top_k`. Subjects without evidence are left
    alone; new subjects come first, then existing ones by their best score, at most
    `update_insight_max_count`.

    The model is then asked for the values of as many subjects per call as fit in
    `max_prompt_tokens` (usually all of them: one call per run, however many observations).
    The prompt lists the relevant observations once each, and every subject names its own,
    best first; the model may use any of them.
    "unknown" (or "none", "未知", empty) means no insight, and an existing value stays. A new
    value makes a new insight node whose id derives from the user, target, workspace and key;
    a changed value updates the existing node in place (same id, `updated=True`, content
    re-rendered, provenance extended). A value is cleaned and typed first (`clean_value`: no
    control characters or escape codes, a list joined, an object as `key: value`) and cut to
    `MAX_VALUE_CHARS` (300); `details[<worker>]["truncated"]` names the keys that were cut. A call
    whose answer stays unreadable after one repair skips its subjects;
    `details[<worker>]["skipped"]` names them.
    """

    reads: ClassVar[tuple[str, ...]] = ("unreflected_observations", "insights", "insight_subjects")
    writes: ClassVar[tuple[str, ...]] = ("updated_insights", "details")
    prompt_name: ClassVar[str] = "update_insight"
    expected_format: ClassVar[str] = _FORMAT
    answer_name: ClassVar[str] = "insight values"

    class Params(LLMWorkerParams):
        generation_model: str = Field("generation_model", description="Key under `model:` of the LLM that gives the values.")
        rank_model: str | None = Field(
            "rank_model",
            description="Key under `model:` of the rank model that scores observations for a subject "
            "(used when `global.enable_ranker` is on); null scores by embedding and keywords only.",
        )
        embedding_model: str | None = Field(
            None, description="Key under `model:` of the embedding model for similarity; default: the store's model."
        )
        update_insight_threshold: float = Field(
            0.5,
            description="An observation scoring at least this for a subject is relevant to it (rank score with the "
            "ranker, else cosine similarity or keyword overlap).",
        )
        update_insight_max_count: int = Field(10, ge=1, description="Most subjects whose value is worked out per run.")
        update_insight_obs_top_k: int = Field(10, ge=1, description="Most observations shown for one subject, best first.")
        max_prompt_tokens: int = Field(
            3000, ge=300, description="Token budget of one call; subjects beyond it go to another call."
        )

    params: Params

    def bind(self, env: Env) -> None:
        super().bind(env)
        where = f"worker.{self.name}"
        self._ranker: RankModel | None = None
        if env.settings.enable_ranker and self.params.rank_model is not None:
            self._ranker = env.rank_model(self.params.rank_model, f"{where}.rank_model")
        self._embedder = env.query_embedding_model(self.params.embedding_model, f"{where}.embedding_model")

    def run(self, ctx: MemoryContext) -> None:
        observations = ctx.unreflected_observations
        subjects = _subjects(ctx.insight_subjects, ctx.insights)
        details: dict[str, Any] = {"subjects": len(subjects), "calls": 0, "created": [], "updated": [], "unchanged": []}
        details.update(unknown=[], skipped=[], without_evidence=[], truncated=[])
        ctx.details[self.name] = details
        ctx.updated_insights = ()
        if not subjects or not observations:
            details["without_evidence"] = [subject.key for subject in subjects]
            return
        self.require_model()  # before the embedder and the ranker are called
        who = person(ctx)
        chosen = self._choose(subjects, observations)
        details["without_evidence"] = [s.key for s in subjects if s.key not in {c.key for c in chosen}]
        results: list[MemoryNode] = []
        now = utc_now()
        for batch in self._batches(chosen, who):
            details["calls"] += 1
            values = self.ask(self._messages(batch, who), partial(parse_values, keys=[subject.key for subject in batch]))
            for number, subject in enumerate(batch, start=1):
                value = None if values is None else values.get(number)
                node = self._node(ctx, who, subject, value, now, details)
                if node is not None:
                    results.append(node)
        ctx.updated_insights = tuple(results)

    # -- which observations tell about which subject --

    def _choose(self, subjects: Sequence[_Subject], observations: Sequence[MemoryNode]) -> list[_Subject]:
        scores = self._relevance(subjects, observations)
        best_subject = scores.argmax(axis=0)  # for each observation, the subject it tells most about
        # An observation that scores the same for every subject tells nothing about which: all may use it.
        undecided = scores.max(axis=0) - scores.min(axis=0) <= 1e-9
        threshold = self.params.update_insight_threshold
        chosen: list[_Subject] = []
        for row, subject in enumerate(subjects):
            picked = [
                column
                for column in range(len(observations))
                if scores[row, column] >= threshold or best_subject[column] == row or undecided[column]
            ]
            picked.sort(key=lambda column: scores[row, column], reverse=True)
            picked = picked[: self.params.update_insight_obs_top_k]
            if picked:
                evidence = tuple(observations[column] for column in picked)
                chosen.append(_Subject(subject.key, subject.existing, evidence, float(scores[row, picked[0]])))
        # New subjects were proposed from these very observations: they go first.
        chosen.sort(key=lambda subject: (subject.existing is not None, -subject.best))
        return chosen[: self.params.update_insight_max_count]

    def _relevance(self, subjects: Sequence[_Subject], observations: Sequence[MemoryNode]) -> np.ndarray:
        """(subjects × observations) relevance scores, higher is more relevant.

        Similarity is taken relative to the other subjects: each observation's mean similarity
        over all subjects is subtracted. Small embedding models find every fact about as close
        to every attribute ("hobby" may even sit closer to "lives in Beijing" than to "plays the
        guitar"); what tells facts apart is which attribute each one is closest to.
        """
        queries = [_query(subject, self._language) for subject in subjects]
        similarity = np.zeros((len(subjects), len(observations)))
        if self._embedder is not None:
            query_vectors = np.asarray(self._embedder.embed_queries(queries), dtype=np.float64)
            passage_vectors = np.asarray(self._embedder.embed_passages([node.content for node in observations]), dtype=np.float64)
            similarity = query_vectors @ passage_vectors.T
            if len(subjects) > 1:
                similarity -= similarity.mean(axis=0, keepdims=True)
        if self._ranker is not None:
            # The similarity rides along as each memory's score: `fusion_rank` uses it as its
            # vector signal, a cross-encoder reranker ignores it.
            rows = []
            for row, query in enumerate(queries):
                scored = [node.with_score(float(score)) for node, score in zip(observations, similarity[row], strict=True)]
                rows.append(self._ranker.score(query, scored))
            return np.asarray(rows, dtype=np.float64)
        overlap = np.asarray([[_overlap(subject, node) for node in observations] for subject in subjects], dtype=np.float64)
        return np.maximum(_min_max_rows(similarity), overlap)

    # -- asking --

    def _batches(self, subjects: Sequence[_Subject], who: str) -> list[list[_Subject]]:
        """Subjects grouped so that each call's prompt (its subjects and the union of their
        observations) stays within the token budget; one call when everything fits."""
        fixed = count_tokens(self._prompts["system"].format(person=who))
        fixed += count_tokens(self._prompts["user"].format(person=who, observations="", subjects=""))
        budget = max(self.params.max_prompt_tokens - fixed, 1)
        batches: list[list[_Subject]] = []
        shown: set[str] = set()
        used = 0
        for subject in subjects:
            head = count_tokens(self._subject_line(1, subject, "O1, O2, O3")) + 1
            unseen = [node for node in subject.observations if node.memory_id not in shown]
            cost = head + sum(self._observation_cost(node) for node in unseen)
            if batches and used + cost <= budget:
                batches[-1].append(subject)
                used += cost
            else:
                batches.append([subject])
                shown = set()
                unseen = list(subject.observations)
                used = head + sum(self._observation_cost(node) for node in unseen)
            shown.update(node.memory_id for node in unseen)
        return batches

    def _messages(self, batch: Sequence[_Subject], who: str) -> list[ChatMessage]:
        """The observations of the batch's subjects, each once (oldest first), then the subjects,
        each naming the observations most likely about it."""
        union = {node.memory_id: node for subject in batch for node in subject.observations}
        ordered = sorted(union.values(), key=lambda node: node.shown_time)
        label = {node.memory_id: f"O{number}" for number, node in enumerate(ordered, start=1)}
        observations = "\n".join(f"{label[node.memory_id]}. {self._shown(node)}" for node in ordered)
        subjects = "\n".join(
            self._subject_line(number, subject, ", ".join(label[node.memory_id] for node in subject.observations))
            for number, subject in enumerate(batch, start=1)
        )
        return self.prompt_messages(person=who, observations=observations, subjects=subjects)

    def _subject_line(self, number: int, subject: _Subject, evidence: str) -> str:
        current = subject.existing.value if subject.existing is not None and subject.existing.value else ""
        value = current or self._prompts["no_value"]
        return self._prompts["subject"].format(number=number, key=subject.key, value=value, evidence=evidence)

    def _shown(self, node: MemoryNode) -> str:
        return node.format(self._language, self._zone)

    def _observation_cost(self, node: MemoryNode) -> int:
        return count_tokens(f"O99. {self._shown(node)}") + 1

    # -- the answer --

    def _node(
        self, ctx: MemoryContext, who: str, subject: _Subject, answer: str | None, now: datetime, details: dict[str, Any]
    ) -> MemoryNode | None:
        if answer is None:
            details["skipped"].append(subject.key)
            return None
        value = strip_key(clean_value(answer), subject.key, who)
        if is_unknown(value):
            details["unknown"].append(subject.key)
            return None
        if len(value) > MAX_VALUE_CHARS:
            value = cap_value(value)
            details["truncated"].append(subject.key)
        existing = subject.existing
        if existing is not None and normalize_value(existing.value) == normalize_value(value):
            details["unchanged"].append(subject.key)
            return None
        evidence = subject.observations
        sources = tuple(message_id for node in evidence for message_id in node.source_message_ids)
        said = [node.message_time for node in evidence if node.message_time is not None]
        observation_ids = [node.memory_id for node in evidence]
        content = render_insight(who, subject.key, value, self._language)
        if existing is None:
            details["created"].append(subject.key)
            return MemoryNode(
                user_name=ctx.user_name,
                target_name=ctx.target_name,
                workspace=ctx.workspace,
                memory_type=MemoryType.INSIGHT,
                memory_id=insight_id(ctx.user_name, ctx.target_name, ctx.workspace, subject.key),
                key=subject.key,
                value=value,
                content=content,
                created_at=now,
                updated_at=now,
                message_time=max(said) if said else None,
                source_message_ids=tuple(dict.fromkeys(sources)),
                meta={"observation_ids": observation_ids},
            )
        details["updated"].append(subject.key)
        earlier_ids = [str(item) for item in existing.meta.get("observation_ids", []) if isinstance(item, str)]
        all_ids = list(dict.fromkeys([*earlier_ids, *observation_ids]))[-_KEPT_OBSERVATION_IDS:]
        times = [moment for moment in (existing.message_time, *said) if moment is not None]
        return existing.replace(
            value=value,
            content=content,
            updated=True,
            updated_at=now,
            message_time=max(times) if times else None,
            source_message_ids=tuple(dict.fromkeys((*existing.source_message_ids, *sources))),
            meta={**existing.meta, "observation_ids": all_ids},
            score=None,
        )


def _subjects(new_subjects: Sequence[str], insights: Sequence[MemoryNode]) -> list[_Subject]:
    """New subjects (as the existing insight when the key is already known), then existing insights."""
    existing: dict[str, MemoryNode] = {}
    for node in insights:
        if node.memory_type is MemoryType.INSIGHT and normalize_key(node.key):
            existing.setdefault(normalize_key(node.key), node)
    subjects: dict[str, _Subject] = {}
    for key in new_subjects:
        normalized = normalize_key(key)
        if normalized and normalized not in subjects:
            known = existing.get(normalized)
            subjects[normalized] = _Subject(known.key if known else key.strip(), known)
    for normalized, node in existing.items():
        subjects.setdefault(normalized, _Subject(node.key, node))
    return list(subjects.values())


def _query(subject: _Subject, language: str) -> str:
    """What a subject is matched by: its key, with its value when it has one ("home city: Beijing").

    Without the person's name, which every observation has and which would only add noise."""
    if subject.existing is not None and subject.existing.value:
        return f"{subject.key}{_COLON.get(language, ': ')}{subject.existing.value}"
    return subject.key


def _min_max_rows(matrix: np.ndarray) -> np.ndarray:
    """Each row scaled to [0, 1]; a row whose values are all equal becomes 0."""
    low = matrix.min(axis=1, keepdims=True)
    spread = matrix.max(axis=1, keepdims=True) - low
    return np.divide(matrix - low, spread, out=np.zeros_like(matrix), where=spread > 0)


def _overlap(subject: _Subject, node: MemoryNode) -> float:
    """Share of the subject's words (key and current value) that the observation contains."""
    value = subject.existing.value if subject.existing is not None else ""
    words = set(content_words(f"{subject.key} {value}"))
    if not words:
        return 0.0
    return len(words & set(content_words(node.content))) / len(words)
