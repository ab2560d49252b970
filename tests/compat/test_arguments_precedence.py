"""`Arguments` sit where the YAML does: `MEMORYSCOPE__...` environment overrides win over them and
`overrides=` win over both, as the README's precedence says (overrides > environment > YAML and
Arguments > defaults). Models are reached over HTTP at the fake OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryscope import Arguments, MemoryScope
from memoryscope.testing.fake_openai import FakeOpenAIServer

ENV_MODEL = "MEMORYSCOPE__MODEL__EMBEDDING_MODEL__MODEL_NAME"
ENV_LLM = "MEMORYSCOPE__MODEL__GENERATION_MODEL__MODEL_NAME"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer, tmp_path: Path) -> Iterator[FakeOpenAIServer]:
    for name in ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_STORE_PATH", "OPENAI_API_BASE", "language"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # a default store path lands here, never in the real home
    monkeypatch.setenv("OPENAI_API_KEY", "sk-precedence-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    yield fake_openai


def english_arguments(tmp_path: Path, **changes: Any) -> Arguments:
    values: dict[str, Any] = {
        "language": "en",
        "memory_chat_class": "api_memory_chat",
        "generation_backend": "openai_generation",
        "generation_model": "gpt-4o",
        "embedding_backend": "openai_embedding",
        "embedding_model": "text-embedding-3-small",
        "store_path": str(tmp_path / "m.db"),
        "consolidate_memory_interval_time": None,
        "reflect_and_reconsolidate_interval_time": None,
    }
    values.update(changes)
    return Arguments(**values)


def embedding_models_asked(server: FakeOpenAIServer) -> set[str]:
    return {str(request.body.get("model")) for request in server.requests if request.path.endswith("/embeddings")}


def test_environment_overrides_win_over_arguments(
    server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_MODEL, "env-embedder")
    monkeypatch.setenv(ENV_LLM, "env-llm")
    with MemoryScope(arguments=english_arguments(tmp_path)) as ms:
        assert ms.config.models["generation_model"].params.model_name == "env-llm"
        ms.add("I keep bees", user_id="ann", infer=False)
    assert embedding_models_asked(server) == {"env-embedder"}  # the model really called


def test_overrides_win_over_the_environment_and_arguments(
    server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_MODEL, "env-embedder")
    overrides = {"model.embedding_model.model_name": "given-embedder", "model.generation_model.temperature": 0.3}
    with MemoryScope(arguments=english_arguments(tmp_path), overrides=overrides) as ms:
        generation = ms.config.models["generation_model"].params
        assert (generation.model_name, generation.temperature) == ("gpt-4o", 0.3)  # the rest of the Arguments hold
        ms.add("I keep bees", user_id="ann", infer=False)
    assert embedding_models_asked(server) == {"given-embedder"}


def test_single_argument_keywords_keep_the_same_precedence(
    server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_LLM, "env-llm")
    overrides = {"memory_store.path": str(tmp_path / "m.db"), "global.output_memory_max_count": 7}
    with MemoryScope(
        config_path="default",
        overrides=overrides,
        generation_backend="openai_generation",
        generation_model="gpt-4o",
        output_memory_max_count=3,
    ) as ms:
        assert ms.config.models["generation_model"].params.model_name == "env-llm"
        assert ms.config.settings.output_memory_max_count == 7


def test_an_environment_override_of_a_section_arguments_replace_still_applies(
    server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the Arguments switch the embedding backend (the base entry is replaced whole); the
    # environment's key is set over the new entry, not lost with the old one
    monkeypatch.setenv("MEMORYSCOPE__MODEL__EMBEDDING_MODEL__API_BASE", server.base_url)
    monkeypatch.delenv("OPENAI_BASE_URL")
    with MemoryScope(arguments=english_arguments(tmp_path)) as ms:
        assert ms.config.models["embedding_model"].params.api_base == server.base_url
        ms.add("I keep bees", user_id="ann", infer=False)
    assert embedding_models_asked(server) == {"text-embedding-3-small"}


def test_overrides_apply_to_a_config_given_as_a_dict(server: FakeOpenAIServer, tmp_path: Path) -> None:
    from memoryscope.config.source import read_config_source

    raw, _ = read_config_source("default", environ={})
    with MemoryScope(config=raw, overrides={"memory_store.path": str(tmp_path / "given.db")}) as ms:
        ms.add("I keep bees", user_id="ann", infer=False)
    assert (tmp_path / "given.db").exists() and not (tmp_path / "home").exists()
