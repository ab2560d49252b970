from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

BASE: dict[str, Any] = {
    "global": {"language": "en", "timezone": "Asia/Shanghai"},
    "model": {
        "embedding_model": {"class": "llama_index_embedding_model", "module_name": "local_embedding"},
        "rank_model": {"class": "llama_index_rank_model", "module_name": "fusion_rank", "model_name": "fusion"},
    },
    "memory_store": {"class": "sqlite_memory_store", "path": "PLACEHOLDER", "embedding_model": "embedding_model"},
    "worker": {
        "set_query": {"class": "set_query"},
        "retrieve_obs_ins": {"class": "retrieve_memory", "retrieve_obs_top_k": 50},
        "semantic_rank": {"class": "semantic_rank", "rank_model": "rank_model"},
        "fuse_rerank": {"class": "fuse_rerank"},
        "read_message": {"class": "read_message"},
    },
    "memory_service": {
        "memoryscope_service": {
            "memory_operations": {
                "retrieve_memory": {"workflow": "set_query,retrieve_obs_ins,semantic_rank,fuse_rerank"},
                "read_message": {"workflow": "read_message"},
            }
        }
    },
    "memory_chat": {"api_memory_chat": {"class": "api_memory_chat", "memory_service": "memoryscope_service"}},
}


@pytest.fixture
def raw_config(tmp_path: Path) -> dict[str, Any]:
    """A small valid config as the YAML would give it; tests break one thing at a time."""
    config = copy.deepcopy(BASE)
    config["memory_store"]["path"] = str(tmp_path / "memory.db")
    return config
