"""The MCP tools and the memory chat on the `memoryos` config: turns kept as pages, the MemoryOS
context pack retrieved, and `get_user_profile` answering with the evolving profile text."""

from __future__ import annotations

from pathlib import Path

from memoryos_scripted_llm import Script

from memoryscope import MemoryScope
from memoryscope.mcp.tools import McpToolHandlers
from memoryscope.testing.fake_openai import FakeOpenAIServer


def test_mcp_tools_work_on_the_memoryos_config(tmp_path: Path, fake_openai: FakeOpenAIServer, script: Script) -> None:
    overrides = {
        "memory_store.path": str(tmp_path / "m.db"),
        "model.generation_model.api_base": fake_openai.base_url,
        "model.generation_model.api_key": "test-key",
        "worker.memoryos_add_page.short_term_capacity": 1,
        "worker.memoryos_mid_term.short_term_capacity": 1,
        "worker.memoryos_long_term.mid_term_heat_threshold": 1.5,
    }
    with MemoryScope("memoryos", overrides=overrides) as scope:
        tools = McpToolHandlers(scope)
        assert tools.get_user_profile("ann").startswith("No profile yet")
        reply = tools.add_memory("ann", "I drink green tea every morning", "Green tea is lovely.")
        assert reply.startswith("Stored 1 dialogue page")
        tools.add_memory("ann", "My bicycle got a flat tyre yesterday", "Oh no!")  # the tea page moves: hot at 1.5

        assert tools.get_user_profile("ann") == "Ann loves green tea."
        assert tools.get_user_profile("bob").startswith("No profile yet")
        found = tools.retrieve_memory("ann", "green tea")
        assert "Ann loves green tea." in found and "memoryos_profile" in found
        assert "bicycle" in found  # the short-term page
        [profile] = scope.search("green tea", user_id="ann", types=["memoryos_profile"])  # narrowed by type
        assert profile.memory == "Ann loves green tea."


def test_the_memory_chat_keeps_turns_as_pages_and_answers_from_the_pack(
    tmp_path: Path, fake_openai: FakeOpenAIServer, script: Script
) -> None:
    overrides = {
        "memory_store.path": str(tmp_path / "m.db"),
        "model.generation_model.api_base": fake_openai.base_url,
        "model.generation_model.api_key": "test-key",
    }
    fake_openai.add_rule("cat", "Your cat is called Mochi.")
    with MemoryScope("memoryos", overrides=overrides) as scope:
        chat = scope.default_memory_chat
        chat.chat_with_memory("My cat is called Mochi", role_name="ann", history_message_strategy=None)
        response = chat.chat_with_memory("What is my cat called?", role_name="ann", history_message_strategy=None)

        assert response.message.content == "Your cat is called Mochi."
        prompt = str(fake_openai.requests[-1].body["messages"])
        assert "User: My cat is called Mochi" in prompt  # the short-term page, in the chat's prompt
        pages = scope.get_all("ann", types=["memoryos_page"])
        assert len(pages) == 2 and not scope.get_all("ann", types=["conversation"])
