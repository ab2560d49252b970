"""Every key a MemoryScope 0.1.1 config could hold loads: mapped to ours, or named as ignored.

Configs are written as 0.1.1 users wrote them (the SiliconFlow walkthrough, the demo config);
assertions are on the validated Config, its notices and warnings, and on the problems.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from memoryscope.cli import main
from memoryscope.config import load_config
from memoryscope.errors import ConfigError

SECRET = "sk-walkthrough-4f9e2b71c0d3"

WALKTHROUGH = f"""
global: {{language: cn, enable_ranker: true}}
memory_chat:
  api_memory_chat: {{class: core.chat.api_memory_chat, memory_service: memoryscope_service,
                    generation_model: generation_model, stream: false}}
memory_service:
  memoryscope_service:
    class: core.service.memory_scope_service
    memory_operations:
      retrieve_memory:
        class: core.operation.frontend_operation
        workflow: set_query,[extract_time|retrieve_obs_ins,semantic_rank],fuse_rerank
worker:
  set_query: {{class: core.worker.frontend.set_query_worker}}
  extract_time: {{class: core.worker.frontend.extract_time_worker, generation_model: generation_model}}
  retrieve_obs_ins: {{class: core.worker.frontend.retrieve_memory_worker, retrieve_obs_top_k: 100}}
  semantic_rank: {{class: core.worker.frontend.semantic_rank_worker, rank_model: rank_model}}
  fuse_rerank: {{class: core.worker.frontend.fuse_rerank_worker, fuse_score_threshold: 0.01}}
model:
  generation_model:
    class: core.models.llama_index_generation_model
    module_name: like_generation
    model_name: Qwen/Qwen2.5-7B-Instruct
    model: Qwen/Qwen2.5-7B-Instruct
    api_key: {SECRET}
    api_base: https://api.siliconflow.cn/v1
    max_tokens: 2000
    temperature: 0.01
  embedding_model:
    class: core.models.llama_index_embedding_model
    module_name: bge_embedding
    model_name: BAAI/bge-m3
    base_url: https://api.siliconflow.cn/v1/embeddings
    api_key: {SECRET}
  rank_model:
    class: core.models.llama_index_rank_model
    module_name: bge_rank
    model_name: BAAI/bge-reranker-v2-m3
    api_key: {SECRET}
    api_base: https://api.siliconflow.cn/v1/rerank
    top_n: 500
memory_store:
  class: core.storage.llama_index_es_memory_store
  embedding_model: embedding_model
  index_name: memory_index
  es_url: http://localhost:9200
  retrieve_mode: dense
