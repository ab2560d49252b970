"""Whether a configured remote model can be reached as the environment stands: its endpoint and key.

A model names its key by `api_key_env` (or holds an inline `api_key`). When that variable is not
set:

- an optional model (`required: false`) given an `api_base` — a local or self-hosted server such
  as Ollama, vLLM or llama.cpp, which often needs no key — is called without a key, with a
  warning saying so; a server that does want one answers 401, and the error says that no key was sent;
- an optional model without an endpoint of its own (its backend's: OpenAI, DashScope) is left
  out, and the steps that need it are skipped;
- a required model stops the start with an error naming the variable (a config for a keyless
  server says so with `api_key_env: null`).

`memoryscope check-config` reports each case (`key_warnings`) before anything starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from memoryscope.config.specs import Config, ModelSpec

__all__ = ["ModelReach", "model_reach", "key_warnings"]


@dataclass(frozen=True)
class ModelReach:
    """How one model will be reached: `usable` (build it), `keyless` (build it without its key
    variable), and `why` (the notice, or why it is left out; "" when all is set)."""

    usable: bool
    keyless: bool = False
    why: str = ""


def model_reach(name: str, spec: ModelSpec) -> ModelReach:
    """How model `name` will be reached with the environment as it is now."""
    api_base = getattr(spec.params, "api_base", None)
    if api_base is not None and not str(api_base).strip():
        return ModelReach(False, why="no api_base")
    key_env = getattr(spec.params, "api_key_env", None)
    if not key_env or getattr(spec.params, "api_key", None) or os.environ.get(str(key_env), "").strip():
        return ModelReach(True)
    if api_base and not spec.required:
        return ModelReach(
            True,
            keyless=True,
            why=f"model.{name}: {key_env} is not set, so {api_base} is called without a key (fine for servers "
            f"that need none: Ollama, vLLM, llama.cpp); export {key_env} if yours wants one",
        )
    return ModelReach(False, why=f"environment variable {key_env} is not set")


def key_warnings(config: Config) -> list[str]:
    """What `check-config` says about keys: a required model whose key variable is not set (it
    fails at start-up, or calls its server without a key), an optional one left out or keyless."""
    said = []
    for name, spec in config.models.items():
        reach = model_reach(name, spec)
        if reach.keyless:
            said.append(reach.why)
        elif not reach.usable and spec.required:
            said.append(
                f"model.{name} is required, but {reach.why}: MemoryScope will not start until it is "
                "(for a server that needs no key, set its api_key_env: null)"
            )
        elif not reach.usable and reach.why != "no api_base":
            said.append(f"model.{name} will be left out ({reach.why}); steps that need it are skipped")
    return said
