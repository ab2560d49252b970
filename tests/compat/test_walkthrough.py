"""The SiliconFlow walkthrough's config and script, end to end: the fake OpenAI-compatible server
stands in for SiliconFlow (chat, embeddings and rerank on their endpoints), the fake
Elasticsearch server for the store the config names."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryscope import MemoryScope
from memoryscope.config import load_config
from memoryscope.memory import MemoryType
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_elasticsearch import FakeElasticsearch
from memoryscope.testing.fake_openai import FakeOpenAIServer

WALKTHROUGH = Path(__file__).parent / "configs" / "walkthrough_siliconflow.yaml"
GUITAR = "我的爱好是吉他。"
KEY = "xxx"  # the walkthrough's inline key


@pytest.fixture
def config_path(tmp_path: Path) -> Iterator[tuple[Path, FakeOpenAIServer, FakeElasticsearch]]:
    script = ConsolidationScript(user="用户", language="zh")
    script.say(GUITAR, score=3, facts=[("用户的爱好是吉他", "吉他")])
    with FakeOpenAIServer() as siliconflow, FakeElasticsearch() as es:
        siliconflow.add_rule("我的爱好是吉他", "吉他是很棒的爱好！")
        script.install(siliconflow)
        text = WALKTHROUGH.read_text(encoding="utf-8").replace("SILICONFLOW", siliconflow.root_url).replace("ES_URL", es.url)
        path = tmp_path / "walkthrough.yaml"
        path.write_text(text, encoding="utf-8")
        yield path, siliconflow, es


def test_the_walkthrough_config_validates_without_problems(config_path: tuple[Path, FakeOpenAIServer, FakeElasticsearch]) -> None:
    path, _, _ = config_path
    config = load_config(str(path))
    assert config.models["generation_model"].cls.backend == "openai_like"
    assert config.models["embedding_model"].cls.backend == "bge_embedding"
    assert config.models["rank_model"].cls.backend == "bge_rank"
    assert any("api_key_env" in warning for warning in config.warnings)
    assert KEY not in repr(config) and f"'{KEY}'" not in str(config.warnings)


def test_the_walkthrough_script_runs_end_to_end(
    config_path: tuple[Path, FakeOpenAIServer, FakeElasticsearch], caplog: pytest.LogCaptureFixture
) -> None:
    path, siliconflow, es = config_path
    caplog.set_level(logging.DEBUG, logger="memoryscope")
    with MemoryScope(config_path=str(path)) as ms:
        memory_chat = ms.default_memory_chat
        response = memory_chat.chat_with_memory(query=GUITAR)
        assert response.message.content == "吉他是很棒的爱好！"
        assert isinstance(response.meta_data["memories"], str)
        result = memory_chat.run_service_operation("consolidate_memory")
        assert isinstance(result, str)
        response = memory_chat.chat_with_memory(query="我的爱好是什么？", history_message_strategy=None)
        assert "用户的爱好是吉他" in response.meta_data["memories"]
        assert ms.store is not None
        observations = ms.store.scan(MemoryFilter("用户", memory_types=(MemoryType.OBSERVATION,)))
        assert [node.content for node in observations] == ["用户的爱好是吉他"]

    paths = {request.path for request in siliconflow.requests}
    assert {"/v1/chat/completions", "/v1/embeddings", "/v1/rerank"} <= paths  # the full endpoints, not doubled
    assert all(request.api_key_suffix == KEY for request in siliconflow.requests)  # the inline key was sent
    models = {request.body["model"] for request in siliconflow.requests}
    assert models == {"Qwen/Qwen2.5-7B-Instruct", "BAAI/bge-m3", "BAAI/bge-reranker-v2-m3"}
    assert any(request.path.startswith("/memory_index") for request in es.requests)
    assert any("api_key_env" in record.getMessage() for record in caplog.records if record.levelno == logging.WARNING)
    assert all(KEY not in record.getMessage() for record in caplog.records)
