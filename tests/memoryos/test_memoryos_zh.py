"""The `memoryos_zh` config: pages and prompts in Chinese, answered by the shipped scripted model
(`memoryscope.testing.memoryos_script`), tiers moving as in English."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from memoryscope import MemoryScope
from memoryscope.context import Message
from memoryscope.memory import MemoryStatus
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.testing.memoryos_script import MemoryosScript
from memoryscope.workers._memoryos import MEMORYOS_PAGE, MEMORYOS_SEGMENT

T0 = datetime(2024, 10, 26, 20, 0, tzinfo=timezone(timedelta(hours=8)))
TALK = ("我每天早上喝绿茶", "我的自行车昨天爆胎了", "我周一开始学钢琴")


def test_the_chinese_config_moves_pages_and_promotes_in_chinese(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    script = MemoryosScript()
    script.install(fake_openai)
    overrides = {
        "memory_store.path": str(tmp_path / "m.db"),
        "model.generation_model.api_base": fake_openai.base_url,
        "model.generation_model.api_key": "test-key",
        "worker.memoryos_add_page.short_term_capacity": 1,
        "worker.memoryos_mid_term.short_term_capacity": 1,
        "worker.memoryos_long_term.mid_term_heat_threshold": 1.5,
    }
    with MemoryScope("memoryos_zh", overrides=overrides) as scope:
        service = scope.default_service
        for minute, text in enumerate(TALK):
            said = T0 + timedelta(minutes=minute)
            turn = (Message("user", text, said), Message("assistant", "好的。", said))
            service.run_operation("memoryos_add", "安", messages=turn, query_time=said)
        store = scope.store
        assert store is not None
        pages = store.scan(MemoryFilter("安", memory_types=(MEMORYOS_PAGE,)), limit=10, newest_first=False)
        assert pages[0].content == "用户：我每天早上喝绿茶\n助手：好的。"
        [prompt] = [r.body for r in fake_openai.requests if "个片段的摘要" in str(r.body)][:1]
        first_move = "片段 1\n之前的摘要：\n新的对话页：\n[2024-10-26 20:00:00 周六] 用户：我每天早上喝绿茶"
        assert first_move in str(prompt["messages"][-1]["content"])
        valid_segments = MemoryFilter("安", memory_types=(MEMORYOS_SEGMENT,), status=MemoryStatus.VALID)
        segments = store.scan(valid_segments, limit=10, newest_first=False)
        assert [segment.content for segment in segments] == ["我每天早上喝绿茶", "我的自行车昨天爆胎了"]
        assert script.calls["memoryos_mid_term"] == 2 and script.calls["memoryos_long_term"] == 2
        pack = service.run_operation("memoryos_retrieve", "安", query="绿茶", query_time=T0 + timedelta(minutes=5))
        assert pack.context.result.startswith("用户画像：\n[2024-10-26")
        assert "最近的对话：" in pack.context.result
