"""MemoryScope 0.1.x keys of worker and memory-store entries that mean nothing here.

0.1.x passed every key of an entry to the class as `**kwargs` and let each class read the ones it
knew, so its configs carry keys that no class ever read (`enable_parallel`), keys every worker
accepted whether it used them or not (`rank_model` on `info_filter`), and keys of parts that
work differently here (Elasticsearch mapping fields). Such a key is dropped, and every key
dropped from one entry is named, with its reason, in one notice for that entry. Only the keys
listed here are dropped: any other unknown key still fails validation with the closest known
name, so a misspelling is never silently accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Findings", "drop_ignored_keys", "translate_store_keys", "translate_worker_keys"]

_PROMPTS = "prompts come from workers/prompts/<worker>.yaml here"
_WORKER_KEYS = {
    "raise_exception": "a failing step always raises here, as a WorkerError naming its workflow and worker",
    "enable_parallel": "0.1.1 never read it from the config, its workers set it in code",
    "prompt_file": _PROMPTS,
    "prompt_dict": _PROMPTS,
    "generation_model_kwargs": "this worker calls no LLM",
    "generation_model": "this worker uses no generation model",
    "embedding_model": "this worker uses no embedding model",
    "rank_model": "this worker uses no rank model",
}
# Keys one 0.1.1 worker read from its config and then never used.
_ONE_WORKER_KEYS = {
    "contra_repeat": {
        "retrieve_top_k": "0.1.1 read it but never used it; `contra_repeat_max_count` bounds the observations compared",
    },
}

_ES_KEYS = {"es_url": "hosts"}
_ES_IGNORED = {
    "hybrid_alpha": "hybrid search fuses the dense and keyword lists by reciprocal rank here",
    "es_cloud_id": "connect through `hosts` (the deployment's Elasticsearch URL)",
    "text_field": "this store keeps its own index mapping",
    "vector_field": "this store keeps its own index mapping",
    "batch_size": "this store sizes its own bulk writes",
    "distance_strategy": "vectors are always compared by cosine similarity here",
}
# Credentials are only read from the environment here; these name the key that says where.
_ES_SECRETS = {"es_api_key": "api_key_env", "es_user": "username_env", "es_password": "password_env"}


@dataclass
class Findings:
    """What translating a config found: notices (done for the user), warnings (to act on), problems."""

    notices: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)


def drop_ignored_keys(entry: dict[str, Any], where: str, reasons: dict[str, str], findings: Findings) -> None:
    """Remove the keys of `reasons` from `entry`, naming them all in one notice."""
    dropped = [key for key in reasons if key in entry]
    if not dropped:
        return
    for key in dropped:
        entry.pop(key)
    listed = "; ".join(f"{key} ({reasons[key]})" for key in dropped)
    findings.notices.append(f"{where}: MemoryScope 0.1 keys accepted and ignored: {listed}")


def translate_worker_keys(workers: Any, findings: Findings) -> None:
    """Drop, per `worker:` entry, the 0.1.x keys its worker here has no use for."""
    if not isinstance(workers, dict):
        return
    for name, entry in workers.items():
        if not isinstance(entry, dict):
            continue
        fields = _worker_fields(entry.get("class"))
        if fields is None:
            continue  # an unknown class is reported by validation; its keys cannot be judged
        reasons = {**_WORKER_KEYS, **_ONE_WORKER_KEYS.get(str(entry.get("class")), {})}
        drop_ignored_keys(entry, f"worker.{name}", {key: why for key, why in reasons.items() if key not in fields}, findings)


def translate_store_keys(store: Any, findings: Findings) -> None:
    """0.1.x's Elasticsearch store keys: `es_url` becomes `hosts`; the rest are dropped with a reason."""
    if not isinstance(store, dict) or store.get("class") != "elasticsearch_memory_store":
        return
    for old, new in _ES_KEYS.items():
        if old in store:
            value = store.pop(old)
            store[new] = [value] if isinstance(value, str) else value
    for key, env_key in _ES_SECRETS.items():
        if key in store:
            findings.warnings.append(
                f"memory_store.{key}: credentials are not read from the config here; "
                f"put the value in an environment variable and name it with `{env_key}: NAME`"
            )
    secrets = {key: f"read from the environment here, see `{env_key}`" for key, env_key in _ES_SECRETS.items()}
    drop_ignored_keys(store, "memory_store", {**_ES_IGNORED, **secrets}, findings)


def _worker_fields(class_name: Any) -> set[str] | None:
    """The keys our worker `class_name` accepts (field names and aliases); None when it is not registered."""
    from memoryscope.worker import WORKERS  # imported here: the worker module imports the config package

    if not isinstance(class_name, str) or class_name not in WORKERS.names():
        return None
    names: set[str] = set()
    for field_name, info in WORKERS.get(class_name).Params.model_fields.items():
        names.add(field_name)
        alias = info.validation_alias
        choices = getattr(alias, "choices", [alias]) if alias is not None else []
        names.update(choice for choice in choices if isinstance(choice, str))
    return names
