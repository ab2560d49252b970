"""Propose the profile attributes (insight subjects) that the new observations reveal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import AliasChoices, Field

from memoryscope.context import MemoryContext
from memoryscope.llm_output import item_field, iter_json, labelled, reply_lines
from memoryscope.memory import MemoryNode
from memoryscope.worker import LLMWorkerParams, register_worker

from ._insight import ReflectionWorker, clean_value, fit_in_budget, is_unknown, normalize_key, person

__all__ = ["GetReflectionSubjectWorker", "parse_subjects"]

_LIST_SEPARATOR = {"en": ", ", "zh": "、"}
_NOTHING = {"en": "(none yet)", "zh": "（暂无）"}
_MAX_SUBJECT_CHARS = 40  # an attribute is a short phrase; longer text is a value or a sentence
_FORMAT = '["attribute", "attribute"]  (or [] when there is none)'
_MAX_LISTED_WORDS = 4  # a list item longer than this is a sentence, not an attribute ("1. I cannot help with that")
_NAME_KEYS = ("subject", "attribute", "key", "name", "属性")


@register_worker("get_reflection_subject")
class GetReflectionSubjectWorker(ReflectionWorker):
    """Set `insight_subjects`: new attributes of the person ("hobby", "job", "爱好") to learn.

    Runs by trigger only when at least `reflect_obs_cnt_threshold` observations wait to be reflected
    on (on demand, as soon as one does);
    otherwise it stops the workflow (nothing is stored, the observations keep waiting). Then ONE
    model call sees the new observations (newest first, as many as `max_prompt_tokens` allows)
    and the attributes the profile already has, and names at most `max_subjects` new ones.
    Names are cleaned as any model text is (`clean_value`: no control characters, escape codes
    or bidi overrides); names longer than 40 characters, attributes already known (compared
    case- and space-insensitively) and duplicates are dropped. An unreadable answer is asked
    again once; still unreadable, there are no new subjects this run (`update_insight` still refreshes the existing ones) and
    `details[<worker>]["unreadable"]` says so.
    """

    reads: ClassVar[tuple[str, ...]] = ("unreflected_observations", "insights")
    writes: ClassVar[tuple[str, ...]] = ("insight_subjects", "details")
    prompt_name: ClassVar[str] = "get_reflection_subject"
    expected_format: ClassVar[str] = _FORMAT
    answer_name: ClassVar[str] = "subject list"

    class Params(LLMWorkerParams):
        generation_model: str = Field("generation_model", description="Key under `model:` of the LLM that names the subjects.")
        reflect_obs_cnt_threshold: int = Field(
            6, ge=1, description="Reflect only when at least this many observations are unreflected; else stop the workflow."
        )
        max_subjects: int = Field(
            5,
            ge=1,
            validation_alias=AliasChoices("max_subjects", "reflect_num_questions"),
            description="Most new subjects proposed per run (MemoryScope 0.1: `reflect_num_questions`).",
        )
        max_prompt_tokens: int = Field(
            3000, ge=200, description="Token budget for the observations in the prompt; the newest are kept."
        )

    params: Params

    def run(self, ctx: MemoryContext) -> None:
        observations = ctx.unreflected_observations
        # the threshold gates automatic runs; a run asked for now reflects on whatever waits
        threshold = 1 if ctx.on_demand else self.params.reflect_obs_cnt_threshold
        if len(observations) < threshold:
            ctx.insight_subjects = ()
            ctx.details[self.name] = {"observations": len(observations), "subjects": []}
            ctx.stop(f"only {len(observations)} new observations; reflecting at {threshold}")
            return
        existing = [node.key for node in ctx.insights if node.key.strip()]
        shown = self._observation_lines(observations)
        messages = self.prompt_messages(
            person=person(ctx),
            max_subjects=self.params.max_subjects,
            existing=_LIST_SEPARATOR.get(self._language, ", ").join(existing) or _NOTHING.get(self._language, "(none)"),
            observations="\n".join(shown),
        )
        proposed = self.ask(messages, parse_subjects)
        subjects = self._new_subjects(proposed or [], existing)
        ctx.insight_subjects = tuple(subjects)
        details: dict[str, Any] = {"observations": len(observations), "shown": len(shown), "subjects": subjects}
        if proposed is None:
            details["unreadable"] = True
        ctx.details[self.name] = details

    def _observation_lines(self, observations: Sequence[MemoryNode]) -> list[str]:
        """Numbered, time-stamped lines in time order: the newest that fit in the budget."""
        newest_first = sorted(observations, key=lambda node: node.shown_time, reverse=True)
        texts = [node.format(self._language, self._zone) for node in newest_first]
        kept = newest_first[: fit_in_budget(texts, self.params.max_prompt_tokens)]
        in_order = sorted(kept, key=lambda node: node.shown_time)
        return [f"{number}. {node.format(self._language, self._zone)}" for number, node in enumerate(in_order, start=1)]

    def _new_subjects(self, proposed: Sequence[str], existing: Sequence[str]) -> list[str]:
        seen = {normalize_key(key) for key in existing}
        subjects: list[str] = []
        for subject in proposed:
            normalized = normalize_key(subject)
            if not normalized or normalized in seen or is_unknown(subject) or len(subject) > _MAX_SUBJECT_CHARS:
                continue
            seen.add(normalized)
            subjects.append(subject)
            if len(subjects) == self.params.max_subjects:
                break
        return subjects


def parse_subjects(reply: str) -> list[str] | None:
    """The subjects in `["hobby", "pet"]` (or `{"subjects": [...]}`, a table's rows, in fences
    or chatter, single quotes and trailing commas too), else the items of a bullet or numbered
    list (`- hobby`, `1. pet`, `* **job**: nurse` → "job"); `[]` for `[]` or an explicit
    "none"/"无"; None when the reply holds no such list."""
    for found in iter_json(reply):
        if isinstance(found, dict):
            found = next((value for value in found.values() if isinstance(value, list)), None)
        if isinstance(found, list):
            subjects = [clean_value(_subject_text(item)) for item in found]
            if any(subjects) or not found:
                return [subject for subject in subjects if subject]
    listed = [_listed_subject(line.text) for line in reply_lines(reply) if line.listed]
    if any(listed):
        return [subject for subject in listed if subject]
    if is_unknown(reply):
        return []
    return None


def _listed_subject(text: str) -> str:
    """The attribute a list item names (`hobby`, `hobby: guitar` → "hobby"), or "" for a sentence."""
    pair = labelled(text)
    name = clean_value(pair[0] if pair is not None else text)
    if not name or len(name.split()) > _MAX_LISTED_WORDS or name[0].isdigit() or name.endswith(("?", "？", "!", "！")):
        return ""
    return name


def _subject_text(item: Any) -> str:
    if isinstance(item, dict):
        found = item_field(item, _NAME_KEYS)
        return found if isinstance(found, str) else ""
    return item if isinstance(item, str) else ""
