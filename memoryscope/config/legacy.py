"""Load configs written for MemoryScope 0.1.x.

0.1.x named classes by module path (`core.models.llama_index_generation_model`,
`core.worker.frontend.set_query_worker`, ...) and model backends by `openai_generation`-style
names, and read API keys from fixed environment variables. This module rewrites such a config
into ours before validation. Parts that do nothing here (the dummy worker, the monitor, logger
settings) are dropped with a notice; anything else we do not support is reported together in
one ConfigError.
"""

from __future__ import annotations

import copy
from typing import Any

from memoryscope.errors import ConfigError

__all__ = ["translate_legacy", "is_legacy"]

_CLASS_PATHS = {
    "core.models.llama_index_generation_model": "llama_index_generation_model",
    "core.models.llama_index_embedding_model": "llama_index_embedding_model",
    "core.models.llama_index_rank_model": "llama_index_rank_model",
    "core.storage.llama_index_es_memory_store": "elasticsearch_memory_store",
    "core.service.memory_scope_service": "memory_service",
    "core.chat.api_memory_chat": "api_memory_chat",
    "core.chat.cli_memory_chat": "cli_memory_chat",
    "core.operation.frontend_operation": "frontend_operation",
    "core.operation.backend_operation": "backend_operation",
    "core.operation.consolidate_memory_op": "consolidate_memory_op",
}
_WORKER_PREFIXES = ("core.worker.frontend.", "core.worker.backend.")
_DROPPED_WORKERS = {"core.worker.dummy_worker"}
_DROPPED_GLOBAL_KEYS = {"logger_name", "logger_name_time_suffix", "logger_to_screen"}

# 0.1.x module_name → (ours, defaults it implied: where the key came from, which endpoint)
_MODULE_NAMES: dict[str, tuple[str, dict[str, Any]]] = {
    "openai_generation": ("openai", {"api_key_env": "OPENAI_API_KEY"}),
    "dashscope_generation": ("dashscope", {"api_key_env": "DASHSCOPE_API_KEY"}),
    "openai_embedding": ("bge_embedding", {"api_base": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"}),
    "dashscope_embedding": (
        "bge_embedding",
        {"api_base": "https://dashscope.aliyuncs.com/compatible-mode/v1", "api_key_env": "DASHSCOPE_API_KEY"},
    ),
    "dashscope_rank": ("dashscope_rank", {"api_key_env": "DASHSCOPE_API_KEY"}),
}
_ES_KEYS = {"es_url": "hosts"}


def is_legacy(data: dict[str, Any]) -> bool:
    """True when any `class:` in the config is a 0.1.x `core.*` path."""
    return any(str(cls).startswith("core.") for cls in _all_classes(data))


def translate_legacy(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Our config equivalent to the 0.1.x `data`, and notices about what was dropped."""
    out = copy.deepcopy(data)
    notices: list[str] = []
    problems: list[tuple[str, str]] = []

    settings = out.get("global")
    if isinstance(settings, dict):
        for key in sorted(_DROPPED_GLOBAL_KEYS & set(settings)):
            settings.pop(key)
            notices.append(f"global.{key}: MemoryScope 0.1 logging setting ignored (use Python logging)")
    if "monitor" in out:
        out.pop("monitor")
        notices.append("monitor: MemoryScope 0.1 monitor ignored (usage is counted per model)")

    for section, entries in (("model", out.get("model")), ("worker", out.get("worker")), ("memory_chat", out.get("memory_chat"))):
        if not isinstance(entries, dict):
            continue
        for name in list(entries):
            entry = entries[name]
            if not isinstance(entry, dict):
                continue
            where = f"{section}.{name}"
            if entry.get("class") in _DROPPED_WORKERS:
                entries.pop(name)
                notices.append(f"{where}: MemoryScope 0.1 dummy worker dropped (it did nothing)")
                continue
            _translate_class(entry, where, problems)
            if section == "model":
                _translate_module_name(entry, where, problems)

    services = out.get("memory_service")
    if isinstance(services, dict):
        for service_name, service in services.items():
            if not isinstance(service, dict):
                continue
            _translate_class(service, f"memory_service.{service_name}", problems)
            operations = service.get("memory_operations")
            if isinstance(operations, dict):
                for op_name, operation in operations.items():
                    if isinstance(operation, dict):
                        _translate_class(operation, f"memory_service.{service_name}.memory_operations.{op_name}", problems)

    store = out.get("memory_store")
    if isinstance(store, dict):
        _translate_class(store, "memory_store", problems)
        if "hybrid_alpha" in store:
            store.pop("hybrid_alpha")
            notices.append("memory_store.hybrid_alpha: dropped; hybrid search fuses by reciprocal rank here")
        for old, new in _ES_KEYS.items():
            if old in store:
                value = store.pop(old)
                store[new] = [value] if isinstance(value, str) else value

    if problems:
        raise ConfigError([(where, f"{message} (MemoryScope 0.1 config)") for where, message in problems])
    return out, notices


def _translate_class(entry: dict[str, Any], where: str, problems: list[tuple[str, str]]) -> None:
    cls = entry.get("class")
    if not isinstance(cls, str) or not cls.startswith("core."):
        return
    if cls in _CLASS_PATHS:
        entry["class"] = _CLASS_PATHS[cls]
        return
    if cls == "core.worker.backend.update_memory_worker" and entry.get("method") == "from_memory_key":
        # 0.1.x wrote consolidation results through update_memory; here that is `store_memory`.
        entry["class"] = "store_memory"
        entry.pop("method")
        entry.pop("memory_key", None)
        return
    for prefix in _WORKER_PREFIXES:
        if cls.startswith(prefix):
            entry["class"] = cls[len(prefix) :].removesuffix("_worker")
            return
    problems.append(
        (
            f"{where}.class",
            f"{cls!r} is not supported by this version; known 0.1 classes: {', '.join(sorted(_CLASS_PATHS))} and core.worker.*",
        )
    )


def _translate_module_name(entry: dict[str, Any], where: str, problems: list[tuple[str, str]]) -> None:
    module_name = entry.get("module_name")
    if not isinstance(module_name, str) or module_name not in _MODULE_NAMES:
        return
    ours, implied = _MODULE_NAMES[module_name]
    entry["module_name"] = ours
    for key, value in implied.items():
        entry.setdefault(key, value)


def _all_classes(data: dict[str, Any]) -> list[Any]:
    found: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "class" in node:
                found.append(node["class"])
            for value in node.values():
                walk(value)

    walk(data)
    return found
