"""`Arguments`: MemoryScope 0.1.x's one-object settings, mapped onto a config.

    from memoryscope import MemoryScope, Arguments
    ms = MemoryScope(arguments=Arguments(language="en", memory_chat_class="api_memory_chat",
                                         generation_backend="openai_generation", generation_model="gpt-4o"))
    ms = MemoryScope(config_path="my.yaml", language="en")   # single fields, as keywords

As in 0.1.x, an `Arguments` object sets every one of its fields over the config (its defaults
included), while keywords set only the fields given. Without `config_path` the base is the
shipped `default_zh` config (`default` when the language is English), the same role 0.1.x's
`demo_config_zh.yaml` played, but with the embedded store.

What differs from 0.1.x, and why:
- `es_url` defaults to None, meaning the embedded SQLite store (`store_path`, else
  `MEMORYSCOPE_STORE_PATH`, else `~/.memoryscope/<es_index_name>.<embedding model>.db`: one
  file per embedding model, so the English and Chinese forms of 0.1.x's README, which embed
  with different models, do not share vectors no search could compare); give a URL to use
  Elasticsearch, as 0.1.x always did.
- `retrieve_mode` defaults to None: the store's own default (hybrid: vectors and keywords).
  0.1.x had only `dense`, which is still accepted.
- `embedding_backend` defaults to `dashscope_embedding`; 0.1.x wrote `dashscope_generation`
  there, a name its embedding class did not know.
- `store_path` is new.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml
from pydantic import TypeAdapter, ValidationError

from memoryscope.errors import ConfigError, closest

logger = logging.getLogger("memoryscope")

__all__ = ["Arguments", "apply_arguments", "arguments_from_fields", "base_config_name"]

_MODEL_CLASSES = {
    "generation_model": "llama_index_generation_model",
    "embedding_model": "llama_index_embedding_model",
    "rank_model": "llama_index_rank_model",
}
# Kept when a model entry switches backend: they mean the same to every generation backend.
_PORTABLE_MODEL_KEYS = ("max_tokens", "temperature")
_ES_CLASSES = ("elasticsearch_memory_store", "core.storage.llama_index_es_memory_store")


@dataclass
class Arguments:
    """MemoryScope 0.1.x's settings object; every field has 0.1.x's meaning (see the module doc)."""

    language: Literal["cn", "zh", "en"] = field(default="cn", metadata={"help": "cn (zh) or en"})
    thread_pool_max_workers: int = field(default=5, metadata={"help": "threads for parallel workflow branches"})
    memory_chat_class: str = field(default="cli_memory_chat", metadata={"help": "cli_memory_chat or api_memory_chat"})
    chat_stream: bool | None = field(default=None, metadata={"help": "stream replies; None: only cli_memory_chat streams"})
    human_name: str = field(default="user", metadata={"help": "the user's name"})
    assistant_name: str = field(default="AI", metadata={"help": "the assistant's name"})
    consolidate_memory_interval_time: int | None = field(
        default=1, metadata={"help": "seconds between background consolidations; None keeps the config's"}
    )
    reflect_and_reconsolidate_interval_time: int | None = field(
        default=15, metadata={"help": "seconds between background reflections; None keeps the config's"}
    )
    worker_params: dict[str, dict[str, Any]] = field(
        default_factory=dict, metadata={"help": "worker name -> key -> value, set over the config's workers"}
    )
    generation_backend: str = field(
        default="dashscope_generation", metadata={"help": "openai_generation, dashscope_generation, ..."}
    )
    generation_model: str = field(default="qwen-max", metadata={"help": "gpt-4o, qwen-max, ..."})
    generation_params: dict[str, Any] = field(default_factory=dict, metadata={"help": "max_tokens, temperature, ..."})
    embedding_backend: str = field(default="dashscope_embedding", metadata={"help": "openai_embedding, dashscope_embedding, ..."})
    embedding_model: str = field(default="text-embedding-v2", metadata={"help": "text-embedding-3-small, text-embedding-v2, ..."})
    embedding_params: dict[str, Any] = field(default_factory=dict)
    rank_backend: str = field(default="dashscope_rank", metadata={"help": "dashscope_rank, bge_rank, fusion_rank, ..."})
    rank_model: str = field(default="gte-rerank", metadata={"help": "gte-rerank, BAAI/bge-reranker-v2-m3, ..."})
    rank_params: dict[str, Any] = field(default_factory=dict)
    es_index_name: str = field(default="memory_index", metadata={"help": "Elasticsearch index, or the SQLite file's name"})
    es_url: str | None = field(default=None, metadata={"help": "Elasticsearch URL; None: the embedded SQLite store"})
    retrieve_mode: Literal["dense", "hybrid", "keyword"] | None = field(
        default=None, metadata={"help": "Elasticsearch search mode; None: the store's default (hybrid)"}
    )
    enable_ranker: bool = field(default=False, metadata={"help": "use the rank model in retrieval"})
    enable_today_contra_repeat: bool = field(default=True, metadata={"help": "check new observations against today's"})
    enable_long_contra_repeat: bool = field(default=False, metadata={"help": "check insights against long-term memory"})
    output_memory_max_count: int = field(default=20, metadata={"help": "most memories retrieval returns"})
    store_path: str | None = field(
        default=None, metadata={"help": "the SQLite store's file (new here); default: one per embedding model"}
    )


FIELD_NAMES: tuple[str, ...] = tuple(item.name for item in dataclasses.fields(Arguments))
_ADAPTER = TypeAdapter(Arguments)


def arguments_from_fields(
    values: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> tuple[Arguments, frozenset[str]]:
    """`Arguments` from single fields (keywords, or `--flag=value` text), and the names given.

    As in 0.1.x, an environment variable named exactly like a field (`language=en`) is read
    too, and wins over the keyword.
    """
    unknown = sorted(set(values) - set(FIELD_NAMES))
    if unknown:
        raise ConfigError([(f"arguments.{name}", _unknown(name)) for name in unknown])
    environ = os.environ if environ is None else environ
    given = {**values, **{name: environ[name] for name in FIELD_NAMES if name in environ}}
    return _validated({name: _parsed(name, value) for name, value in given.items()}), frozenset(given)


def validated_arguments(arguments: Arguments) -> Arguments:
    """The same settings, type-checked (0.1.x never checked them; a wrong type fails here, by name)."""
    return _validated({item.name: getattr(arguments, item.name) for item in dataclasses.fields(arguments)})


def base_config_name(arguments: Arguments) -> str:
    """The shipped config `Arguments` apply to when no `config_path` is given."""
    return "default" if arguments.language == "en" else "default_zh"


def apply_arguments(
    raw: dict[str, Any],
    arguments: Arguments,
    given: frozenset[str] | None = None,
    *,
    own_store_path: bool = False,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Set `arguments` over the raw config dict `raw`, as 0.1.x's config manager did.

    `given`: the fields to apply (None: all of them). `own_store_path`: the config is our base,
    not the user's, so the SQLite file is chosen from the arguments.
    """
    chosen = {name: getattr(arguments, name) for name in FIELD_NAMES if given is None or name in given}
    _apply_global(_section(raw, "global"), chosen)
    _apply_chat(raw, chosen)
    _apply_service(raw, chosen)
    _apply_workers(_section(raw, "worker"), chosen.get("worker_params") or {})
    _apply_models(_section(raw, "model"), chosen)
    _apply_store(raw, chosen, own_store_path, os.environ if environ is None else environ)


