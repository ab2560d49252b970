"""Holes in the config checks: model references, number bounds, YAML aliases and duplicate keys,
follow-on problems of one structural mistake, and values echoed whole."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from memoryscope.config import load_config
from memoryscope.config.source import read_config_source
from memoryscope.errors import ConfigError
from memoryscope.worker import WORKERS

GENERATION = {
    "class": "llama_index_generation_model",
    "module_name": "openai_like",
    "model_name": "qwen",
    "api_base": "http://127.0.0.1:9/v1",
}
OPERATIONS = ("memory_service", "memoryscope_service", "memory_operations")


def problems_of(raw: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as caught:
        load_config(raw, environ={})
    return caught.value.problems


def message_of(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(raw, environ={})
    return str(caught.value)


def only_problem(raw: dict[str, Any]) -> tuple[str, str]:
    found = problems_of(raw)
    assert len(found) == 1, found
    return found[0]


def add_worker(raw: dict[str, Any], name: str, entry: dict[str, Any]) -> None:
    """Add a worker and an operation that uses it (so the workflow check sees it too)."""
    raw["worker"][name] = entry
    raw["memory_service"]["memoryscope_service"]["memory_operations"][f"run_{name}"] = {"workflow": f"set_query,{name}"}


# -- model references -----------------------------------------------------------------------------


def test_misspelt_generation_model_of_a_worker_suggests_the_declared_key(raw_config: dict[str, Any]) -> None:
    raw_config["model"]["generation_model"] = dict(GENERATION)
    add_worker(raw_config, "extract_time", {"class": "extract_time", "generation_model": "generation_modle"})
    where, message = only_problem(raw_config)
    assert where == "worker.extract_time.generation_model"
    assert "Did you mean 'generation_model'?" in message


def test_misspelt_generation_model_of_a_chat_suggests_the_declared_key(raw_config: dict[str, Any]) -> None:
    raw_config["model"]["generation_model"] = dict(GENERATION)
    raw_config["memory_chat"]["api_memory_chat"]["generation_model"] = "generation_modle"
    where, message = only_problem(raw_config)
    assert where == "memory_chat.api_memory_chat.generation_model"
    assert "Did you mean 'generation_model'?" in message


def test_generation_model_written_without_any_llm_declared_is_an_error(raw_config: dict[str, Any]) -> None:
    add_worker(raw_config, "extract_time", {"class": "extract_time", "generation_model": "generation_model"})
    where, message = only_problem(raw_config)
    assert where == "worker.extract_time.generation_model"
    assert "required: false" in message  # how to run without an LLM


def test_default_generation_model_without_any_llm_declared_is_fine(raw_config: dict[str, Any]) -> None:
    """No LLM configured: LLM steps are skipped, so their default model key is not checked."""
    add_worker(raw_config, "extract_time", {"class": "extract_time"})
    assert "extract_time" in load_config(raw_config, environ={}).workers


def test_a_model_that_may_be_left_out_is_a_valid_reference(raw_config: dict[str, Any]) -> None:
    raw_config["model"]["generation_model"] = {**GENERATION, "required": False}
    add_worker(raw_config, "extract_time", {"class": "extract_time", "generation_model": "generation_model"})
    raw_config["memory_chat"]["api_memory_chat"]["generation_model"] = "generation_model"
    assert load_config(raw_config, environ={}).models["generation_model"].required is False


def test_chat_generation_model_of_the_wrong_role_is_an_error(raw_config: dict[str, Any]) -> None:
    raw_config["memory_chat"]["api_memory_chat"]["generation_model"] = "embedding_model"
    where, message = only_problem(raw_config)
    assert where == "memory_chat.api_memory_chat.generation_model"
    assert "not a generation model" in message


def test_reference_to_a_broken_model_is_not_reported_again(raw_config: dict[str, Any]) -> None:
    raw_config["model"]["generation_model"] = {**GENERATION, "max_tokens": "many"}
    add_worker(raw_config, "extract_time", {"class": "extract_time", "generation_model": "generation_model"})
    raw_config["memory_chat"]["api_memory_chat"]["generation_model"] = "generation_model"
    assert only_problem(raw_config)[0] == "model.generation_model.max_tokens"


# -- numbers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [10**23, 1.0e23, 2**63])
def test_huge_top_k_is_refused_at_check_time(raw_config: dict[str, Any], value: Any) -> None:
    raw_config["worker"]["retrieve_obs_ins"]["retrieve_obs_top_k"] = value
    where, message = only_problem(raw_config)
    assert where == "worker.retrieve_obs_ins.retrieve_obs_top_k"
    assert "at most" in message or "too large a number" in message


def test_huge_top_k_from_yaml_is_refused(tmp_path: Path, raw_config: dict[str, Any]) -> None:
    raw_config["worker"]["retrieve_obs_ins"]["retrieve_obs_top_k"] = 10**23
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw_config), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"worker\.retrieve_obs_ins\.retrieve_obs_top_k: must be at most"):
        load_config(path, environ={})


def test_int_given_a_fraction_is_refused(raw_config: dict[str, Any]) -> None:
    raw_config["worker"]["retrieve_obs_ins"]["retrieve_obs_top_k"] = 2.5
    assert only_problem(raw_config)[0] == "worker.retrieve_obs_ins.retrieve_obs_top_k"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1e300])
def test_threshold_must_be_a_finite_bounded_number(raw_config: dict[str, Any], value: float) -> None:
    raw_config["worker"]["fuse_rerank"]["fuse_score_threshold"] = value
    assert only_problem(raw_config)[0] == "worker.fuse_rerank.fuse_score_threshold"


def test_numbers_inside_a_mapping_must_be_finite(raw_config: dict[str, Any]) -> None:
    raw_config["worker"]["fuse_rerank"]["fuse_ratio_dict"] = {"observation": float("inf")}
    assert only_problem(raw_config)[0].startswith("worker.fuse_rerank.fuse_ratio_dict")


@pytest.mark.parametrize(
    ("section", "path", "value"),
    [
        ("global", ("global", "output_memory_max_count"), 10**12),
        ("global", ("global", "thread_pool_max_workers"), 10**12),
        ("model", ("model", "rank_model", "recency_half_life_days"), 1e300),
        ("memory_store", ("memory_store", "busy_timeout_s"), 1e12),
        ("memory_store", ("memory_store", "change_log_retain"), 10**19),
        ("memory_service", (*OPERATIONS[:2], "scheduler_check_interval_s"), 1e300),
        ("memory_service", (*OPERATIONS[:2], "history_msg_count"), 10**19),
        ("memory_chat", ("memory_chat", "api_memory_chat", "history_message_count"), 10**19),
    ],
)
def test_every_section_bounds_its_numbers(
    raw_config: dict[str, Any], section: str, path: tuple[str, ...], value: Any
) -> None:
    node = raw_config
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    assert only_problem(raw_config)[0] == ".".join(path)


def test_operation_trigger_and_interval_are_bounded(raw_config: dict[str, Any]) -> None:
    operations = raw_config["memory_service"]["memoryscope_service"]["memory_operations"]
    operations["consolidate_memory"] = {"workflow": "read_message", "trigger_messages": 10**19, "interval_time": 1e300}
    found = {where for where, _ in problems_of(raw_config)}
    prefix = "memory_service.memoryscope_service.memory_operations.consolidate_memory"
    assert found == {f"{prefix}.trigger_messages", f"{prefix}.interval_time"}


def test_worker_params_built_directly_are_bounded() -> None:
    cls = WORKERS.get("retrieve_memory", "worker.x")
    with pytest.raises(ValueError, match="at most"):
        cls.Params(retrieve_obs_top_k=10**23)


def test_shipped_sizes_stay_within_bounds(raw_config: dict[str, Any]) -> None:
    raw_config["worker"]["retrieve_obs_ins"].update(retrieve_obs_top_k=10_000, retrieve_expired_top_k=10_000)
    assert load_config(raw_config, environ={}).workers["retrieve_obs_ins"].params.retrieve_obs_top_k == 10_000


# -- YAML -------------------------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_alias_bomb_fails_fast_with_one_short_line(tmp_path: Path) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for index in range(1, 9):
        previous, name = chr(ord("a") + index - 1), chr(ord("a") + index)
        lines.append(f"{name}: &{name} [{','.join(['*' + previous] * 9)}]")
    lines.append("global: {timezone: *i}")
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        read_config_source(write(tmp_path, "\n".join(lines) + "\n"), environ={})
    assert time.monotonic() - started < 1
    text = str(caught.value)
    assert "\n" not in text and len(text) < 300
    assert "line 1" in text and "anchor" in text


def test_anchor_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "global:\n  timezone: UTC\nmodel:\n  m: &m {model_name: x}\n  n: *m\n")
    with pytest.raises(ConfigError, match="line 4, column 6: anchors and aliases"):
        read_config_source(path, environ={})


def test_duplicate_key_is_refused_with_both_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "global:\n  language: en\n  timezone: UTC\n  language: zh\n")
    with pytest.raises(ConfigError) as caught:
        read_config_source(path, environ={})
    text = str(caught.value)
    assert "duplicate key 'language'" in text
    assert "line 4" in text and "line 2" in text


def test_duplicate_section_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "worker:\n  a: {class: set_query}\nworker:\n  b: {class: set_query}\n")
    with pytest.raises(ConfigError, match="duplicate key 'worker'"):
        read_config_source(path, environ={})


def test_environment_override_with_an_alias_stays_text(tmp_path: Path) -> None:
    path = write(tmp_path, "global:\n  language: en\n")
    data, _ = read_config_source(path, environ={"MEMORYSCOPE__GLOBAL__TIMEZONE": "*zone"})
    assert data["global"]["timezone"] == "*zone"


# -- one root cause, one line ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "value"),
    [("worker", ["a", "b"]), ("model", 5), ("memory_service", "x"), ("memory_store", 5), ("memory_chat", [1])],
)
def test_a_section_of_the_wrong_type_is_one_line(raw_config: dict[str, Any], section: str, value: Any) -> None:
    raw_config[section] = value
    where, message = only_problem(raw_config)
    assert where == section
    assert "must be a mapping" in message


@pytest.mark.parametrize("path", [("worker", "semantic_rank"), ("model", "rank_model"), ("memory_chat", "api_memory_chat")])
def test_an_entry_of_the_wrong_type_is_one_line(raw_config: dict[str, Any], path: tuple[str, str]) -> None:
    raw_config[path[0]][path[1]] = 5
    assert only_problem(raw_config) == (".".join(path), "must be a mapping, got int")


def test_chat_naming_a_broken_service_is_not_reported_again(raw_config: dict[str, Any]) -> None:
    raw_config["memory_service"]["memoryscope_service"]["class"] = "memory_servise"
    assert only_problem(raw_config)[0] == "memory_service.memoryscope_service.class"


def test_service_entry_of_the_wrong_type_is_one_line(raw_config: dict[str, Any]) -> None:
    raw_config["memory_service"]["memoryscope_service"] = 5
    assert only_problem(raw_config) == ("memory_service.memoryscope_service", "must be a mapping, got int")


# -- values echoed shortened -------------------------------------------------------------------------


def test_a_long_wrong_value_is_echoed_shortened(raw_config: dict[str, Any]) -> None:
    raw_config["global"]["output_memory_max_count"] = "a" * 18432
    where, message = only_problem(raw_config)
    assert where == "global.output_memory_max_count"
    assert len(message) < 300
    assert "(18432 characters)" in message


@pytest.mark.parametrize(
    "path",
    [
        ("global", "timezone"),
        ("worker", "set_query", "class"),
        ("memory_store", "embedding_model"),
        ("model", "rank_model", "module_name"),
    ],
)
def test_long_names_are_echoed_shortened(raw_config: dict[str, Any], path: tuple[str, ...]) -> None:
    node = raw_config
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = "x" * 18432
    message = message_of(raw_config)
    assert len(message) < 1000, message[:400]


def test_a_long_unknown_key_is_echoed_shortened(raw_config: dict[str, Any]) -> None:
    raw_config["worker"]["set_query"]["k" * 18432] = 1
    message = message_of(raw_config)
    assert len(message) < 1000, message[:400]
