"""mem0's config dict (`Memory.from_config`) read onto MemoryScope's `default` config.

What maps:

- `llm`: any OpenAI-compatible provider (`openai`, `openai_structured`, `deepseek`, `groq`,
  `together`, `xai`, `vllm`, `lmstudio`, `ollama`): `model`, `temperature`, `max_tokens`,
  `api_key` and the provider's base URL key (`openai_base_url`, `ollama_base_url`, ...) become the
  generation model. Without an `llm` entry, `OPENAI_API_KEY` in the environment means OpenAI (at
  `OPENAI_BASE_URL` when set), as mem0 reads it, unless MemoryScope's own `MEMORYSCOPE_LLM_API_BASE`
  is set; with neither, there is no LLM and `infer=True` keeps the messages as they are.
- `embedder`: an OpenAI-compatible provider (`openai`, `ollama`, `lmstudio`, `together`, or
  `huggingface` with `huggingface_base_url`) becomes the embedding model (`model`, `api_key`,
  `embedding_dims`, base URL); any other keeps the local default model, with a notice naming it.
  Without an `embedder` entry the local model is used (offline), not OpenAI's.
- `vector_store`: a `path` (any provider: qdrant, chroma, faiss, ...) is the embedded SQLite
  store, in the file `<path>/<collection_name>.db` (or `path` itself when it names a `.db` file);
  `elasticsearch` (`host`, `port`, `collection_name`, `verify_certs`, `ca_certs`) is MemoryScope's
  Elasticsearch store. Another server-backed store is an error naming it.
- `history_db_path`, `custom_instructions` and the prompt keys, `reranker`, `graph_store` are not
  used (history is kept in the store itself): each gives a one-line notice naming the key.

Anything else is an error naming the key and the keys known.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoryscope.errors import ConfigError

__all__ = ["Mem0Plan", "plan_of", "INLINE_KEY_PATHS"]

# provider: (default base URL, environment variable holding its key, default model)
_LLMS: dict[str, tuple[str, str | None, str | None]] = {
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-5-mini"),
    "openai_structured": ("https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-5-mini"),
    "deepseek": ("https://api.deepseek.com", "DEEPSEEK_API_KEY", "deepseek-chat"),
    "groq": ("https://api.groq.com/openai/v1", "GROQ_API_KEY", None),
    "together": ("https://api.together.xyz/v1", "TOGETHER_API_KEY", None),
    "xai": ("https://api.x.ai/v1", "XAI_API_KEY", "grok-2-latest"),
    "vllm": ("http://localhost:8000/v1", "VLLM_API_KEY", None),
    "lmstudio": ("http://localhost:1234/v1", None, None),
    "ollama": ("http://localhost:11434", None, None),
}
_EMBEDDERS: dict[str, tuple[str | None, str | None, str | None]] = {
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY", "text-embedding-3-small"),
    "together": ("https://api.together.xyz/v1", "TOGETHER_API_KEY", None),
    "lmstudio": ("http://localhost:1234/v1", None, None),
    "ollama": ("http://localhost:11434", None, "nomic-embed-text"),
    "huggingface": (None, None, None),  # OpenAI-compatible only when served (`huggingface_base_url`)
}
_BASE_URL_KEYS = (
    "openai_base_url", "base_url", "deepseek_base_url", "xai_base_url", "vllm_base_url", "lmstudio_base_url",
    "ollama_base_url", "huggingface_base_url", "together_base_url",
)  # fmt: skip
_UNUSED_TOP = ("history_db_path", "custom_instructions", "custom_fact_extraction_prompt", "custom_update_memory_prompt",
               "reranker", "graph_store")  # fmt: skip
_KNOWN_TOP = ("llm", "embedder", "vector_store", "version", *_UNUSED_TOP)
_SQLITE_KEYS = ("path", "collection_name", "embedding_model_dims", "on_disk")
_ES_KEYS = ("host", "port", "collection_name", "verify_certs", "ca_certs", "use_ssl", "embedding_model_dims", "auto_create_index")
_ES_SECRETS = ("user", "password", "api_key", "cloud_id", "headers")
INLINE_KEY_PATHS = ("model.generation_model.api_key", "model.embedding_model.api_key")
_ES_CREDENTIALS = (
    "MemoryScope reads Elasticsearch credentials from the environment, not the config: use a MemoryScope config "
    "(`Memory(memoryscope_config=...)`) with username_env/password_env/api_key_env"
)
_LOCAL_EMBEDDING = "the local default embedding model (multilingual-e5-small)"


@dataclass
class Mem0Plan:
    """What a mem0 config changes in the `default` config (`adjust`, for `load_config`), and the
    notices about the keys it does not use."""

    generation: dict[str, Any] | None = None
    embedding: dict[str, Any] | None = None
    store: dict[str, Any] | None = None
    notices: list[str] = field(default_factory=list)

    def adjust(self, raw: dict[str, Any]) -> None:
        models = raw.setdefault("model", {})
        if self.generation is not None:
            models["generation_model"] = self.generation
        if self.embedding is not None:
            models["embedding_model"] = self.embedding
        if self.store is not None and self.store.get("class") == "sqlite_memory_store":
            raw.setdefault("memory_store", {})["path"] = self.store["path"]  # the rest as the config has it
        elif self.store is not None:
            kept = {key: value for key, value in (raw.get("memory_store") or {}).items() if key.startswith("hybrid_")}
            raw["memory_store"] = {**kept, **self.store}

    @property
    def adjuster(self) -> Callable[[dict[str, Any]], None]:
        return self.adjust


def plan_of(config: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None) -> Mem0Plan:
    """The plan for mem0's `config` dict (None: mem0's `Memory()`, read from the environment)."""
    env = os.environ if environ is None else environ
    given = dict(config or {})
    unknown = sorted(str(key) for key in given if key not in _KNOWN_TOP)
    if unknown:
        raise ConfigError([(key, f"not a mem0 config key MemoryScope knows; known: {', '.join(_KNOWN_TOP)}") for key in unknown])
    plan = Mem0Plan()
    for key in _UNUSED_TOP:
        if given.get(key) is not None:
            plan.notices.append(f"mem0 config {key!r} is not used by MemoryScope (history is kept in the store itself)")
    llm = _section(given, "llm")
    if llm is not None:
        plan.generation = _generation(*llm, env, plan.notices)
    elif env.get("OPENAI_API_KEY", "").strip() and not env.get("MEMORYSCOPE_LLM_API_BASE", "").strip():
        plan.generation = _generation("openai", {}, env, plan.notices, required=False)
    embedder = _section(given, "embedder")
    if embedder is not None:
        plan.embedding = _embedding(*embedder, env, plan.notices)
    store = _section(given, "vector_store")
    if store is not None:
        plan.store = _store(*store, plan.notices)
    return plan


def _section(given: Mapping[str, Any], name: str) -> tuple[str, dict[str, Any]] | None:
    entry = given.get(name)
    if entry is None:
        return None
    if not isinstance(entry, Mapping):
        raise ConfigError([(name, f"must be a dict like {{'provider': ..., 'config': {{...}}}}, got {type(entry).__name__}")])
    extra = sorted(set(entry) - {"provider", "config"})
    if extra:
        raise ConfigError([(f"{name}.{extra[0]}", "not a key here; a section has 'provider' and 'config'")])
    provider = entry.get("provider") or "openai"
    options = entry.get("config") or {}
    if not isinstance(provider, str) or not isinstance(options, Mapping):
        raise ConfigError([(name, "'provider' must be a text and 'config' a dict")])
    return provider, dict(options)


def _base_url(provider: str, options: dict[str, Any], default: str | None, env: Mapping[str, str]) -> str | None:
    url = next((options.pop(key) for key in _BASE_URL_KEYS if options.get(key)), None)
    if url is None and provider.startswith("openai"):
        url = env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_BASE") or None
    url = str(url or default or "")
    if provider == "ollama" and url and not url.rstrip("/").endswith("/v1"):
        url = url.rstrip("/") + "/v1"  # Ollama's OpenAI-compatible API
    for key in _BASE_URL_KEYS:
        options.pop(key, None)
    return url or None


def _generation(
    provider: str, options: dict[str, Any], env: Mapping[str, str], notices: list[str], *, required: bool = True
) -> dict[str, Any]:
    if provider not in _LLMS:
        known = ", ".join(_LLMS)
        raise ConfigError(
            [
                (
                    "llm.provider",
                    f"{provider!r} is not an OpenAI-compatible provider MemoryScope can call; use one of {known}",
                )
            ]
        )
    default_url, key_env, default_model = _LLMS[provider]
    url = _base_url(provider, options, default_url, env)
    model = options.pop("model", None) or default_model
    if not model:
        raise ConfigError([("llm.config.model", f"name the {provider} model to use (it has no default here)")])
    entry: dict[str, Any] = {
        "class": "llama_index_generation_model", "module_name": "openai_like", "model_name": str(model), "api_base": url,
        "api_key_env": key_env, "max_tokens": options.pop("max_tokens", 2000), "required": required,
    }  # fmt: skip
    if options.get("temperature") is not None:
        entry["temperature"] = options.pop("temperature")
    if options.get("api_key"):
        entry["api_key"] = options.pop("api_key")
    notices.extend(
        f"mem0 config llm.config.{key} is not used by MemoryScope" for key in sorted(options) if options[key] is not None
    )
    return entry


def _embedding(provider: str, options: dict[str, Any], env: Mapping[str, str], notices: list[str]) -> dict[str, Any] | None:
    served = provider in _EMBEDDERS and (provider != "huggingface" or options.get("huggingface_base_url"))
    if not served:
        notices.append(f"mem0 embedder {provider!r} is not an OpenAI-compatible endpoint here; using {_LOCAL_EMBEDDING}")
        return None
    default_url, key_env, default_model = _EMBEDDERS[provider]
    url = _base_url(provider, options, default_url, env)
    model = options.pop("model", None) or default_model or "text-embedding-3-small"
    entry: dict[str, Any] = {
        "class": "llama_index_embedding_model", "module_name": "bge_embedding", "model_name": str(model), "api_base": url,
        "api_key_env": key_env,
    }  # fmt: skip
    if options.get("api_key"):
        entry["api_key"] = options.pop("api_key")
    dims = options.pop("embedding_dims", None)
    if dims:
        entry.update(dimensions=int(dims), send_dimensions=provider == "openai")
    notices.extend(
        f"mem0 config embedder.config.{key} is not used by MemoryScope" for key in sorted(options) if options[key] is not None
    )
    return entry


def _store(provider: str, options: dict[str, Any], notices: list[str]) -> dict[str, Any]:
    collection = str(options.get("collection_name") or "mem0")
    if provider == "elasticsearch":
        secret = next((key for key in _ES_SECRETS if options.get(key)), None)
        if secret is not None:
            raise ConfigError(
                [(f"vector_store.config.{secret}", _ES_CREDENTIALS)]
            )  # fmt: skip
        _notice_unknown("vector_store.config", options, _ES_KEYS, notices)
        host = str(options.get("host") or "localhost")
        scheme = "" if "://" in host else "http://"  # mem0 hands the host to the client as given: a URL, or a name
        entry: dict[str, Any] = {
            "class": "elasticsearch_memory_store", "hosts": [f"{scheme}{host}:{int(options.get('port') or 9200)}"],
            "index_name": collection.lower(), "embedding_model": "embedding_model",
            "verify_certs": bool(options.get("verify_certs", True)),
        }  # fmt: skip
        if options.get("ca_certs"):
            entry["ca_certs"] = str(options["ca_certs"])
        return entry
    path = options.get("path")
    if not path:
        raise ConfigError(
            [("vector_store.provider", f"{provider!r} without a 'path' is a server MemoryScope does not store in; give "
              "config.path for the embedded SQLite store, or use provider 'elasticsearch'")]
        )  # fmt: skip
    _notice_unknown("vector_store.config", options, _SQLITE_KEYS, notices)
    where = Path(str(path)).expanduser()
    file = where if where.suffix in (".db", ".sqlite", ".sqlite3") else where / f"{collection}.db"
    notices.append(f"mem0 vector_store {provider!r}: memories are kept in MemoryScope's embedded SQLite store at {file}")
    return {"class": "sqlite_memory_store", "path": str(file), "embedding_model": "embedding_model"}


def _notice_unknown(where: str, options: Mapping[str, Any], known: tuple[str, ...], notices: list[str]) -> None:
    notices.extend(f"mem0 config {where}.{key} is not used by MemoryScope" for key in sorted(options) if key not in known)