"""


@pytest.fixture
def walkthrough() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(WALKTHROUGH))


def problems_of(raw: dict[str, Any], environ: dict[str, str] | None = None) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        load_config(raw, environ=environ or {})
    return dict(caught.value.problems)


# -- the walkthrough ----------------------------------------------------------------------------


def test_walkthrough_loads_with_its_models_mapped(walkthrough: dict[str, Any]) -> None:
    config = load_config(walkthrough, environ={})
    generation, embedding, rank = (config.models[name] for name in ("generation_model", "embedding_model", "rank_model"))
    assert generation.cls.backend == "openai_like"
    assert generation.params.model_name == "Qwen/Qwen2.5-7B-Instruct"  # type: ignore[attr-defined]
    assert embedding.params.api_base == "https://api.siliconflow.cn/v1"  # type: ignore[attr-defined]
    assert rank.params.api_base == "https://api.siliconflow.cn/v1"  # type: ignore[attr-defined]
    assert generation.params.api_key.get_secret_value() == SECRET  # type: ignore[attr-defined]


def test_inline_key_warns_at_its_path_and_never_shows(walkthrough: dict[str, Any]) -> None:
    config = load_config(walkthrough, environ={})
    assert [warning.split(":")[0] for warning in config.warnings] == [
        "model.generation_model.api_key",
        "model.embedding_model.api_key",
        "model.rank_model.api_key",
    ]
    assert all("api_key_env: NAME" in warning for warning in config.warnings)
    assert SECRET not in repr(config) + str(config) + "".join(config.warnings) + "".join(config.notices)


def test_check_config_prints_warnings_but_never_the_key(
    walkthrough: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "walkthrough.yaml"
    path.write_text(yaml.safe_dump(walkthrough, allow_unicode=True), encoding="utf-8")
    assert main(["check-config", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"ok   {path}")
    assert "     warning: model.embedding_model.api_key: " in out
    assert SECRET not in out + err


def test_failing_config_never_shows_the_key(
    walkthrough: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Errors in an entry that holds a key (a bad value, a bad key, an entry-level error) quote no key."""
    walkthrough["model"]["embedding_model"]["api_base"] = "https://other.example/v1"  # differs from base_url
    walkthrough["model"]["rank_model"]["top_n"] = -1
    walkthrough["model"]["generation_model"]["api_key"] = 12345  # not a string: the value must not be quoted either
    with pytest.raises(ConfigError) as caught:
        load_config(walkthrough, environ={})
    error = caught.value
    assert {where for where, _ in error.problems} == {
        "model.embedding_model",
        "model.rank_model.top_n",
        "model.generation_model.api_key",
    }
    assert SECRET not in str(error) + repr(error) + repr(error.problems)
    assert "12345" not in str(error)

    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(walkthrough), encoding="utf-8")
    assert main(["check-config", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "FAIL" in err and SECRET not in out + err


def test_api_base_and_base_url_that_differ_are_one_problem_naming_both(walkthrough: dict[str, Any]) -> None:
    walkthrough["model"]["embedding_model"]["api_base"] = "https://other.example/v1"
    found = problems_of(walkthrough)
    assert list(found) == ["model.embedding_model"]  # and no "no model 'embedding_model'" for the store
    assert "api_base ('https://other.example/v1') and base_url" in found["model.embedding_model"]


def test_a_broken_model_is_reported_once_not_at_every_reference(walkthrough: dict[str, Any]) -> None:
    walkthrough["model"]["rank_model"]["top_nn"] = 5
    walkthrough["model"]["embedding_model"]["batch_size"] = 0
    found = problems_of(walkthrough)
    assert set(found) == {"model.rank_model.top_nn", "model.embedding_model.batch_size"}
    assert "Did you mean 'top_n'?" in found["model.rank_model.top_nn"]


def test_a_missing_model_is_still_reported(walkthrough: dict[str, Any]) -> None:
    walkthrough["worker"]["semantic_rank"]["rank_model"] = "rank_modle"
    found = problems_of(walkthrough)
    assert "no model 'rank_modle'" in found["worker.semantic_rank.rank_model"]


# -- model entries ------------------------------------------------------------------------------


def test_model_wins_over_a_different_model_name_with_a_notice(walkthrough: dict[str, Any]) -> None:
    walkthrough["model"]["generation_model"]["model"] = "Qwen/Qwen2.5-72B-Instruct"
    config = load_config(walkthrough, environ={})
    assert config.models["generation_model"].params.model_name == "Qwen/Qwen2.5-72B-Instruct"  # type: ignore[attr-defined]
    (notice,) = [n for n in config.notices if n.startswith("model.generation_model")]
    assert "'Qwen/Qwen2.5-72B-Instruct' is used" in notice


def test_model_alone_is_the_model_name(walkthrough: dict[str, Any]) -> None:
    del walkthrough["model"]["generation_model"]["model_name"]
    config = load_config(walkthrough, environ={})
    assert config.models["generation_model"].params.model_name == "Qwen/Qwen2.5-7B-Instruct"  # type: ignore[attr-defined]
    assert not [n for n in config.notices if n.startswith("model.generation_model")]


@pytest.mark.parametrize("module_name", ["like_generation", "openai_like_generation", "openai_like"])
def test_openai_like_names_in_our_own_config(raw_config: dict[str, Any], module_name: str) -> None:
    """0.1.x backend names are read in every config, not only in those with `core.*` classes."""
    raw_config["model"]["generation_model"] = {
        "class": "llama_index_generation_model",
        "module_name": module_name,
        "model_name": "m",
        "api_base": "http://127.0.0.1:9/v1",
    }
    assert load_config(raw_config, environ={}).models["generation_model"].cls.backend == "openai_like"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, "https://api.openai.com/v1"),
        ({"OPENAI_API_BASE": "http://proxy-a/v1"}, "http://proxy-a/v1"),
        ({"OPENAI_BASE_URL": "http://proxy-b/v1", "OPENAI_API_BASE": "http://proxy-a/v1"}, "http://proxy-b/v1"),
    ],
)
def test_openai_backends_read_the_endpoint_from_environ(
    raw_config: dict[str, Any], environ: dict[str, str], expected: str
) -> None:
    raw_config["model"]["generation_model"] = {
        "class": "llama_index_generation_model",
        "module_name": "openai_generation",
        "model_name": "gpt-4o",
    }
    raw_config["model"]["openai_embedding"] = {
        "class": "llama_index_embedding_model",
        "module_name": "openai_embedding",
        "model_name": "text-embedding-3-small",
    }
    config = load_config(raw_config, environ=environ)
    for name in ("generation_model", "openai_embedding"):
        params = config.models[name].params
        assert (params.api_base, params.api_key_env) == (expected, "OPENAI_API_KEY")  # type: ignore[attr-defined]


