"""`Memory.from_config`: mem0's llm, embedder and vector_store read onto MemoryScope's parts; what
does not map is an error or a one-line notice, each naming the key."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from memoryscope.errors import ConfigError
from memoryscope.mem0 import Memory
from memoryscope.mem0.config import plan_of
from memoryscope.testing.fake_openai import FakeOpenAIServer


def test_llm_and_embedder_at_an_openai_compatible_endpoint_with_keys_in_code(
    store_path: Path, tmp_path: Path, fake_openai: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    config = {
        "llm": {"provider": "openai", "config": {"model": "my-llm", "temperature": 0.2, "api_key": "sk-in-code-llm",
                                                  "openai_base_url": fake_openai.base_url}},
        "embedder": {"provider": "openai", "config": {"model": "my-embedder", "api_key": "sk-in-code-emb",
                                                       "openai_base_url": fake_openai.base_url}},
        "vector_store": {"provider": "qdrant", "config": {"path": str(tmp_path / "vectors"), "collection_name": "notes"}},
        "history_db_path": str(tmp_path / "history.db"),
    }  # fmt: skip
    with caplog.at_level(logging.INFO, logger="memoryscope"):
        memory = Memory.from_config(config)
    try:
        memory.add("I keep bees on the roof", user_id="alice", infer=False)
        memory.add("I keep bees on the roof", user_id="alice")  # the LLM answers chatter: nothing learnt
        hits = memory.search("bees", filters={"user_id": "alice"})["results"]
    finally:
        memory.close()
    assert hits and hits[0]["memory"] == "I keep bees on the roof"
    embedded = [r for r in fake_openai.requests if r.path.endswith("/embeddings")]
    chatted = [r for r in fake_openai.requests if r.path.endswith("/chat/completions")]
    assert (
        embedded and {r.body["model"] for r in embedded} == {"my-embedder"} and {r.api_key_suffix for r in embedded} == {"-emb"}
    )
    assert chatted and {r.body["model"] for r in chatted} == {"my-llm"} and {r.api_key_suffix for r in chatted} == {"-llm"}
    assert (tmp_path / "vectors" / "notes.db").exists() and not store_path.exists()
    said = caplog.text
    assert "an API key is written in the config" not in said  # mem0 takes keys in code: no warning about them
    assert "mem0 config 'history_db_path' is not used" in said
    assert "kept in MemoryScope's embedded SQLite store at" in said


def test_openai_api_key_in_the_environment_is_the_llm_as_mem0_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    environ = {"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    plan = plan_of(None, environ)
    assert plan.generation is not None and plan.embedding is None and plan.store is None  # local embeddings, default store
    assert (plan.generation["api_base"], plan.generation["api_key_env"], plan.generation["model_name"]) == (
        "http://127.0.0.1:9/v1", "OPENAI_API_KEY", "gpt-5-mini",
    )  # fmt: skip
    assert plan_of(None, {}).generation is None  # no key: no LLM, offline
    assert plan_of(None, {**environ, "MEMORYSCOPE_LLM_API_BASE": "http://127.0.0.1:8/v1"}).generation is None  # ours wins


def test_ollama_and_elasticsearch_map_onto_ours() -> None:
    plan = plan_of(
        {
            "llm": {"provider": "ollama", "config": {"model": "llama3.1", "ollama_base_url": "http://127.0.0.1:11434"}},
            "embedder": {"provider": "huggingface", "config": {"model": "BAAI/bge-small-en"}},
            "vector_store": {"provider": "elasticsearch", "config": {"host": "es.local", "port": 9201, "collection_name": "Mem"}},
        },
        {},
    )
    assert plan.generation is not None and plan.generation["api_base"] == "http://127.0.0.1:11434/v1"
    assert plan.generation["api_key_env"] is None
    assert plan.embedding is None  # a local Hugging Face model is not an endpoint: our local model instead, said once
    assert plan.notices == ["mem0 embedder 'huggingface' is not an OpenAI-compatible endpoint here; using the local "
                            "default embedding model (multilingual-e5-small)"]  # fmt: skip
    assert plan.store is not None
    assert (plan.store["class"], plan.store["hosts"], plan.store["index_name"]) == (
        "elasticsearch_memory_store", ["http://es.local:9201"], "mem",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"graph": {}}, "graph: not a mem0 config key MemoryScope knows"),
        (
            {"llm": {"provider": "anthropic", "config": {"model": "claude"}}},
            "llm.provider: 'anthropic' is not an OpenAI-compatible",
        ),
        ({"llm": {"provider": "groq", "config": {}}}, "llm.config.model: name the groq model"),
        (
            {"vector_store": {"provider": "qdrant", "config": {"host": "q", "port": 6333}}},
            "vector_store.provider: 'qdrant' without a 'path'",
        ),
        (
            {"vector_store": {"provider": "elasticsearch", "config": {"password": "p"}}},
            "vector_store.config.password: MemoryScope reads",
        ),
        ({"llm": "openai"}, "llm: must be a dict"),
    ],
)
def test_what_does_not_map_is_an_error_naming_the_key(config: dict, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace("(", "\\(").replace(")", "\\)")):
        plan_of(config, {})


def test_unused_llm_options_are_named_in_a_notice() -> None:
    plan = plan_of({"llm": {"provider": "openai", "config": {"model": "m", "top_p": 0.9, "enable_vision": True}}}, {})
    assert plan.notices == [
        "mem0 config llm.config.enable_vision is not used by MemoryScope",
        "mem0 config llm.config.top_p is not used by MemoryScope",
    ]
