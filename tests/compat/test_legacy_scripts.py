"""MemoryScope 0.1.1 scripts, as its examples and users wrote them, run unchanged against the fake
OpenAI-compatible server (only the endpoint differs: `OPENAI_BASE_URL`)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryscope import Arguments, MemoryScope
from memoryscope.errors import ConfigError, MemoryScopeError
from memoryscope.memory import MemoryType
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer

HOBBY = "我的爱好是弹琴。"
SPORT = "我的爱好是打羽毛球。"
CLEAN_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH", "OPENAI_API_BASE", "language")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    for name in CLEAN_ENV:
        monkeypatch.delenv(name, raising=False)
    script = ConsolidationScript(user="李四", language="zh")
    script.say(HOBBY, score=3, facts=[("用户爱好是弹琴", "弹琴")])
    script.say(SPORT, score=3, facts=[("用户爱好是打羽毛球", "羽毛球")])
    fake = fake_openai
    fake.add_rule("你知道我的乐器爱好是什么", "你喜欢弹琴。")
    fake.add_rule("你知道我的运动爱好是什么", "你喜欢打羽毛球。")
    fake.add_rule("你知道我消灭了几个星系吗", "两个星系。")
    script.install(fake)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-legacy-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    yield fake


def arguments(tmp_path: Path, **changes: Any) -> Arguments:
    """The Arguments of 0.1.1's examples/api/chat_example.py, on OpenAI-style backends."""
    values: dict[str, Any] = {
        "language": "cn",
        "human_name": "用户",
        "assistant_name": "AI",
        "memory_chat_class": "api_memory_chat",
        "generation_backend": "openai_generation",
        "generation_model": "gpt-4o",
        "embedding_backend": "openai_embedding",
        "embedding_model": "text-embedding-3-small",
        "store_path": str(tmp_path / "memory.db"),
        "consolidate_memory_interval_time": None,  # on demand only: the tests count what runs
        "reflect_and_reconsolidate_interval_time": None,
    }
    values.update(changes)
    return Arguments(**values)


def chat_requests(server: FakeOpenAIServer) -> list[Any]:
    return [r for r in server.requests if r.path.endswith("/chat/completions") and "爱好" in str(r.body["messages"][-1])]


def last_reply_request(server: FakeOpenAIServer) -> dict[str, Any]:
    replies = [r for r in server.requests if r.path.endswith("/chat/completions") and r.body["messages"][0]["role"] == "system"]
    body: dict[str, Any] = replies[-1].body
    return body


def test_public_names_import_lazily() -> None:
    code = "import sys, memoryscope; print('memoryscope.app' in sys.modules); from memoryscope import MemoryScope, Arguments"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_chat_example_4_consolidates_and_answers_from_memory(server: FakeOpenAIServer, tmp_path: Path) -> None:
    with MemoryScope(arguments=arguments(tmp_path)) as ms:
        memory_chat = ms.default_memory_chat
        memory_chat.run_service_operation("delete_all")
        response = memory_chat.chat_with_memory(query=HOBBY)
        assert isinstance(response.message.content, str)
        result = memory_chat.run_service_operation("consolidate_memory")
        assert isinstance(result, str)
        response = memory_chat.chat_with_memory(query="你知道我的乐器爱好是什么？", history_message_strategy=None)
        assert response.message.content == "你喜欢弹琴。"
        memories = response.meta_data["memories"]
        assert isinstance(memories, str)
        assert "用户爱好是弹琴" in memories
        assert memories.startswith("[") and "] " in memories  # `[2024-10-26 21:26:20 周六] ...`
        assert "用户爱好是弹琴" in last_reply_request(server)["messages"][0]["content"]


def test_chat_example_6_role_names_keep_users_apart(server: FakeOpenAIServer, tmp_path: Path) -> None:
    with MemoryScope(arguments=arguments(tmp_path)) as ms:
        memory_chat = ms.default_memory_chat
        memory_chat.run_service_operation("delete_all", "张三")  # role_name positional, as in 0.1.1
        memory_chat.run_service_operation("delete_all", "李四")
        memory_chat.chat_with_memory(query=HOBBY, role_name="李四")
        memory_chat.run_service_operation("consolidate_memory", role_name="李四")
        memory_chat.chat_with_memory(query=SPORT, role_name="张三")
        memory_chat.run_service_operation("consolidate_memory", role_name="张三")

        li = memory_chat.chat_with_memory(query="你知道我的乐器爱好是什么？", role_name="李四", history_message_strategy=None)
        zhang = memory_chat.chat_with_memory(query="你知道我的运动爱好是什么？", role_name="张三", history_message_strategy=None)
        assert "弹琴" in li.meta_data["memories"] and "羽毛球" not in li.meta_data["memories"]
        assert "羽毛球" in zhang.meta_data["memories"] and "弹琴" not in zhang.meta_data["memories"]
        assert ms.store is not None
        assert {n.user_name for n in ms.store.scan(MemoryFilter("李四"))} == {"李四"}
        assert ms.store.count(MemoryFilter("用户")) == 0  # nothing went to the default user