def test_an_explicit_api_base_beats_the_environment(raw_config: dict[str, Any]) -> None:
    raw_config["model"]["generation_model"] = {
        "class": "llama_index_generation_model",
        "module_name": "openai_generation",
        "base_url": "http://mine/v1",
    }
    config = load_config(raw_config, environ={"OPENAI_BASE_URL": "http://proxy-b/v1"})
    assert config.models["generation_model"].params.api_base == "http://mine/v1"  # type: ignore[attr-defined]


def test_llama_index_constructor_keys_map_to_ours(raw_config: dict[str, Any]) -> None:
    raw_config["model"]["generation_model"] = {
        "class": "core.models.llama_index_generation_model",
        "module_name": "dashscope_generation",
        "model_name": "qwen-max",
        "top_p": 0.8,
        "seed": 7,
        "stop": ["\n\n"],
        "repetition_penalty": 1.1,
        "additional_kwargs": {"top_k": 20, "seed": 1},
        "extra_body": {"top_p": 0.5},
        "retry_interval": 2.0,
        "timeout": 30,
        "max_retries": 5,
    }
    raw_config["model"]["embedding_model"] = {
        "class": "core.models.llama_index_embedding_model",
        "module_name": "dashscope_embedding",
        "model_name": "text-embedding-v2",
        "embed_batch_size": 10,
        "dimensions": 1536,
    }
    config = load_config(raw_config, environ={})
    generation = config.models["generation_model"].params
    assert generation.extra_body == {  # type: ignore[attr-defined]
        "top_k": 20,
        "seed": 7,  # a top-level key beats additional_kwargs
        "top_p": 0.5,  # extra_body itself beats both
        "stop": ["\n\n"],
        "repetition_penalty": 1.1,
    }
    assert (generation.retry_backoff_s, generation.timeout, generation.max_retries) == (2.0, 30.0, 5)  # type: ignore[attr-defined]
    embedding = config.models["embedding_model"].params
    assert (embedding.batch_size, embedding.dimensions, embedding.send_dimensions) == (10, 1536, False)  # type: ignore[attr-defined]


def test_unused_model_keys_are_named_in_one_notice(raw_config: dict[str, Any]) -> None:
    raw_config["model"]["rank_model"] = {
        "class": "core.models.llama_index_rank_model",
        "module_name": "dashscope_rank",
        "model_name": "gte-rerank",
        "kwargs_filter": True,
        "raise_exception": False,
        "return_documents": False,
    }
    config = load_config(raw_config, environ={})
    (notice,) = [n for n in config.notices if n.startswith("model.rank_model")]
    assert "accepted and ignored: kwargs_filter (" in notice
    assert "raise_exception (" in notice and "return_documents (" in notice


def test_a_misspelt_model_key_still_fails(raw_config: dict[str, Any]) -> None:
    raw_config["model"]["generation_model"] = {
        "class": "llama_index_generation_model",
        "module_name": "openai_like",
        "model_name": "m",
        "api_base": "http://127.0.0.1:9/v1",
        "top_pp": 0.9,
        "temprature": 0.2,
    }
    found = problems_of(raw_config)
    assert set(found) == {"model.generation_model.top_pp", "model.generation_model.temprature"}
    assert "Did you mean 'temperature'?" in found["model.generation_model.temprature"]


# -- workers, store -----------------------------------------------------------------------------


