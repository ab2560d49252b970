"""The MemoryOS tiers on Elasticsearch (the real client against `FakeElasticsearch`): the same
facade, a config that only swaps the store."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from memoryos_scripted_llm import T0

from memoryscope.memoryos import Memoryos
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.testing.memoryos_script import MemoryosScript
from memoryscope.workers._memoryos import MEMORYOS_PAGE, MEMORYOS_SEGMENT


def test_the_tiers_persist_in_elasticsearch(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    pytest.importorskip("elasticsearch", reason='needs the Elasticsearch client: pip install "memoryscope[elasticsearch]"')
    from memoryscope.testing.fake_elasticsearch import FakeElasticsearch

    MemoryosScript().install(fake_openai)
    with FakeElasticsearch() as server:
        config = tmp_path / "memoryos_es.yaml"
        config.write_text(
            "extends: memoryos\n"
            "memory_store:\n"
            "  class: elasticsearch_memory_store\n"
            f"  hosts: ['{server.url}']\n"
            "  index_name: memoryos\n"
            "  embedding_model: embedding_model\n"
            "  refresh: wait_for\n",
            encoding="utf-8",
        )
        options = {"short_term_capacity": 1, "mid_term_heat_threshold": 1.5, "config": str(config)}
        memo = Memoryos("ann", "test-key", tmp_path, fake_openai.base_url, **options)
        with memo:
            for minute, text in enumerate(("I drink green tea", "My bicycle broke", "I play the piano")):
                memo.add_memory(text, "ok", T0 + timedelta(minutes=minute))
            assert memo.get_user_profile() == "The user talks about: My bicycle broke"
            kinds = sorted(record.memory_type for record in memo.scope.get_all("ann", target_name=memo.assistant_id))
        assert kinds == ["memoryos_knowledge"] * 2 + ["memoryos_page"] * 3 + ["memoryos_profile"] + ["memoryos_segment"] * 2
        assert {document["memory_type"] for document in server.documents("memoryos").values()} >= {
            MEMORYOS_PAGE.value,
            MEMORYOS_SEGMENT.value,
        }
        assert not (tmp_path / "memoryos.db").exists()  # no embedded store beside it
