"""Load configs written for MemoryScope 0.1.x.

0.1.x named classes by module path (`core.models.llama_index_generation_model`,
`core.worker.frontend.set_query_worker`, ...) and model backends by `openai_generation`-style
names, and read API keys from fixed environment variables. This module rewrites such a config
into ours before validation. Parts that do nothing here (the dummy worker, the monitor, logger
settings, keys no class used) are dropped with a notice; anything else we do not support is
reported together in one ConfigError.

Class paths are translated when the config uses any (`is_legacy`); the model vocabulary of
`legacy_models` in every config, since `Arguments` put 0.1.x backend names into our own configs.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import Any

from memoryscope.config.legacy_keys import Findings, translate_store_keys, translate_worker_keys
from memoryscope.config.legacy_models import translate_models
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
    "contrib.example_query_worker": "rewrite_query",
}
_LEGACY_PREFIXES = ("core.", "contrib.")
_WORKER_PREFIXES = ("core.worker.frontend.", "core.worker.backend.")
_DROPPED_WORKERS = {"core.worker.dummy_worker"}
_DROPPED_GLOBAL_KEYS = {"logger_name", "logger_name_time_suffix", "logger_to_screen"}


def is_legacy(data: dict[str, Any]) -> bool:
    """True when any `class:` in the config is a 0.1.x path (`core.*`, `contrib.*`)."""
    return any(str(cls).startswith(_LEGACY_PREFIXES) for cls in _all_classes(data))


def translate_legacy(
    data: dict[str, Any], environ: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Our config equivalent to `data`, with notices (what was dropped or chosen) and warnings.

    `environ` (default: the process environment) is where 0.1.x backends found their endpoints.
    """
    out = copy.deepcopy(data)
    findings = Findings()
    if is_legacy(out):
        _translate_classes(out, findings)
        translate_worker_keys(out.get("worker"), findings)
        translate_store_keys(out.get("memory_store"), findings)
    translate_models(out.get("model"), os.environ if environ is None else environ, findings)
    if findings.problems:
        raise ConfigError([(where, f"{message} (MemoryScope 0.1 config)") for where, message in findings.problems])
    return out, findings.notices, findings.warnings


def _translate_classes(out: dict[str, Any], findings: Findings) -> None:
    notices, problems = findings.notices, findings.problems
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

    if isinstance(settings, dict) and settings.get("enable_ranker") is False and isinstance(out.get("model"), dict):
        # 0.1.x built a model on first use, so with the ranker off a rank model without its key
        # never failed; here models are built up front, so such a model is left out instead.
        for entry in out["model"].values():
            if isinstance(entry, dict) and entry.get("class") == "llama_index_rank_model":
                entry.setdefault("required", False)


def _translate_class(entry: dict[str, Any], where: str, problems: list[tuple[str, str]]) -> None:
    cls = entry.get("class")
    if not isinstance(cls, str) or not cls.startswith(_LEGACY_PREFIXES):
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
    if cls.startswith("contrib."):
        problems.append(
            (
                f"{where}.class",
                f"{cls!r} is a custom MemoryScope 0.1 worker: port it to the Worker contract of memoryscope.worker "
                "(reads, writes, Params, run) and name it by its registered name or dotted path",
            )
        )
        return
    problems.append(
        (
            f"{where}.class",
            f"{cls!r} is not supported by this version; known 0.1 classes: {', '.join(sorted(_CLASS_PATHS))} and core.worker.*",
        )
    )


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