# -- sections ------------------------------------------------------------------------------


def _apply_global(settings: dict[str, Any], chosen: Mapping[str, Any]) -> None:
    for name in (
        "language",
        "thread_pool_max_workers",
        "enable_ranker",
        "enable_today_contra_repeat",
        "enable_long_contra_repeat",
        "output_memory_max_count",
    ):
        if chosen.get(name) is not None:
            settings[name] = chosen[name]


def _apply_chat(raw: dict[str, Any], chosen: Mapping[str, Any]) -> None:
    chats = _section(raw, "memory_chat")
    chat_class = chosen.get("memory_chat_class")
    if not chats:
        if chat_class is None and chosen.get("chat_stream") is None:
            return
        services = raw.get("memory_service") or {}
        chats[chat_class or "api_memory_chat"] = {
            "memory_service": next(iter(services), "memoryscope_service"),
            "generation_model": "generation_model",
        }
    entry = _first_entry(chats)
    if chat_class is not None:
        current = str(entry.get("class", ""))
        # a 0.1.x path keeps its prefix (`core.chat.`), as 0.1.x did
        entry["class"] = current.rsplit(".", 1)[0] + "." + chat_class if "." in current else chat_class
    if chosen.get("chat_stream") is not None:
        entry["stream"] = chosen["chat_stream"]
    elif chat_class is not None:
        entry["stream"] = chat_class == "cli_memory_chat"


def _apply_service(raw: dict[str, Any], chosen: Mapping[str, Any]) -> None:
    services = _section(raw, "memory_service")
    if not services:
        return
    service = _first_entry(services)
    for name in ("human_name", "assistant_name"):
        if chosen.get(name) is not None:
            service[name] = chosen[name]
    operations = service.get("memory_operations")
    if not isinstance(operations, dict):
        return
    for operation, name in (
        ("consolidate_memory", "consolidate_memory_interval_time"),
        ("reflect_and_reconsolidate", "reflect_and_reconsolidate_interval_time"),
    ):
        if chosen.get(name) is not None and isinstance(operations.get(operation), dict):
            operations[operation]["interval_time"] = chosen[name]


def _apply_workers(workers: dict[str, Any], worker_params: Mapping[str, Mapping[str, Any]]) -> None:
    for name, values in worker_params.items():
        if isinstance(workers.get(name), dict):  # 0.1.x skipped workers the config does not have
            workers[name].update(values)


