"""`memoryscope.memgpt`: MemGPT 0.3.x's client quick start with only its import changed, named
agents (unique names, persisted, isolated per user), messages in MemGPT's shape, and a data
source attached to an agent found by its archival_memory_search; all against the fake
OpenAI-compatible server and a SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_stage import NO_SCHEDULER, agent_requests, call, say, step, tool_results

from memoryscope.door import Document
from memoryscope.memgpt import LocalClient, create_client
from memoryscope.testing.fake_openai import FakeOpenAIServer


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer, tmp_path: Path) -> FakeOpenAIServer:
    """The shipped `agent` config as `create_client()` opens it: the LLM from the environment,
    the store at MEMORYSCOPE_STORE_PATH."""
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", fake_openai.base_url)
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-memgpt-test")
    monkeypatch.setenv("MEMORYSCOPE_LLM_MODEL", "fake-qwen")
    monkeypatch.setenv("MEMORYSCOPE_STORE_PATH", str(tmp_path / "memgpt.db"))
    return fake_openai


def client_of(user_id: str | None = None) -> LocalClient:
    return create_client(overrides={NO_SCHEDULER: False}, user_id=user_id)


def test_memgpts_readme_quick_start_runs_with_only_the_import_changed(llm: FakeOpenAIServer) -> None:
    llm.queue_replies(say("Hello Bob! Nice to meet you.", thought="A new friend; greet him warmly."))

    # MemGPT 0.3.x's README, "Python client", with `from memgpt import create_client` changed:
    from memoryscope.memgpt import create_client

    # Connect to the server as a user
    client = create_client()

    # Create an agent
    agent_info = client.create_agent(name="my_agent", persona="You are a friendly agent.", human="Bob is a friendly human.")

    # Send a message to the agent
    messages = client.user_message(agent_id=agent_info.id, message="Hello, agent!")

    try:
        assert [next(key for key in m if key not in ("id", "date", "status")) for m in messages] == [
            "internal_monologue", "function_call", "assistant_message", "function_return",
        ]  # fmt: skip
        assert messages[0]["internal_monologue"] == "A new friend; greet him warmly."
        assert messages[1]["function_call"] == "send_message({'message': 'Hello Bob! Nice to meet you.'})"
        assert messages[2]["assistant_message"] == "Hello Bob! Nice to meet you."
        assert messages[3] == {**messages[3], "function_return": "None", "status": "success"}
        assert all(m["id"] and m["date"].endswith("+00:00") for m in messages)
        system = agent_requests(llm)[0]["messages"][0]["content"]
        assert "You are a friendly agent." in system and "Bob is a friendly human." in system
        assert "Hello, agent!" in agent_requests(llm)[0]["messages"][-1]["content"]
        assert agent_info.name == "my_agent" and client.get_agent(agent_name="my_agent").id == agent_info.id
    finally:
        client.close()


def test_names_are_unique_per_user_and_agents_persist_for_the_next_client(llm: FakeOpenAIServer) -> None:
    llm.queue_replies(
        step(call("core_memory_append", heartbeat=True, label="human", content="Ann plays the cello."), thought="Note it."),
        say("A cellist!"),
        say("You play the cello."),
    )
    with client_of("ann") as client:
        helper = client.create_agent(name="helper", persona="I am Sam.", human="Ann.")
        other = client.create_agent()  # no name: one is made
        with pytest.raises(ValueError, match="an agent named 'helper' exists already"):
            client.create_agent(name="helper")
        assert client.agent_exists(agent_name="helper") and client.agent_exists(agent_id=other.id)
        assert not client.agent_exists(agent_name="nobody")
        with pytest.raises(ValueError, match="Only one of agent_id or agent_name"):
            client.agent_exists(agent_id=helper.id, agent_name="helper")
        assert other.name.startswith("agent-")
        client.user_message(helper.id, "I play the cello")
    with client_of("ann") as again:  # a second client on the same store
        assert [agent.name for agent in again.list_agents()] == ["helper", other.name]
        memory = again.get_agent_memory(helper.id)
        assert memory["core_memory"] == {"persona": "I am Sam.", "human": "Ann.\nAnn plays the cello."}
        assert memory["recall_memory"] == 2  # the user's message and the reply
        assert again.get_agent_memory(other.id)["core_memory"]["human"] == ""  # each agent its own blocks
        assert again.get_agent_memory(other.id)["recall_memory"] == 0  # ... and its own conversation
        again.user_message(helper.id, "What do I play?")
        queue = agent_requests(llm)[-1]["messages"]
        assert any("I play the cello" in str(m.get("content")) for m in queue)  # the saved queue came back
    with client_of("bob") as bob:  # another user sees none of ann's agents
        assert bob.list_agents() == []
        with pytest.raises(LookupError, match="has no agent with the id"):
            bob.user_message(helper.id, "hi")
        assert bob.create_agent(name="helper").name == "helper"  # names are unique per user only


def test_delete_agent_forgets_it_and_frees_its_name(llm: FakeOpenAIServer) -> None:
    with client_of() as client:
        agent = client.create_agent(name="temp", human="Temp human.")
        ids = client.insert_archival_memory(agent.id, "The spare key is under the blue pot.")
        assert [m["id"] for m in client.get_agent_archival_memory(agent.id)] == ids
        client.delete_agent(agent.id)
        assert not client.agent_exists(agent_name="temp")
        again = client.create_agent(name="temp")
        assert again.id != agent.id
        assert client.get_agent_archival_memory(again.id) == []
        assert client.get_agent_memory(again.id)["core_memory"]["human"] != "Temp human."


def test_an_attached_source_is_found_by_archival_memory_search(llm: FakeOpenAIServer, tmp_path: Path) -> None:
    handbook = tmp_path / "handbook.md"
    handbook.write_text("# Handbook\n\nThe office wifi password is heron-42.\n\nLunch is at noon.", encoding="utf-8")
    llm.queue_replies(
        step(call("archival_memory_search", heartbeat=True, query="wifi password")),
        say("It is heron-42."),
        step(call("archival_memory_search", heartbeat=True, query="what is my cat called")),
        say("Miso."),
        step(call("archival_memory_search", heartbeat=True, query="wifi password")),
        say("I cannot find it."),
    )
    with client_of("ann") as client:
        agent = client.create_agent(name="office")
        client.insert_archival_memory(agent.id, "Ann's cat is named Miso.")
        source = client.load_file_into_source(str(handbook), "docs")
        assert (source.name, source.passages) == ("docs", 1) and client.get_source(source_name="docs").id == source.id
        client.attach_source_to_agent(source_id=source.id, agent_id=agent.id)
        assert [s.name for s in client.list_attached_sources(agent.id)] == ["docs"]
        messages = client.user_message(agent.id, "What is the wifi password?")
        found = tool_results(agent_requests(llm)[1])[-1]["content"]["results"]
        assert found[0].startswith("[docs] ") and "heron-42" in found[0] and "Miso" in found[1]
        assert messages[0]["function_call"] == "archival_memory_search({'query': 'wifi password'})"
        assert messages[1]["status"] == "success" and "heron-42" in messages[1]["function_return"]
        # the agent's own memories and the passages rank on one scale: the best answer first, whichever it is
        client.user_message(agent.id, "What is my cat called?")
        found = tool_results(agent_requests(llm)[3])[-1]["content"]["results"]
        assert "Miso" in found[0] and found[1].startswith("[docs] ")
        client.detach_source(source.id, agent.id)
        client.user_message(agent.id, "And now?")
        found = tool_results(agent_requests(llm)[5])[-1]["content"]["results"]
        assert len(found) == 1 and "Miso" in found[0]  # the passages are no longer searched
        client.load_text_into_source([Document("more", "Parking is in lot C.")], "docs")
        assert client.get_source(source_name="docs").passages == 2


def test_what_memgpt_has_and_memoryscope_does_not_is_a_clear_error(llm: FakeOpenAIServer) -> None:
    with pytest.raises(ValueError, match="no MemGPT server"):
        create_client(base_url="http://localhost:8283")
    with client_of() as client:
        with pytest.raises(ValueError, match="preset="):
            client.create_agent(name="x", preset="memgpt_chat")
        with pytest.raises(LookupError, match="Did you mean 'helper'"):
            client.create_agent(name="helper") and client.get_agent(agent_name="helpr")
        helper = client.get_agent(agent_name="helper")
        with pytest.raises(LookupError, match="no data source 'nope'"):
            client.attach_source(helper.id, "nope")
        empty = client.create_source("empty", description="nothing yet")
        assert (empty.passages, [s.name for s in client.list_sources()]) == (0, ["empty"])
        assert client.run_command(helper.id, "/attach empty") == "attached empty"
        assert [s.name for s in client.list_attached_sources(helper.id)] == ["empty"]
        with pytest.raises(ValueError, match="nothing to summarise"):
            client.run_command(helper.id, "summarize")
        client.delete_source(source_name="empty")
        assert client.list_sources() == [] and client.list_attached_sources(helper.id) == []


def test_failed_calls_and_plain_text_replies_in_memgpts_shape(llm: FakeOpenAIServer) -> None:
    llm.queue_replies(
        step(call("core_memory_append", label="nowhere", content="x")),  # no such block: an error it reads back
        "Sorry, let me just say hi.",  # a model that answers in plain text
    )
    with client_of() as client:
        agent = client.create_agent(name="plain")
        messages = client.user_message(agent.id, "hi")
    assert messages[0]["function_call"] == "core_memory_append({'label': 'nowhere', 'content': 'x'})"
    assert messages[1]["status"] == "error" and "no core memory block" in messages[1]["function_return"]
    assert [m.get("assistant_message") for m in messages[2:]] == ["Sorry, let me just say hi."]
