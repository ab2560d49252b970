"""Validation: every problem at once, each with its YAML path and a hint."""

from __future__ import annotations

from typing import Any

import pytest

from memoryscope.config import load_config
from memoryscope.errors import ConfigError, UnknownNameError


def problems_of(raw: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        load_config(raw)
    found: dict[str, str] = {}
    for path, message in caught.value.problems:
        found[path] = f"{found[path]}\n{message}" if path in found else message
    return found


def test_valid_config_resolves_classes_and_parses_workflows(raw_config: dict[str, Any]) -> None:
    config = load_config(raw_config)
    assert config.settings.timezone == "Asia/Shanghai"
    assert config.models["rank_model"].role == "rank"
    assert config.workers["retrieve_obs_ins"].cls.__name__ == "RetrieveMemoryWorker"
    plan = config.services["memoryscope_service"].operations["retrieve_memory"].plan
    assert plan.canonical() == "set_query,retrieve_obs_ins,semantic_rank,fuse_rerank"


def test_misspelt_worker_class_suggests_the_registered_name(raw_config: dict[str, Any]) -> None:
    raw_config["worker"]["semantic_rank"]["class"] = "semantic_rnak"
    found = problems_of(raw_config)
    assert "Did you mean 'semantic_rank'?" in found["worker.semantic_rank.class"]


def test_unknown_worker_key_names_the_path_and_closest_key(raw_config: dict[str, Any]) -> None:
    raw_config["worker"]["retrieve_obs_ins"]["retrieve_obs_topk"] = 3
    found = problems_of(raw_config)
    assert "Did you mean 'retrieve_obs_top_k'?" in found["worker.retrieve_obs_ins.retrieve_obs_topk"]


def test_all_problems_are_reported_together(raw_config: dict[str, Any]) -> None:
    raw_config["global"]["timezone"] = "Mars/Olympus"
    raw_config["global"]["output_memory_max_count"] = "many"
    raw_config["model"]["rank_model"]["module_name"] = "bge_rnak"
    raw_config["memory_store"]["embedding_model"] = "embeding_model"
    raw_config["memory_service"]["memoryscope_service"]["memory_operations"]["retrieve_memory"]["workflow"] = "set_query,,x"
    raw_config["extra_section"] = {}
    found = problems_of(raw_config)
    assert "unknown time zone 'Mars/Olympus'" in found["global.timezone"]
    assert "global.output_memory_max_count" in found
    assert "Did you mean 'bge_rank'?" in found["model.rank_model.module_name"]
    assert "Did you mean 'embedding_model'?" in found["memory_store.embedding_model"]
    assert "column 11" in found["memory_service.memoryscope_service.memory_operations.retrieve_memory.workflow"]
    assert "unknown section" in found["extra_section"]


def test_message_lists_every_problem_with_its_path(raw_config: dict[str, Any]) -> None:
    raw_config["worker"]["fuse_rerank"]["class"] = "fuse_rerankk"
    raw_config["global"]["language"] = "fr"
    with pytest.raises(ConfigError) as caught:
        load_config(raw_config)
    text = str(caught.value)
    assert "2 problems in config" in text
    assert "worker.fuse_rerank.class: unknown worker 'fuse_rerankk'" in text
    assert "global.language" in text


def test_workflow_naming_an_unknown_worker_is_reported(raw_config: dict[str, Any]) -> None:
    operations = raw_config["memory_service"]["memoryscope_service"]["memory_operations"]
    operations["retrieve_memory"]["workflow"] = "set_query,retrieve_obs_inss,semantic_rank,fuse_rerank"
    found = problems_of(raw_config)
    message = found["memory_service.memoryscope_service.memory_operations.retrieve_memory.workflow"]
    assert "retrieve_obs_inss" in message
    assert "retrieve_obs_ins" in message


def test_workflow_reading_a_field_nobody_wrote_is_reported(raw_config: dict[str, Any]) -> None:
    operations = raw_config["memory_service"]["memoryscope_service"]["memory_operations"]
    operations["retrieve_memory"]["workflow"] = "set_query,fuse_rerank"
    found = problems_of(raw_config)
    assert "ranked" in found["memory_service.memoryscope_service.memory_operations.retrieve_memory.workflow"]


def test_model_of_the_wrong_role_is_reported(raw_config: dict[str, Any]) -> None:
    raw_config["worker"]["semantic_rank"]["rank_model"] = "embedding_model"
    found = problems_of(raw_config)
    assert "is a embedding model, not a rank model" in found["worker.semantic_rank.rank_model"]


def test_chat_pointing_at_a_missing_service(raw_config: dict[str, Any]) -> None:
    raw_config["memory_chat"]["api_memory_chat"]["memory_service"] = "memoryscope_servce"
    found = problems_of(raw_config)
    assert "Did you mean 'memoryscope_service'?" in found["memory_chat.api_memory_chat.memory_service"]


def test_dotted_class_path_loads_user_code(raw_config: dict[str, Any]) -> None:
    raw_config["worker"]["set_query"]["class"] = "memoryscope.workers.set_query.SetQueryWorker"
    assert load_config(raw_config).workers["set_query"].cls.__name__ == "SetQueryWorker"


def test_dotted_class_path_of_the_wrong_kind(raw_config: dict[str, Any]) -> None:
    raw_config["worker"]["set_query"]["class"] = "memoryscope.memory.MemoryNode"
    found = problems_of(raw_config)
    assert "is not a worker" in found["worker.set_query.class"]


def test_unknown_name_error_is_a_config_error() -> None:
    error = UnknownNameError("worker.x.class", "worker", "semantic_rnak", ["semantic_rank", "set_query"])
    assert isinstance(error, ConfigError)
    assert str(error) == (
        "worker.x.class: unknown worker 'semantic_rnak'. Did you mean 'semantic_rank'? Known: semantic_rank, set_query"
    )


def test_language_cn_is_read_as_zh(raw_config: dict[str, Any]) -> None:
    raw_config["global"]["language"] = "cn"
    assert load_config(raw_config).settings.language == "zh"
