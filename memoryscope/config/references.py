"""The check of every `*_model` key of a worker, chat or store against the `model:` section.

A key must name a model declared under `model:`, of the role its name says
(`generation_model`, `embedding_model`, `rank_model`; another `*_model` key may name any role),
with the closest declared key when it does not. A declared model that may be left out at run
time (`required: false`) is a valid reference: the steps that need it are skipped then.

Two references may name an undeclared key, because nothing uses them:
- a generation model key left at its default when the config declares no generation model at
  all (no LLM configured: the LLM steps are skipped; a key written out must still be right);
- a rank model key while `global.enable_ranker` is off.

A reference to a model entry that is broken itself, or into a `model:` section that is not a
mapping, is not reported: the entry or section is, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from memoryscope.errors import closest, shorten

__all__ = ["ModelReferences"]

ROLES = ("generation", "embedding", "rank")


class ModelReferences:
    def __init__(
        self, models: Mapping[str, Any], broken: frozenset[str], section_broken: bool, enable_ranker: bool
    ) -> None:
        self.models = models  # name -> ModelSpec (has `.role`)
        self.broken = broken
        self.section_broken = section_broken
        self.enable_ranker = enable_ranker
        self.has_generation = any(spec.role == "generation" for spec in models.values())

    def problems(self, where: str, params: BaseModel) -> list[tuple[str, str]]:
        """(YAML path, message) for every wrong `*_model` key of one entry's `params`."""
        if self.section_broken:
            return []
        found = []
        for name in type(params).model_fields:
            key = getattr(params, name)
            if not name.endswith("_model") or not isinstance(key, str):
                continue
            role = next((role for role in ROLES if name.endswith(f"{role}_model")), None)
            message = self.problem(key, role, written=name in params.model_fields_set)
            if message:
                found.append((f"{where}.{name}", message))
        return found

    def problem(self, key: str, role: str | None, written: bool) -> str | None:
        if key in self.broken:
            return None  # a broken model entry is reported once, at the entry
        if key in self.models:
            actual = self.models[key].role
            return None if role in (None, actual) else f"model.{key} is a {actual} model, not a {role} model"
        if role == "generation" and not self.has_generation and not written:
            return None
        if role == "rank" and not self.enable_ranker:
            return None
        close = closest(key, self.models)
        hint = f" Did you mean {close!r}?" if close else ""
        message = f"no model {shorten(key)} under `model:`.{hint} Models: {', '.join(self.models) or '(none)'}"
        if role == "generation" and not self.has_generation:
            message += ". To run without an LLM, declare it with `required: false`, or leave this key out"
        return message
