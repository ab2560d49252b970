"""MemoryScope 0.1.x vocabulary inside `model:` entries, read in every config.

0.1.x handed a model entry's keys to a LlamaIndex class (`OpenAI`, `OpenAILike`,
`OpenAIEmbedding`, `DashScopeRerank`, ...), so its configs, the walkthroughs written for it, and
`Arguments` (which fill our own configs with its backend names) use that vocabulary: backend
names such as `openai_generation` or `like_generation`, `model` beside `model_name`, `base_url`,
`embed_batch_size`, sampling options at the top of the entry. Here each becomes our key, and the
keys that have no counterpart are named in one notice per entry. Unknown keys not listed here
are left for validation to reject with the closest known name.

The translation applies only to entries of our model classes (`llama_index_*_model`): a user's
own model class keeps its own vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memoryscope.config.legacy_keys import Findings, drop_ignored_keys

__all__ = ["translate_models"]

_OPENAI_API = "https://api.openai.com/v1"
_DASHSCOPE_COMPATIBLE = "https://dashscope.aliyuncs.com/compatible-mode/v1"
# Where 0.1.x (through the openai client) read OpenAI's endpoint from, first found wins.
_OPENAI_BASE_ENV = ("OPENAI_BASE_URL", "OPENAI_API_BASE")

# 0.1.x module_name → (ours, keys it implied: where the key came from, which endpoint, the model when none is named:
# 0.1.x's own demo and `Arguments` choices)
_MODULE_NAMES: dict[str, tuple[str, dict[str, Any]]] = {
    "openai_generation": ("openai", {"api_key_env": "OPENAI_API_KEY", "model_name": "gpt-4o"}),
    "dashscope_generation": ("dashscope", {"api_key_env": "DASHSCOPE_API_KEY", "model_name": "qwen-max"}),
    "like_generation": ("openai_like", {}),  # the walkthroughs register LlamaIndex's OpenAILike under this name
    "openai_like_generation": ("openai_like", {}),
    "openai_embedding": (
        "bge_embedding",
        {"api_base": _OPENAI_API, "api_key_env": "OPENAI_API_KEY", "model_name": "text-embedding-3-small"},
    ),
    "dashscope_embedding": (
        "bge_embedding",
        {"api_base": _DASHSCOPE_COMPATIBLE, "api_key_env": "DASHSCOPE_API_KEY", "model_name": "text-embedding-v2"},
    ),
    "dashscope_rank": ("dashscope_rank", {"api_key_env": "DASHSCOPE_API_KEY"}),
}
_READS_OPENAI_ENV = {"openai_generation", "openai_embedding"}

_RENAMED = {"embed_batch_size": "batch_size", "retry_interval": "retry_backoff_s"}
# Request options LlamaIndex classes took as constructor keys; here they go in the request body.
_SAMPLING = (
    "top_p", "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty", "repetition_penalty", "stop",
    "logit_bias", "enable_search",
)  # fmt: skip
_IGNORED = {
    "kwargs_filter": "every key is checked here, and an unknown one is an error",
    "raise_exception": "a failed call always raises a ModelError naming backend, model and endpoint",
    "reuse_client": "each model keeps its own HTTP client",
    "num_workers": "batches are sent one after the other",
    "api_version": "Azure OpenAI API versions are not supported here",
    "default_headers": "custom request headers are not sent here",
    "is_chat_model": "the chat API is always used",
    "is_function_calling_model": "workers call no functions",
    "system_prompt": "each worker writes its own system prompt",
    "incremental_output": "streaming replies are assembled by the backend",
    "mode": "the embeddings endpoint is always called with `model_name`",
    "text_type": "no query/document type is sent; use `query_prefix`/`passage_prefix` where a model needs one",
    "return_documents": "only the scores of a rerank reply are read",
    "additional_kwargs": "this backend sends no extra request fields",
}


def translate_models(models: Any, environ: Mapping[str, str], findings: Findings) -> None:
    """Rewrite every `model:` entry of one of our model classes from 0.1.x vocabulary, in place."""
    from memoryscope.models.registry import MODEL_CLASSES  # imported here: the models import the config package

    if not isinstance(models, dict):
        return
    for name, entry in models.items():
        if isinstance(entry, dict) and entry.get("class") in MODEL_CLASSES.roles:
            _translate_entry(entry, f"model.{name}", environ, findings, MODEL_CLASSES)


def _translate_entry(entry: dict[str, Any], where: str, environ: Mapping[str, str], findings: Findings, classes: Any) -> None:
    old_module = entry.get("module_name")
    implied: dict[str, Any] = {}
    if isinstance(old_module, str) and old_module in _MODULE_NAMES:
        entry["module_name"], implied = _MODULE_NAMES[old_module]
        implied = dict(implied)
        if old_module in _READS_OPENAI_ENV:
            base = next((environ[name] for name in _OPENAI_BASE_ENV if environ.get(name, "").strip()), None)
            if base is not None:
                implied["api_base"] = base.strip()
    _model_name(entry, where, findings)
    if "base_url" in entry and "api_base" not in entry:
        # One name before the implied defaults fill in `api_base`; both given is for the Params to judge.
        entry["api_base"] = entry.pop("base_url")
    for key, value in implied.items():
        entry.setdefault(key, value)

    fields = _backend_fields(entry, where, classes)
    if fields is None:
        return  # an unknown backend is reported by validation
    for old, new in _RENAMED.items():
        if old in entry and old not in fields and new in fields and new not in entry:
            entry[new] = entry.pop(old)
    if old_module == "openai_embedding" and "dimensions" in entry and "send_dimensions" in fields:
        entry.setdefault("send_dimensions", True)  # OpenAIEmbedding asked the server for vectors of that size
    if "extra_body" in fields:
        _into_extra_body(entry, fields)
    drop_ignored_keys(entry, where, {key: why for key, why in _IGNORED.items() if key not in fields}, findings)


def _model_name(entry: dict[str, Any], where: str, findings: Findings) -> None:
    """`model:` is 0.1.x's `model_name`: LlamaIndex received `model`, so it wins when they differ."""
    if "model" not in entry:
        return
    model = entry.pop("model")
    given = entry.get("model_name")
    if given is not None and given != model:
        findings.notices.append(
            f"{where}: `model: {model}` and `model_name: {given}` differ; MemoryScope 0.1 sent `model` to the server, "
            f"so {model!r} is used"
        )
    entry["model_name"] = model


def _into_extra_body(entry: dict[str, Any], fields: set[str]) -> None:
    """Sampling options and `additional_kwargs` join `extra_body`; what `extra_body` itself says wins."""
    own = entry.get("extra_body", {})
    if not isinstance(own, dict):
        return  # validation reports the malformed `extra_body`; the options are judged once it is fixed
    body: dict[str, Any] = {}
    if isinstance(entry.get("additional_kwargs"), dict) and "additional_kwargs" not in fields:
        body.update(entry.pop("additional_kwargs"))
    for key in _SAMPLING:
        if key in entry and key not in fields:
            body[key] = entry.pop(key)
    if body:
        entry["extra_body"] = {**body, **own}


def _backend_fields(entry: dict[str, Any], where: str, classes: Any) -> set[str] | None:
    from memoryscope.errors import MemoryScopeError

    try:
        _, backend = classes.resolve(entry.get("class"), entry.get("module_name"), where)
    except MemoryScopeError:
        return None
    params = getattr(backend, "Params", None)
    return set(params.model_fields) if params is not None else None