def _apply_models(models: dict[str, Any], chosen: Mapping[str, Any]) -> None:
    for key, role_class in _MODEL_CLASSES.items():
        role = key.split("_")[0]
        backend = chosen.get(f"{role}_backend")
        model_name = chosen.get(f"{role}_model")
        params = chosen.get(f"{role}_params") or {}
        if backend is None and model_name is None and not params:
            continue
        current = models.get(key)
        entry: dict[str, Any] = current if isinstance(current, dict) else {}
        if backend is not None and backend != entry.get("module_name"):
            # another backend: the old entry's endpoint and key settings belonged to the old one
            kept = {name: entry[name] for name in _PORTABLE_MODEL_KEYS if name in entry}
            cls = entry.get("class") if str(entry.get("class", "")).startswith("core.") else role_class
            entry = {"class": cls, "module_name": backend, **kept}
        if model_name is not None:
            entry["model_name"] = model_name
            entry.pop("model", None)  # 0.1.x sent `model` over `model_name`; the argument wins here
        entry.update(params)
        if key == "rank_model" and chosen.get("enable_ranker") is False:
            entry.setdefault("required", False)  # unused with the ranker off: a missing key must not stop start-up
        models[key] = entry


def _apply_store(raw: dict[str, Any], chosen: Mapping[str, Any], own_store_path: bool, environ: Mapping[str, str]) -> None:
    store = _section(raw, "memory_store")
    index_name = chosen.get("es_index_name")
    es_url = chosen.get("es_url")
    is_elasticsearch = store.get("class") in _ES_CLASSES
    if es_url and not is_elasticsearch:
        raw["memory_store"] = store = {
            "class": "elasticsearch_memory_store",
            "embedding_model": store.get("embedding_model", "embedding_model"),
        }
        is_elasticsearch = True
    if is_elasticsearch:
        if es_url:
            legacy = str(store.get("class", "")).startswith("core.") or "es_url" in store
            store.pop("hosts" if legacy else "es_url", None)
            store["es_url" if legacy else "hosts"] = es_url if legacy else [es_url]
        if index_name:
            store["index_name"] = index_name
        if chosen.get("retrieve_mode") is not None:
            store["retrieve_mode"] = chosen["retrieve_mode"]
        return
    if chosen.get("store_path"):
        store["path"] = chosen["store_path"]
    elif own_store_path:
        default = f"~/.memoryscope/{index_name or 'memory_index'}.{_embedding_slug(raw, store)}.db"
        store["path"] = environ.get("MEMORYSCOPE_STORE_PATH") or default
        if "MEMORYSCOPE_STORE_PATH" not in environ:
            _name_the_earlier_file(index_name or "memory_index", default)


def _name_the_earlier_file(index_name: str, default: str) -> None:
    """Builds before one file per embedding model kept `~/.memoryscope/<index>.db`: say where it
    is, once, while the new file is not there yet, so no one thinks their memories are lost."""
    earlier = os.path.expanduser(f"~/.memoryscope/{index_name}.db")
    if os.path.exists(earlier) and not os.path.exists(os.path.expanduser(default)):
        logger.warning(
            "memories kept by an earlier build are in %s; this run uses %s (one file per embedding model): "
            "pass store_path=%r (--store_path) to go on with the earlier file",
            earlier, default, earlier,
        )  # fmt: skip


def _embedding_slug(raw: dict[str, Any], store: Mapping[str, Any]) -> str:
    """The store's embedding model as a file-name part (`text-embedding-3-small`, `BAAI_bge-m3`)."""
    entry = _section(raw, "model").get(str(store.get("embedding_model", "embedding_model")))
    entry = entry if isinstance(entry, dict) else {}
    name = entry.get("model_name") or entry.get("model") or entry.get("module_name") or "embedding"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)).strip("._") or "embedding"


# -- helpers ---------------------------------------------------------------------------------


def _section(raw: dict[str, Any], name: str) -> dict[str, Any]:
    """`raw[name]`, made a mapping when absent (a mapping of another type is left for validation)."""
    value = raw.get(name)
    if value is None:
        value = raw[name] = {}
    return value if isinstance(value, dict) else {}


def _first_entry(entries: dict[str, Any]) -> dict[str, Any]:
    """The first entry: 0.1.x applied its arguments to the first chat and the first service."""
    name = next(iter(entries))
    if not isinstance(entries[name], dict):
        entries[name] = {}
    entry: dict[str, Any] = entries[name]
    return entry


def _parsed(name: str, value: Any) -> Any:
    """Text for a field that is not text (an environment variable, `--flag=value`) read as YAML."""
    if not isinstance(value, str) or name in _TEXT_FIELDS:
        return value
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError:
        return value


_TEXT_FIELDS = frozenset(
    item.name
    for item in dataclasses.fields(Arguments)
    if item.type in ("str", "str | None") or str(item.type).startswith("Literal")
)


def _validated(values: Mapping[str, Any]) -> Arguments:
    try:
        return _ADAPTER.validate_python(dict(values))
    except ValidationError as error:
        problems = []
        for item in error.errors():
            where = ".".join(["arguments", *(str(part) for part in item["loc"][:1])])
            problems.append((where, f"{item['msg']} (got {item.get('input')!r})"))
        raise ConfigError(problems) from None


def _unknown(name: str) -> str:
    close = closest(name, FIELD_NAMES)
    hint = f" Did you mean {close!r}?" if close else ""
    return f"unknown argument.{hint} Known: {', '.join(FIELD_NAMES)}"
