"""Every file in configs/ loads; the offline ones build and run with nothing but this package."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryscope.app import MemoryScope
from memoryscope.config import load_config, shipped_config_names

REMOTE = {"siliconflow", "siliconflow_zh", "openai", "dashscope", "elasticsearch"}
NEEDS_LLM = {"agent", "agent_zh"}  # a function-calling model is required (tests/agent builds them against the fake one)


@pytest.mark.parametrize("name", shipped_config_names())
def test_shipped_config_validates(name: str) -> None:
    config = load_config(name, environ={})
    assert {"retrieve_memory", "read_message", "list_memory", "add_memory", "delete_memory", "delete_all"} <= set(
        config.services["memoryscope_service"].operations
    )
    assert config.models["embedding_model"].role == "embedding"


@pytest.mark.parametrize("name", sorted(set(shipped_config_names()) - REMOTE - NEEDS_LLM))
def test_offline_config_builds_and_retrieves(name: str, tmp_path: Path) -> None:
    with MemoryScope(name, overrides={"memory_store.path": str(tmp_path / "m.db")}) as scope:
        scope.default_service.run_operation("add_memory", "ann", new_memories=("Ann collects vinyl records",))
        found = scope.default_service.run_operation("retrieve_memory", "ann", query="what does Ann collect?")
        assert found.context.memories[0].content == "Ann collects vinyl records"


@pytest.mark.parametrize("name", sorted(REMOTE))
def test_remote_configs_take_keys_only_from_environment_variables(name: str) -> None:
    config = load_config(name, environ={})
    for model in config.models.values():
        assert getattr(model.params, "api_key", None) is None  # a shipped config never holds a key itself
    assert config.models["generation_model"].params.api_key_env in {"SILICONFLOW_API_KEY", "OPENAI_API_KEY", "DASHSCOPE_API_KEY"}  # type: ignore[attr-defined]
