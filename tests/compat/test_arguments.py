"""`Arguments` set over a raw config as MemoryScope 0.1.x's config manager did."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from memoryscope.compat.arguments import Arguments, apply_arguments, arguments_from_fields, base_config_name
from memoryscope.config import load_config
from memoryscope.config.source import read_config_source
from memoryscope.errors import ConfigError

ENV: dict[str, str] = {}


def default_raw() -> dict[str, Any]:
    raw, _ = read_config_source("default", environ={})
    return raw


def test_an_arguments_object_sets_every_field() -> None:
    raw = default_raw()
    apply_arguments(raw, Arguments(), own_store_path=True, environ=ENV)
    assert raw["global"]["language"] == "cn" and raw["global"]["enable_ranker"] is False
    assert raw["global"]["thread_pool_max_workers"] == 5
    generation = raw["model"]["generation_model"]
    # another backend: the old entry's endpoint and key are gone, the portable options stay
    assert generation == {
        "class": "llama_index_generation_model",
        "module_name": "dashscope_generation",
        "model_name": "qwen-max",
        "max_tokens": 2000,
        "temperature": 0.01,
    }
    assert raw["model"]["embedding_model"]["module_name"] == "dashscope_embedding"
    assert raw["model"]["rank_model"]["required"] is False  # ranker off: a missing key must not stop start-up
    chat = raw["memory_chat"]["api_memory_chat"]
    assert chat["class"] == "cli_memory_chat" and chat["stream"] is True
    service = raw["memory_service"]["memoryscope_service"]
    assert service["human_name"] == "user" and service["assistant_name"] == "AI"
    assert service["memory_operations"]["consolidate_memory"]["interval_time"] == 1
    assert service["memory_operations"]["reflect_and_reconsolidate"]["interval_time"] == 15
    assert raw["memory_store"]["class"] == "sqlite_memory_store"
    assert raw["memory_store"]["path"] == "~/.memoryscope/memory_index.text-embedding-v2.db"  # one file per embedding model


def test_single_fields_set_only_themselves() -> None:
    raw = default_raw()
    before = copy.deepcopy(raw)
    settings, given = arguments_from_fields({"language": "en", "human_name": "Ann"}, environ={})
    apply_arguments(raw, settings, given, environ=ENV)
    assert raw["global"]["language"] == "en"
    assert raw["memory_service"]["memoryscope_service"]["human_name"] == "Ann"
    assert raw["model"] == before["model"] and raw["memory_store"] == before["memory_store"]
    assert raw["memory_chat"] == before["memory_chat"]


def test_environment_variables_named_like_fields_win_as_in_0_1() -> None:
    settings, given = arguments_from_fields({"language": "cn"}, environ={"language": "en", "output_memory_max_count": "7"})
    assert settings.language == "en" and settings.output_memory_max_count == 7
    assert given == {"language", "output_memory_max_count"}


def test_worker_params_and_model_params() -> None:
    raw = default_raw()
    settings, given = arguments_from_fields(
        {
            "worker_params": {"get_reflection_subject": {"reflect_num_questions": 3}, "no_such_worker": {"x": 1}},
            "generation_backend": "openai_like",
            "generation_model": "Qwen/Qwen2.5-7B-Instruct",
            "generation_params": {"api_base": "http://127.0.0.1:9/v1", "temperature": 0.5},
        },
        environ={},
    )
    apply_arguments(raw, settings, given, environ=ENV)
    assert raw["worker"]["get_reflection_subject"]["reflect_num_questions"] == 3
    assert "no_such_worker" not in raw["worker"]  # 0.1.x skipped workers the config does not have
    generation = raw["model"]["generation_model"]
    # the same backend: the entry is kept and updated
    assert generation["api_key_env"] == "MEMORYSCOPE_LLM_API_KEY"
    assert generation["api_base"] == "http://127.0.0.1:9/v1" and generation["temperature"] == 0.5
    assert generation["model_name"] == "Qwen/Qwen2.5-7B-Instruct"


def test_elasticsearch_url_switches_the_store() -> None:
    raw = default_raw()
    settings, given = arguments_from_fields({"es_url": "http://es:9200", "es_index_name": "mem", "retrieve_mode": "dense"}, {})
    apply_arguments(raw, settings, given, environ=ENV)
    assert raw["memory_store"] == {
        "class": "elasticsearch_memory_store",
        "embedding_model": "embedding_model",
        "hosts": ["http://es:9200"],
        "index_name": "mem",
        "retrieve_mode": "dense",
    }


def test_a_0_1_elasticsearch_store_keeps_its_vocabulary() -> None:
    raw = {"memory_store": {"class": "core.storage.llama_index_es_memory_store", "es_url": "http://old:9200", "index_name": "a"}}
    apply_arguments(raw, Arguments(es_url="http://new:9200"), environ=ENV)
    assert raw["memory_store"]["es_url"] == "http://new:9200" and raw["memory_store"]["index_name"] == "memory_index"


def test_store_path_choice() -> None:
    raw = default_raw()
    apply_arguments(raw, Arguments(store_path="/tmp/x.db"), environ=ENV)
    assert raw["memory_store"]["path"] == "/tmp/x.db"
    raw = default_raw()
    apply_arguments(raw, Arguments(), own_store_path=True, environ={"MEMORYSCOPE_STORE_PATH": "/data/m.db"})
    assert raw["memory_store"]["path"] == "/data/m.db"
    raw = default_raw()
    before = raw["memory_store"]["path"]
    apply_arguments(raw, Arguments(), own_store_path=False, environ=ENV)  # the user's own config keeps its file
    assert raw["memory_store"]["path"] == before


def test_chat_class_keeps_a_0_1_prefix_and_chat_stream_wins() -> None:
    raw: dict[str, Any] = {"memory_chat": {"c": {"class": "core.chat.cli_memory_chat"}}, "memory_service": {"s": {}}}
    apply_arguments(raw, Arguments(memory_chat_class="api_memory_chat", chat_stream=True), environ=ENV)
    assert raw["memory_chat"]["c"] == {"class": "core.chat.api_memory_chat", "stream": True}


def test_base_config_follows_the_language() -> None:
    assert base_config_name(Arguments(language="en")) == "default"
    assert base_config_name(Arguments()) == "default_zh"


def test_bad_values_are_named() -> None:
    with pytest.raises(ConfigError) as error:
        arguments_from_fields({"language": "fr", "thread_pool_max_workers": "many"}, environ={})
    message = str(error.value)
    assert "arguments.language" in message and "arguments.thread_pool_max_workers" in message
    with pytest.raises(ConfigError, match=r"arguments\.langauge: unknown argument\. Did you mean 'language'"):
        arguments_from_fields({"langauge": "en"}, environ={})


def test_a_backend_named_alone_gets_the_model_0_1_used_with_it() -> None:
    """`--embedding_backend=dashscope_embedding` without a model: DashScope's embedding model, not bge-m3."""
    settings, given = arguments_from_fields(
        {"embedding_backend": "dashscope_embedding", "generation_backend": "dashscope_generation"}, {}
    )
    config = load_config("default", environ={}, adjust=lambda raw: apply_arguments(raw, settings, given, environ=ENV))
    assert config.models["embedding_model"].params.model_name == "text-embedding-v2"  # type: ignore[attr-defined]
    assert config.models["generation_model"].params.model_name == "qwen-max"  # type: ignore[attr-defined]