def test_history_message_strategies(server: FakeOpenAIServer, tmp_path: Path) -> None:
    with MemoryScope(arguments=arguments(tmp_path)) as ms:
        chat = ms.default_memory_chat
        chat.chat_with_memory(query="第一句话")
        chat.chat_with_memory(query="第二句话")
        chat.chat_with_memory(query="第三句话", history_message_strategy=None)
        assert len(last_reply_request(server)["messages"]) == 2  # system + query
        chat.chat_with_memory(query="第四句话", history_message_strategy=1)
        sent = [m["content"] for m in last_reply_request(server)["messages"][1:]]
        assert sent[0] == "第三句话" and sent[-1] == "第四句话" and len(sent) == 3
        chat.chat_with_memory(query="第五句话")  # auto: every turn not consolidated yet
        sent = [m["content"] for m in last_reply_request(server)["messages"] if m["role"] == "user"]
        assert sent == ["第一句话", "第二句话", "第三句话", "第四句话", "第五句话"]
        with pytest.raises(MemoryScopeError, match="history_message_strategy must be"):
            chat.chat_with_memory(query="坏的", history_message_strategy="all")


def test_auto_history_leaves_out_consolidated_turns(server: FakeOpenAIServer, tmp_path: Path) -> None:
    with MemoryScope(arguments=arguments(tmp_path)) as ms:
        chat = ms.default_memory_chat
        chat.chat_with_memory(query=HOBBY)
        chat.run_service_operation("consolidate_memory")
        chat.chat_with_memory(query="今天天气不错")
        users = [m["content"] for m in last_reply_request(server)["messages"] if m["role"] == "user"]
        assert users == ["今天天气不错"]  # the consolidated turn is memory now, not history


def test_temporary_memories_and_prompts_replace_their_parts(server: FakeOpenAIServer, tmp_path: Path) -> None:
    temporary = "张三是一只哥斯拉，这是真是的，不是虚构的。\n前天张三消灭了星系0x4be？"
    with MemoryScope(arguments=arguments(tmp_path)) as ms:
        chat = ms.default_memory_chat
        response = chat.chat_with_memory(query="你知道我消灭了几个星系吗？", temporary_memories=temporary)
        assert response.message.content == "两个星系。"
        system = last_reply_request(server)["messages"][0]["content"]
        assert temporary in system
        assert "0x4be" not in response.meta_data["memories"]  # temporary: used in the prompt, not stored
        chat.chat_with_memory(
            query="你好", system_prompt="你是一只猫。", memory_prompt="相关信息：", temporary_memories="用户叫小明"
        )
        system = last_reply_request(server)["messages"][0]["content"]
        assert system.startswith("你是一只猫。\n相关信息：") and system.endswith("用户叫小明")


def test_remember_response_false_keeps_nothing(server: FakeOpenAIServer, tmp_path: Path) -> None:
    with MemoryScope(arguments=arguments(tmp_path)) as ms:
        chat = ms.default_memory_chat
        chat.chat_with_memory(query="不要记住这句话", remember_response=False)
        assert chat.turns == []
        assert ms.store is not None and ms.store.count(MemoryFilter("用户")) == 0
        chat.chat_with_memory(query="记住这句话")
        said = ms.store.scan(MemoryFilter("用户", memory_types=(MemoryType.CONVERSATION,)))
        assert sorted(node.meta["role"] for node in said) == ["assistant", "user"]  # 0.1.x kept both sides


def test_operations_are_methods_of_the_service(server: FakeOpenAIServer, tmp_path: Path) -> None:
    """0.1.1's examples/api/simple_usages.ipynb: `memory_service.consolidate_memory()` and friends."""
    with MemoryScope(arguments=arguments(tmp_path)) as ms:
        memory_service = ms.default_memory_service
        assert memory_service is ms.memory_service_dict["memoryscope_service"]
        assert ms.default_memory_chat is next(iter(ms.memory_chat_dict.values()))
        memory_service.init_service()
        assert memory_service.human_name == "用户" and memory_service.assistant_name == "AI"
        assert "consolidate_memory" in memory_service.op_description_dict

        added = memory_service.add_memory(query="我养了一只猫")
        assert isinstance(added, str) and "1" in added
        listing = memory_service.list_memory()
        assert "我养了一只猫" in listing
        assert "我养了一只猫" in memory_service.retrieve_memory(query="猫")
        assert isinstance(memory_service.consolidate_memory(), str)

        memory_service.add_memory(query="我住在杭州", role_name="王五")
        assert "我住在杭州" not in memory_service.list_memory()
        assert "我住在杭州" in memory_service.list_memory(role_name="王五")
        assert ms.store is not None
        [node] = ms.store.scan(MemoryFilter("王五"))
        memory_service.delete_memory(memory_id=node.memory_id, role_name="王五")
        assert ms.store.count(MemoryFilter("王五")) == 0
        memory_service.delete_memory(query="我养了一只猫")  # 0.1.1 also deleted by exact text
        assert "我养了一只猫" not in memory_service.list_memory()

        with pytest.raises(AttributeError, match="no attribute 'consolidate_memroy'"):
            memory_service.consolidate_memroy()
        with pytest.raises(MemoryScopeError, match=r"unknown input 'memory_idd'\. Did you mean 'memory_id'"):
            memory_service.delete_memory(memory_idd="x")


