"""consolidate_memory over stdio: the configured operation runs now, through the fake LLM."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp_session import run_client, stdio_server, text_of

from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.slow  # an MCP server subprocess; `-m "not slow"` leaves it out


def test_consolidate_draws_facts_and_a_model_failure_is_a_tool_error(llm: FakeOpenAIServer, store: Path) -> None:
    script = ConsolidationScript(user="ann")
    script.say("I play the guitar every evening", score=3, facts=[("ann plays the guitar", "guitar")])
    script.say("I keep two cats", score=3, facts=[("ann keeps two cats", "cats")])
    script.install(llm)

    async def body(client: Client) -> None:
        await client.call_tool("add_memory", {"user_input": "I play the guitar every evening", "agent_response": "Lovely."})
        done = await client.call_tool("consolidate_memory", {})
        assert not done.is_error, text_of(done)
        assert "ann plays the guitar" in text_of(done)
        facts = text_of(await client.call_tool("list_memory", {"type": "observation"}))
        assert "ann plays the guitar" in facts and "(id: " in facts
        assert script.calls["info_filter"] == 1

        await client.call_tool("add_memory", {"user_input": "I keep two cats"})
        llm.fail_next(50, status=401)
        failed = await client.call_tool("consolidate_memory", {})
        assert failed.is_error and "401" in text_of(failed), text_of(failed)
        llm.clear_faults()
        # the server is still up and the failed messages did not become facts
        assert "cats" not in text_of(await client.call_tool("list_memory", {"type": "observation"}))

    run_client(stdio_server(store, llm, "--user", "ann"), body)
