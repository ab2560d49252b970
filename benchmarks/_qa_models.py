"""The answer and judge models of `benchmarks.locomo_qa`, from the config and the environment.

Answer model: the generation model the config's chat uses (its `generation_model` key; else the
config's first generation model), reached through the config's own variables (`default` and
`agent`: MEMORYSCOPE_LLM_API_BASE, MEMORYSCOPE_LLM_API_KEY, MEMORYSCOPE_LLM_MODEL). It is built
again from its config entry, so its calls and tokens are counted apart from the config's own
LLM steps (consolidation, reflection, time extraction).

Judge model: MEMORYSCOPE_JUDGE_API_BASE (any OpenAI-compatible endpoint), MEMORYSCOPE_JUDGE_API_KEY
and MEMORYSCOPE_JUDGE_MODEL; each one not set is the answer model's (so with none set, the judge
is another instance of the answer model).
"""

from __future__ import annotations

import os
from typing import Any

from memoryscope.config.keys import model_reach
from memoryscope.config.specs import Config, ModelSpec
from memoryscope.models.base import GenerationModel
from memoryscope.models.generation.openai_like import OpenAILikeGeneration

__all__ = ["JUDGE_VARIABLES", "LLM_VARIABLES", "answer_model_key", "build_answer_model", "build_judge_model", "describe"]

LLM_VARIABLES = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL")
JUDGE_VARIABLES = ("MEMORYSCOPE_JUDGE_API_BASE", "MEMORYSCOPE_JUDGE_API_KEY", "MEMORYSCOPE_JUDGE_MODEL")


class NoModelError(SystemExit):
    """No usable generation model: the message says which variables to set."""


def answer_model_key(config: Config) -> str:
    """The `model:` key of the generation model the config's (first) chat answers with."""
    for chat in config.chats.values():
        key = getattr(chat.params, "generation_model", None)
        if isinstance(key, str) and key in config.models:
            return key
        break
    for name, spec in config.models.items():
        if spec.role == "generation":
            return name
    raise NoModelError(f"locomo_qa: {config.source} has no generation model (no `model:` entry of a generation backend)")


def build_answer_model(config: Config, key: str) -> GenerationModel:
    """The answer model, built from its config entry as `MemoryScope` builds models; a clear
    error naming the variables when it cannot be reached."""
    spec = config.models[key]
    reach = model_reach(key, spec)
    if not reach.usable:
        key_env = getattr(spec.params, "api_key_env", None)
        named = ", ".join(dict.fromkeys([*LLM_VARIABLES, *([key_env] if key_env else [])]))
        raise NoModelError(
            f"locomo_qa needs a generation model to answer with, and model.{key} of {config.source} "
            f"cannot be reached ({reach.why}). Point it at an OpenAI-compatible endpoint: for the shipped "
            f"configs set {named} (other configs: the variables their model.{key} reads)."
        )
    return _built(spec, spec.params.model_copy(update={"api_key_env": None}) if reach.keyless else spec.params)


def build_judge_model(config: Config, key: str) -> GenerationModel:
    """The judge: the MEMORYSCOPE_JUDGE_* variables over the answer model's settings."""
    spec = config.models[key]
    base, api_key, name = (os.environ.get(variable, "").strip() for variable in JUDGE_VARIABLES)
    answer = build_answer_model(config, key)  # checks the answer model is reachable, and names its model
    if base:
        params = OpenAILikeGeneration.Params(
            model_name=name or answer.model_name,
            api_base=base,
            api_key_env=JUDGE_VARIABLES[1] if api_key else None,
            temperature=float(getattr(spec.params, "temperature", 0.0)),
        )
        return OpenAILikeGeneration(params)
    if not name and not api_key:
        return answer
    update: dict[str, Any] = {}
    if name:
        update["model_name"] = name
    if api_key:
        update["api_key_env"], update["api_key"] = JUDGE_VARIABLES[1], None
    return _built(spec, spec.params.model_copy(update=update))


def describe(model: GenerationModel, key: str | None = None) -> dict[str, Any]:
    """Name, backend and endpoint (never a key) for the report."""
    described = {"model": model.model_name, "backend": model.backend, "endpoint": model.endpoint}
    return {"config_key": key, **described} if key else described


def _built(spec: ModelSpec, params: Any) -> GenerationModel:
    model = spec.cls(params)
    if not isinstance(model, GenerationModel):
        raise NoModelError(f"locomo_qa: {spec.where} is a {type(model).__name__}, not a generation model")
    return model