def test_single_fields_as_keywords_over_a_config(server: FakeOpenAIServer, tmp_path: Path) -> None:
    config = {"memory_store.path": str(tmp_path / "m.db")}
    with MemoryScope(config_path="default", overrides=config, language="cn", human_name="小明") as ms:
        assert ms.config.settings.language == "zh"
        assert ms.default_memory_service.human_name == "小明"
        assert ms.config.models["embedding_model"].cls.backend == "local_embedding"  # models not given: kept


def test_argument_mistakes_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"arguments\.generation_backnd: unknown argument. Did you mean 'generation_backend'"):
        MemoryScope(generation_backnd="openai_generation")
    with pytest.raises(ConfigError, match=r"arguments\.output_memory_max_count"):
        MemoryScope(arguments=Arguments(output_memory_max_count="many"))  # type: ignore[arg-type]  # the wrong type is the point
    with pytest.raises(ConfigError, match="either `arguments=` or single argument keywords"):
        MemoryScope(arguments=Arguments(), language="en")


def test_elasticsearch_url_moves_the_memories_to_elasticsearch(server: FakeOpenAIServer, tmp_path: Path) -> None:
    from memoryscope.testing.fake_elasticsearch import FakeElasticsearch

    with FakeElasticsearch() as es:
        settings = arguments(tmp_path, es_url=es.url, es_index_name="legacy_memory")
        with MemoryScope(arguments=settings) as ms:
            chat = ms.default_memory_chat
            chat.chat_with_memory(query=HOBBY)
            chat.run_service_operation("consolidate_memory")
            response = chat.chat_with_memory(query="你知道我的乐器爱好是什么？", history_message_strategy=None)
            assert "用户爱好是弹琴" in response.meta_data["memories"]
        assert any(r.path.startswith("/legacy_memory/") for r in es.requests)
    assert not (tmp_path / "memory.db").exists()


V01_CONFIG = Path(__file__).parent / "configs" / "v01_full.yaml"


def v01_config(tmp_path: Path, retrieve_workflow: str | None = None) -> Path:
    text = V01_CONFIG.read_text(encoding="utf-8").replace("STORE", str(tmp_path / "v01.db"))
    if retrieve_workflow is not None:
        text = text.replace("workflow: set_query,[extract_time|retrieve_obs_ins,semantic_rank],fuse_rerank", retrieve_workflow)
        text = text.replace(
            "  set_query:\n",
            "  rewrite_query:\n    class: contrib.example_query_worker\n    generation_model: generation_model\n  set_query:\n",
        )
    path = tmp_path / "v01.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_config_in_the_full_0_1_vocabulary_loads_with_one_notice_per_ignored_part(tmp_path: Path) -> None:
    from memoryscope.config import load_config

    config = load_config(str(v01_config(tmp_path)))
    assert config.chats["cli_memory_chat"].cls.__name__ == "CliMemoryChat"
    assert config.chats["cli_memory_chat"].params.stream is True
    assert config.services["memoryscope_service"].operations["consolidate_memory"].params.interval_time == 3600
    notices = "\n".join(config.notices)
    for part in ("global.logger_name", "monitor", "worker.dummy", "enable_parallel"):
        assert part in notices
    assert config.workers["get_reflection_subject"].params.max_subjects == 3  # reflect_num_questions


def test_the_query_rewriting_example_worker_sees_the_chat(
    server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.1.1's examples/advance/replacement.yaml: `contrib.example_query_worker` heads retrieve_memory."""
    workflow = "workflow: rewrite_query,[extract_time|retrieve_obs_ins,semantic_rank],fuse_rerank"
    with FakeOpenAIServer() as llm:
        llm.add_rule("Question: and what about her?", "What does my sister Mary do in Berlin?")
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        with MemoryScope(config_path=str(v01_config(tmp_path, workflow))) as ms:
            chat = ms.default_memory_chat
            list(chat.chat_with_memory(query="My sister Mary moved to Berlin"))  # cli_memory_chat streams
            list(chat.chat_with_memory(query="and what about her?"))
        asked = [r.body for r in llm.requests if r.path.endswith("/chat/completions")]
    rewrites = [body for body in asked if "Question: and what about her?" in body["messages"][-1]["content"]]
    assert len(rewrites) == 1
    assert "user: My sister Mary moved to Berlin" in rewrites[0]["messages"][-1]["content"]  # the earlier turn, by speaker