def test_worker_keys_no_class_used_are_named_in_one_notice_per_entry(walkthrough: dict[str, Any]) -> None:
    worker = walkthrough["worker"]
    worker["update_insight"] = {
        "class": "core.worker.backend.update_insight_worker",
        "generation_model": "generation_model",
        "rank_model": "rank_model",
        "embedding_model": "embedding_model",
        "update_insight_threshold": 0.01,
        "enable_parallel": False,
        "raise_exception": True,
    }
    worker["info_filter"] = {
        "class": "core.worker.backend.info_filter_worker",
        "generation_model": "generation_model",
        "rank_model": "rank_model",
        "prompt_file": "my_prompts",
    }
    worker["load_today_memory"] = {
        "class": "core.worker.backend.load_memory_worker",
        "retrieve_today_top_k": 100,
        "generation_model_kwargs": {"temperature": 0.1},
    }
    worker["contra_repeat"] = {
        "class": "core.worker.backend.contra_repeat_worker",
        "generation_model": "generation_model",
        "retrieve_top_k": 30,
        "contra_repeat_max_count": 40,
    }
    config = load_config(walkthrough, environ={})
    notices = {n.split(":")[0]: n for n in config.notices if n.startswith("worker.")}
    assert set(notices) == {"worker.update_insight", "worker.info_filter", "worker.load_today_memory", "worker.contra_repeat"}
    assert "enable_parallel (" in notices["worker.update_insight"] and "raise_exception (" in notices["worker.update_insight"]
    assert "rank_model (this worker uses no rank model)" in notices["worker.info_filter"]
    assert "prompt_file (" in notices["worker.info_filter"]
    assert "generation_model_kwargs (this worker calls no LLM)" in notices["worker.load_today_memory"]
    assert "retrieve_top_k (" in notices["worker.contra_repeat"]
    assert config.workers["contra_repeat"].params.contra_repeat_max_count == 40  # type: ignore[attr-defined]
    assert config.workers["update_insight"].params.rank_model == "rank_model"  # type: ignore[attr-defined]  # used: kept


def test_a_misspelt_worker_key_still_fails(walkthrough: dict[str, Any]) -> None:
    walkthrough["worker"]["retrieve_obs_ins"]["retrieve_obs_topk"] = 10
    walkthrough["worker"]["fuse_rerank"]["enable_paralel"] = False
    found = problems_of(walkthrough)
    assert set(found) == {"worker.retrieve_obs_ins.retrieve_obs_topk", "worker.fuse_rerank.enable_paralel"}
    assert "Did you mean 'retrieve_obs_top_k'?" in found["worker.retrieve_obs_ins.retrieve_obs_topk"]


def test_worker_keys_are_strict_in_our_own_configs(raw_config: dict[str, Any]) -> None:
    """Only 0.1.x configs get the 0.1.x allowance; our own vocabulary stays strict."""
    raw_config["worker"]["fuse_rerank"]["enable_parallel"] = False
    assert set(problems_of(raw_config)) == {"worker.fuse_rerank.enable_parallel"}


def test_contrib_example_query_worker_is_rewrite_query(walkthrough: dict[str, Any]) -> None:
    walkthrough["worker"]["rewrite_query"] = {
        "class": "contrib.example_query_worker",
        "generation_model": "generation_model",
        "rewrite_history_count": 3,
        "raise_exception": True,
    }
    config = load_config(walkthrough, environ={})
    spec = config.workers["rewrite_query"]
    assert spec.cls.__name__ == "RewriteQueryWorker"
    assert spec.params.rewrite_history_count == 3  # type: ignore[attr-defined]


def test_other_contrib_workers_must_be_ported(raw_config: dict[str, Any]) -> None:
    """A `contrib.*` class alone makes a config 0.1.x: one problem, naming what to do."""
    raw_config["worker"]["summary"] = {"class": "contrib.my_summary_worker", "generation_model": "generation_model"}
    found = problems_of(raw_config)
    assert list(found) == ["worker.summary.class"]
    assert "port it to the Worker contract" in found["worker.summary.class"]


def test_elasticsearch_store_keys(walkthrough: dict[str, Any]) -> None:
    walkthrough["memory_store"].update(
        {"hybrid_alpha": 0.5, "es_user": "elastic", "es_password": SECRET, "text_field": "content", "batch_size": 100}
    )
    config = load_config(walkthrough, environ={})
    assert config.store is not None and config.store.params.hosts == ["http://localhost:9200"]  # type: ignore[attr-defined]
    (notice,) = [n for n in config.notices if n.startswith("memory_store")]
    for key in ("hybrid_alpha", "es_user", "es_password", "text_field", "batch_size"):
        assert f"{key} (" in notice
    assert any(w.startswith("memory_store.es_password:") and "password_env: NAME" in w for w in config.warnings)
    assert SECRET not in repr(config) + "".join(config.notices) + "".join(config.warnings)


@pytest.mark.parametrize(("enable_ranker", "required"), [(False, False), (True, True)])
def test_rank_model_is_optional_with_the_ranker_off(walkthrough: dict[str, Any], enable_ranker: bool, required: bool) -> None:
    """0.1.x built models on first use: with the ranker off, a rank model without its key never failed."""
    walkthrough["global"]["enable_ranker"] = enable_ranker
    config = load_config(walkthrough, environ={})
    assert config.models["rank_model"].required is required
    assert config.models["generation_model"].required is True
