"""What MemoryOS's constructor arguments set in the `memoryos` config: the LLM's endpoint and key,
the embedding model, the tiers' capacities and thresholds.

MemoryOS calls OpenAI's API when its `openai_base_url` is empty or None (its own default is
`BASE_URL = ""`); here an empty or missing URL means the environment's
`MEMORYSCOPE_LLM_API_BASE` when set (arguments > environment > defaults), else OpenAI's. A key
given in code is the key used, without the "an API key is written in the config" warning (that is
for keys written in YAML); without one, the key is read from `MEMORYSCOPE_LLM_API_KEY` when set,
else from `OPENAI_API_KEY` (where MemoryOS's OpenAI client reads it).

`embedding_model_name` names a model served by an OpenAI-compatible `/embeddings` endpoint: the one
at `embedding_api_base`, or the LLM's own endpoint when `embeddings_from_llm_endpoint=True` (OpenAI's
`text-embedding-3-small` there, when no name is given). With neither, the local embedding model
embeds and a one-line notice on stderr names it, since MemoryOS's sentence-transformers models
(`all-MiniLM-L6-v2`, `BAAI/bge-m3`, ...) are not loaded here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OPENAI_API_BASE", "LLM", "EMBEDDING", "ModelSettings", "model_settings", "tier_settings"]

OPENAI_API_BASE = "https://api.openai.com/v1"
LLM = "generation_model"
EMBEDDING = "embedding_model"
_BASE_ENV = "MEMORYSCOPE_LLM_API_BASE"
_KEY_ENV = "MEMORYSCOPE_LLM_API_KEY"
_OPENAI_KEY_ENV = "OPENAI_API_KEY"
_OPENAI_EMBEDDING = "text-embedding-3-small"


@dataclass(frozen=True)
class ModelSettings:
    """The config overrides for the models, the models whose key was given in code (their
    "key written in the config" warning does not apply), and whether an embedding endpoint serves
    `embedding_model_name`."""

    overrides: dict[str, Any] = field(default_factory=dict)
    keys_in_code: tuple[str, ...] = ()
    embedding_served: bool = False


def model_settings(
    *,
    llm_model: str,
    openai_api_key: str | None,
    openai_base_url: str | None,
    embedding_model_name: str | None,
    embedding_api_base: str | None,
    embeddings_from_llm_endpoint: bool,
    environ: Mapping[str, str] | None = None,
) -> ModelSettings:
    """The models' settings from MemoryOS's arguments (see the module docstring)."""
    env = os.environ if environ is None else environ
    base = llm_base_url(openai_base_url, env)
    key = openai_api_key.strip() if isinstance(openai_api_key, str) and openai_api_key.strip() else None
    out: dict[str, Any] = {
        f"model.{LLM}.model_name": llm_model,
        f"model.{LLM}.required": True,
        f"model.{LLM}.api_base": base,
    }
    keys_in_code: list[str] = []
    if key is not None:
        out[f"model.{LLM}.api_key"] = key
        keys_in_code.append(LLM)
    elif not env.get(_KEY_ENV, "").strip():
        out[f"model.{LLM}.api_key_env"] = _OPENAI_KEY_ENV
    embedding_base = embedding_api_base.strip() if isinstance(embedding_api_base, str) else ""
    if not embedding_base and embeddings_from_llm_endpoint:
        embedding_base = base
    if not embedding_base:
        return ModelSettings(out, tuple(keys_in_code), embedding_served=False)
    out.update(
        {
            f"model.{EMBEDDING}.module_name": "bge_embedding",
            f"model.{EMBEDDING}.model_name": embedding_model_name or _OPENAI_EMBEDDING,
            f"model.{EMBEDDING}.api_base": embedding_base,
        }
    )
    if key is not None:
        out[f"model.{EMBEDDING}.api_key"] = key
        keys_in_code.append(EMBEDDING)
    elif embedding_base == base and f"model.{LLM}.api_key_env" in out:
        out[f"model.{EMBEDDING}.api_key_env"] = out[f"model.{LLM}.api_key_env"]  # the LLM's endpoint: its key
    return ModelSettings(out, tuple(keys_in_code), embedding_served=True)


def llm_base_url(openai_base_url: str | None, environ: Mapping[str, str]) -> str:
    """The LLM's base URL: the one given; empty or None, the environment's, else OpenAI's (never "")."""
    if openai_base_url is not None and not isinstance(openai_base_url, str):
        raise TypeError(f"openai_base_url must be a URL text or empty, got {openai_base_url!r}")
    given = (openai_base_url or "").strip()
    return given or environ.get(_BASE_ENV, "").strip() or OPENAI_API_BASE


def tier_settings(
    *,
    short_term_capacity: int,
    mid_term_capacity: int,
    long_term_knowledge_capacity: int,
    retrieval_queue_capacity: int,
    mid_term_heat_threshold: float,
    mid_term_similarity_threshold: float | None,
    similarity_threshold: float,
) -> dict[str, Any]:
    """The `memoryos_*` workers' settings from MemoryOS's capacities and thresholds."""
    out: dict[str, Any] = {
        "worker.memoryos_add_page.short_term_capacity": short_term_capacity,
        "worker.memoryos_mid_term.short_term_capacity": short_term_capacity,
        "worker.memoryos_mid_term.mid_term_capacity": mid_term_capacity,
        "worker.memoryos_long_term.long_term_knowledge_capacity": long_term_knowledge_capacity,
        "worker.memoryos_force_long_term.long_term_knowledge_capacity": long_term_knowledge_capacity,
        "worker.memoryos_long_term.mid_term_heat_threshold": mid_term_heat_threshold,
        "worker.memoryos_pack.mid_term_heat_threshold": mid_term_heat_threshold,
        "worker.memoryos_recall_mid.similarity_threshold": similarity_threshold,
        "worker.memoryos_recall_mid.retrieval_queue_capacity": retrieval_queue_capacity,
    }
    if mid_term_similarity_threshold is not None:
        out["worker.memoryos_mid_term.segment_similarity_threshold"] = mid_term_similarity_threshold
    return out
