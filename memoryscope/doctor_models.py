"""The model checks of `memoryscope doctor`: for each configured model, its key and one real call.

Nothing else reaches a model before an operation needs it (`MemoryScope(...)` and a server start
without a call), so this is where a user learns that an endpoint is down, a key is missing or
wrong, or an embedding model gives vectors of another size than the store holds. Each check is
one line: `ok`, `FAIL` (with the reason and the fix) or `skip` (an optional model left out). The
calls are the smallest each role has (one short text embedded or scored, one short chat), made
once, without retries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memoryscope.config.keys import model_reach
from memoryscope.config.specs import Config, ModelSpec
from memoryscope.errors import MemoryScopeError
from memoryscope.memory import MemoryNode
from memoryscope.models.base import ChatMessage, EmbeddingModel, GenerationModel, RankModel

__all__ = ["ModelChecks", "check_models"]

_TEXT = "memoryscope doctor"


@dataclass
class ModelChecks:
    """What the checks found: the models built (by name) and whether any check failed."""

    models: dict[str, Any] = field(default_factory=dict)
    failed: bool = False


def check_models(config: Config, say: Callable[[str], None]) -> ModelChecks:
    """Check every model of `config` (key, then one call), saying one line per check."""
    found = ModelChecks()
    for name, spec in config.models.items():
        where = f"model.{name}"
        reach = model_reach(name, spec)
        key_env = getattr(spec.params, "api_key_env", None)
        if not reach.usable:
            if spec.required:
                found.failed = True
                say(f"  FAIL {where}: {reach.why}; {_key_fix(key_env, reach.why)}")
            else:
                say(f"  skip {where}: left out ({reach.why}); the steps that need it are skipped")
            continue
        if reach.keyless:
            say(f"  ok   {where}: no key ({reach.why})")
        elif getattr(spec.params, "api_key", None) is not None:
            say(f"  ok   {where}: key given in the config (api_key)")
        elif key_env:
            say(f"  ok   {where}: key {key_env} is set")
        try:
            model = spec.cls(_once(spec, keyless=reach.keyless))
        except MemoryScopeError as error:
            found.failed = True
            say(f"  FAIL {where}: cannot build it: {error}")
            continue
        found.models[name] = model
        try:
            answer = _call(model)
        except MemoryScopeError as error:
            found.failed = True
            say(f"  FAIL {where}: {error}; {_call_fix(str(error), key_env)}")
            continue
        at = "" if model.endpoint == "local" else f" at {model.endpoint}"
        say(f"  ok   {where}: {model.backend} {model.model_name!r}{at} {answer}")
    return found


def _once(spec: ModelSpec, *, keyless: bool) -> Any:
    """The model's params for one call: no retries (a check says what is, now), keyless if so."""
    update: dict[str, Any] = {}
    if "max_retries" in type(spec.params).model_fields:
        update["max_retries"] = 0
    if keyless:
        update["api_key_env"] = None
    return spec.params.model_copy(update=update)


def _call(model: Any) -> str:
    """The smallest real call of the model's role; what it showed."""
    if isinstance(model, EmbeddingModel):
        vectors = model.embed_queries([_TEXT])
        return f"answers: vectors of dimension {vectors.shape[1]}"
    if isinstance(model, RankModel):
        model.score(_TEXT, [MemoryNode(user_name="doctor", content=_TEXT)])
        return "answers"
    if isinstance(model, GenerationModel):
        model.chat([ChatMessage(role="user", content="Reply with the word OK.")])
        return "answers"
    return "built"


def _key_fix(key_env: Any, why: str) -> str:
    if key_env and str(key_env) in why:
        return f"export {key_env}=<your key> (or set api_key_env: null for a server that needs no key)"
    return "fix the model's entry in the config"


def _call_fix(message: str, key_env: Any) -> str:
    lowered = message.lower()
    if any(sign in lowered for sign in ("401", "403", "unauthori", "forbidden", "no key")):
        return f"check the key in {key_env}" if key_env else "check the model's api_key"
    if "404" in lowered:
        return "check api_base (the base URL, e.g. https://host/v1) and model_name"
    if any(sign in lowered for sign in ("cannot connect", "timed out", "no answer", "timeout")):
        return "check that the server is up and api_base is right (the call was made once, without retries)"
    return "see the reason above"
