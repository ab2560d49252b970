"""MemoryScope 0.1.x configs load: `core.*` class paths and old backend names map to ours."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryscope.config import load_config
from memoryscope.errors import ConfigError

LEGACY_CONFIG = """
global:
  language: cn
  thread_pool_max_workers: 5
  logger_name: memoryscope
  logger_to_screen: false
  enable_ranker: true
  output_memory_max_count: 10

memory_chat:
  api_memory_chat:
    class: core.chat.api_memory_chat
    memory_service: memoryscope_service
    generation_model: generation_model
    stream: false

memory_service:
  memoryscope_service:
    class: core.service.memory_scope_service
    human_name: user
    assistant_name: AI
    memory_operations:
      retrieve_memory:
        class: core.operation.frontend_operation
        workflow: set_query,retrieve_obs_ins,semantic_rank,fuse_rerank
        description: "retrieve long-term memory"
      delete_all:
        class: core.operation.frontend_operation
        workflow: delete_all
        description: "delete all long-term memory"

worker:
  dummy:
    class: core.worker.dummy_worker
    generation_model: generation_model
  set_query:
    class: core.worker.frontend.set_query_worker
  retrieve_obs_ins:
    class: core.worker.frontend.retrieve_memory_worker
    retrieve_obs_top_k: 100
    retrieve_ins_top_k: 100
  semantic_rank:
    class: core.worker.frontend.semantic_rank_worker
    rank_model: rank_model
  fuse_rerank:
    class: core.worker.frontend.fuse_rerank_worker
    fuse_score_threshold: 0.1
    fuse_ratio_dict: {conversation: 0.5, observation: 1, obs_customized: 1.2, insight: 2.0}
    fuse_time_ratio: 2.0
  delete_all:
    class: core.worker.backend.update_memory_worker
    method: delete_all
  get_reflection_subject:
    class: core.worker.backend.get_reflection_subject_worker
    generation_model: generation_model
    reflect_obs_cnt_threshold: 10
    generation_model_kwargs: {temperature: 0.6}
    reflect_num_questions: 3

model:
  generation_model:
    class: core.models.llama_index_generation_model
    module_name: openai_generation
    model_name: gpt-4o-mini
    max_tokens: 2000
  embedding_model:
    class: core.models.llama_index_embedding_model
    module_name: dashscope_embedding
    model_name: text-embedding-v2
  rank_model:
    class: core.models.llama_index_rank_model
    module_name: dashscope_rank
    model_name: gte-rerank
    top_n: 500

memory_store:
  class: core.storage.llama_index_es_memory_store
  embedding_model: embedding_model
  index_name: memory_index
  es_url: http://localhost:9200
  retrieve_mode: dense

monitor:
  class: core.storage.dummy_monitor
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "legacy.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_legacy_config_loads_with_classes_mapped(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, LEGACY_CONFIG), environ={})
    assert config.settings.language == "zh"
    assert config.workers["set_query"].cls.__name__ == "SetQueryWorker"
    assert config.workers["delete_all"].params.method in {"delete_all"}  # type: ignore[attr-defined]
    assert config.models["generation_model"].cls.backend == "openai"
    assert config.models["embedding_model"].params.api_base == "https://dashscope.aliyuncs.com/compatible-mode/v1"  # type: ignore[attr-defined]
    assert config.models["rank_model"].params.api_key_env == "DASHSCOPE_API_KEY"  # type: ignore[attr-defined]
    assert config.store is not None and config.store.params.hosts == ["http://localhost:9200"]  # type: ignore[attr-defined]
    assert "memoryscope_service" in config.services
    assert config.chats["api_memory_chat"].cls.__name__ == "ApiMemoryChat"
    reflection = config.workers["get_reflection_subject"].params
    assert (reflection.max_subjects, reflection.generation_model_kwargs) == (3, {"temperature": 0.6})  # type: ignore[attr-defined]


def test_dropped_parts_are_named_in_notices(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, LEGACY_CONFIG), environ={})
    text = "\n".join(config.notices)
    assert "worker.dummy" in text
    assert "monitor" in text
    assert "global.logger_name" in text


def test_unsupported_legacy_classes_are_named_in_one_error(tmp_path: Path) -> None:
    text = LEGACY_CONFIG.replace("core.chat.api_memory_chat", "core.chat.web_memory_chat").replace(
        "core.storage.llama_index_es_memory_store", "core.storage.milvus_store"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text), environ={})
    found = dict(caught.value.problems)
    assert "'core.chat.web_memory_chat' is not supported" in found["memory_chat.api_memory_chat.class"]
    assert "'core.storage.milvus_store' is not supported" in found["memory_store.class"]
