"""`read_mcp_config`: the `config.json` of MemoryOS's MCP server (`server_new.py --config`), as
`Memoryos` arguments.

Its keys: `user_id`, `openai_api_key` and `data_storage_path` (required, as there; an empty key is
read from the environment), `openai_base_url` (empty: OpenAI's), `assistant_id`, `llm_model`,
`embedding_model_name`, `embedding_model_kwargs`, the capacities and thresholds
(`short_term_capacity`, `mid_term_capacity`, `long_term_knowledge_capacity`,
`retrieval_queue_capacity`, `mid_term_heat_threshold`), and MemoryScope's own
`embedding_api_base`, `embeddings_from_llm_endpoint`, `similarity_threshold`, `language`.
`mid_term_similarity_threshold` is accepted and not passed on, as MemoryOS's server does not pass
it (its value is for MemoryOS's embedding model; the config's applies). A relative
`data_storage_path` is relative to the working directory, as there. An unknown key is an error
naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memoryscope.errors import ConfigError

__all__ = ["read_mcp_config", "MCP_CONFIG_KEYS"]

_REQUIRED = ("user_id", "openai_api_key", "data_storage_path")
_TEXTS = ("user_id", "openai_api_key", "data_storage_path", "openai_base_url", "assistant_id", "llm_model",
          "embedding_model_name", "embedding_api_base", "language")  # fmt: skip
_INTS = ("short_term_capacity", "mid_term_capacity", "long_term_knowledge_capacity", "retrieval_queue_capacity")
_NUMBERS = ("mid_term_heat_threshold", "similarity_threshold")
_NOT_PASSED = ("mid_term_similarity_threshold",)
MCP_CONFIG_KEYS = (*_TEXTS, *_INTS, *_NUMBERS, *_NOT_PASSED, "embedding_model_kwargs", "embeddings_from_llm_endpoint")


def read_mcp_config(path: str | Path) -> dict[str, Any]:
    """`Memoryos(**read_mcp_config("config.json"))`: the file's settings as arguments; a
    `ConfigError` naming the file and the key for a missing, unknown or mistyped one."""
    source = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no such file: {source}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"not a readable JSON file: {error}", source=source) from None
    if not isinstance(data, dict):
        raise ConfigError("a MemoryOS config.json holds one JSON object", source=source)
    problems = [(key, "missing (MemoryOS's config.json requires it)") for key in _REQUIRED if key not in data]
    problems += [(key, f"unknown key; known: {', '.join(MCP_CONFIG_KEYS)}") for key in data if key not in MCP_CONFIG_KEYS]
    for key, value in data.items():
        wrong = (
            (key in _TEXTS and value is not None and not isinstance(value, str))
            or (key in _INTS and (isinstance(value, bool) or not isinstance(value, int) or value <= 0))
            or (key in _NUMBERS and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0))
            or (key == "embedding_model_kwargs" and value is not None and not isinstance(value, dict))
            or (key == "embeddings_from_llm_endpoint" and not isinstance(value, bool))
        )
        if wrong:
            shown = "(hidden)" if key == "openai_api_key" else repr(value)
            problems.append((key, f"has the wrong type or value: {shown}"))
    if not problems and not str(data["user_id"]).strip():
        problems.append(("user_id", "is empty"))
    if problems:
        raise ConfigError(problems, source=source)
    return {key: value for key, value in data.items() if key not in _NOT_PASSED}
