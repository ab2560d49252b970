"""The MemGPT-style agent chat (`agent_memory_chat`) against the fake OpenAI-compatible server,
which scripts the model's function calls step by step: replies, heartbeats, every memory
function, refusals handed back to the model, the step budget, memory pressure and the flush into
a summary, a restart, the CLI's context edits, two users, and the config check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_stage import agent_requests, agent_scope, call, opened, say, step, tool_results

from memoryscope.chat.agent_memory_chat import AgentMemoryChat
from memoryscope.config import load_config
from memoryscope.errors import ConfigError
from memoryscope.memory import MemoryType
from memoryscope.testing.fake_openai import FakeOpenAIServer, FakeToolCalls

pytestmark = pytest.mark.slow  # agent turns through the fake model; `-m "not slow"` leaves it out

USER = "ann"


def agent_chat(scope: Any, user: str = USER) -> AgentMemoryChat:
    chat = scope.chats["agent_memory_chat"]
    assert isinstance(chat, AgentMemoryChat)
    return chat.for_user(user)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "agent.db"


def test_a_reply_is_what_send_message_sent(db: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue_replies(say("Hello Ann, nice to meet you!", thought="The user greets me; I greet back."))
    with opened(db, monkeypatch, fake_openai) as scope:
        response = agent_chat(scope).chat_with_memory("Hi, I am Ann")
        assert response.message.content == "Hello Ann, nice to meet you!"
        assert response.meta_data["inner_monologue"] == ["The user greets me; I greet back."]
        assert [c["name"] for c in response.meta_data["steps"][0]["calls"]] == ["send_message"]
        [body] = agent_requests(fake_openai)
        names = [tool["function"]["name"] for tool in body["tools"]]
        assert names == [
            "send_message", "core_memory_append", "core_memory_replace", "archival_memory_insert",
            "archival_memory_search", "conversation_search", "conversation_search_date",
        ]  # fmt: skip
        assert all("request_heartbeat" in tool["function"]["parameters"]["required"] for tool in body["tools"])
        system = body["messages"][0]
        assert system["role"] == "system" and "<persona" in system["content"] and "<human" in system["content"]
        user = json.loads(body["messages"][-1]["content"])
        assert (user["type"], user["message"]) == ("user_message", "Hi, I am Ann")
        said = scope.get_all(USER, types=["conversation"])
        assert sorted(record.memory for record in said) == ["Hello Ann, nice to meet you!", "Hi, I am Ann"]


def test_heartbeats_chain_steps_and_core_memory_is_edited(
    db: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue_replies(
        step(call("core_memory_append", heartbeat=True, label="human", content="Name: Ann. Lives in Hangzhou.")),
        step(
            call(
                "core_memory_replace", heartbeat=True, label="human", old_content="Hangzhou", new_content="Hangzhou, by the lake"
            )
        ),
        say("Noted, Ann!"),
    )
    with opened(db, monkeypatch, fake_openai) as scope:
        chat = agent_chat(scope)
        response = chat.chat_with_memory("I'm Ann and I live in Hangzhou")
        assert response.message.content == "Noted, Ann!"
        assert len(response.meta_data["steps"]) == 3
        assert chat.agent.core.get("human").value == "Name: Ann. Lives in Hangzhou, by the lake."
        bodies = agent_requests(fake_openai)
        assert len(bodies) == 3
        second = bodies[1]["messages"]
        assert [r["content"]["status"] for r in tool_results(bodies[1])] == ["OK"]
        assert json.loads(second[-1]["content"])["type"] == "heartbeat"  # the heartbeat asks for the next step
        assert "Lives in Hangzhou" in bodies[1]["messages"][0]["content"]  # the edited block is in the next prompt
        history = chat.agent.core.history("human")
        assert [change.value for change in history][-2:] == [
            "Name: Ann. Lives in Hangzhou.",
            "Name: Ann. Lives in Hangzhou, by the lake.",
        ]


def test_archival_and_conversation_search(db: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue_replies(
        step(call("archival_memory_insert", heartbeat=True, content="Ann's cat is called Mochi")),
        say("What a lovely cat!"),
        step(call("archival_memory_search", heartbeat=True, query="what is the cat called?")),
        step(call("conversation_search", heartbeat=True, query="Mochi")),
        step(call("conversation_search_date", heartbeat=True, start_date="2000-01-01", end_date="2999-12-31")),
        step(call("archival_memory_search", heartbeat=True, query="cat", page=3)),
        say("Your cat is Mochi."),
    )
    with opened(db, monkeypatch, fake_openai) as scope:
        chat = agent_chat(scope)
        chat.chat_with_memory("My cat is called Mochi")
        archived = scope.get_all(USER, types=["obs_customized"])
        assert [(r.memory, r.metadata.get("source")) for r in archived] == [("Ann's cat is called Mochi", "archival")]
        assert chat.chat_with_memory("What is my cat called?").message.content == "Your cat is Mochi."
        results = [r["content"] for r in tool_results(agent_requests(fake_openai)[-1])][-4:]
        archival, conversation, by_date, empty_page = results
        assert any("Mochi" in line for line in archival["results"])
        assert any("My cat is called Mochi" in line for line in conversation["results"])
        assert any("What a lovely cat!" in line for line in by_date["results"])
        assert empty_page["results"] == [] and "page 3" in empty_page["message"]


def test_refusals_go_back_to_the_model(db: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue_replies(
        step(call("core_memory_append", label="human", content="x" * 2500)),  # over the 2000-character block
        FakeToolCalls(calls=(("core_memory_append", '{"label": "human", "content": '),)),  # malformed JSON
        FakeToolCalls(calls=(("forget_everything", {}),)),  # no such function
        step(call("core_memory_replace", label="human", old_content="not there", new_content="y")),
        step(call("core_memory_append", label="nobody", content="z")),
        say("Sorry, I could not save that."),
    )
    with opened(db, monkeypatch, fake_openai) as scope:
        chat = agent_chat(scope)
        response = chat.chat_with_memory("Remember this very long text")
        assert response.message.content == "Sorry, I could not save that."
        failures = [c for s in response.meta_data["steps"] for c in s["calls"] if not c["ok"]]
        messages = [json.loads(c["result"])["message"] for c in failures]
        assert len(failures) == 5
        assert ("human" in messages[0] and "2,000" in messages[0]) or "2000" in messages[0]
        assert "not valid JSON" in messages[1]
        assert "forget_everything" in messages[2] and "send_message" in messages[2]
        assert "not there" in messages[3]
        assert "persona" in messages[4] and "human" in messages[4]
        assert chat.agent.core.get("human").value == ""  # nothing was written
        assert chat.agent.state.counters["tool_errors"] == 5


def test_the_step_budget_stops_a_runaway_loop(db: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> None:
    looping = step(call("conversation_search", heartbeat=True, query="anything"))
    fake_openai.queue_replies(*[looping] * 4)
    overrides = {"memory_chat.agent_memory_chat.max_steps_per_turn": 4}
    with opened(db, monkeypatch, fake_openai, **overrides) as scope:
        response = agent_chat(scope).chat_with_memory("loop forever")
        assert response.message.content == "" and len(response.meta_data["steps"]) == 4
        assert any("4 steps" in notice for notice in response.meta_data["notices"])
        assert fake_openai.queued_reply_count == 0 and len(agent_requests(fake_openai)) == 4


def test_a_plain_text_answer_is_taken_as_the_reply(
    db: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue_replies("Hello there!")
    with opened(db, monkeypatch, fake_openai) as scope:
        response = agent_chat(scope).chat_with_memory("Hi")
        assert response.message.content == "Hello there!"
        assert any("send_message" in notice for notice in response.meta_data["notices"])


def test_memory_pressure_warns_once_then_flushes_into_a_summary(
    db: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer
) -> None:
    # a window the system prompt and tool schemas alone nearly fill: a few messages pass the warning line
    with opened(db, monkeypatch, fake_openai) as scope:
        chat = agent_chat(scope)
        agent = chat.agent
        base = agent.window.counter.count_request(agent.main_context(), agent.tools.schemas)
    long_words = "I grew up in Dali by Erhai lake and loved the mountains there. " * 6
    with opened(db, monkeypatch, fake_openai, **{"memory_chat.agent_memory_chat.context_window": base + 400}) as scope:
        chat = agent_chat(scope)
        fake_openai.queue_replies(say("Tell me more."), say("Interesting!"))
        chat.chat_with_memory(long_words)
        chat.chat_with_memory("And my sister lives there too. " * 4)
        warnings = [m for m in chat.agent.state.queue if m["role"] == "system" and "conversation_search" in m["content"]]
        assert len(warnings) == 1 and chat.agent.state.counters.get("warnings") == 1
        fake_openai.queue_replies("Ann grew up in Dali by Erhai lake; her sister lives there.", say("Got it."))
        for _ in range(3):
            if chat.agent.state.counters.get("flushes"):
                break
            fake_openai.queue_replies("Ann grew up in Dali by Erhai lake; her sister lives there.", say("Got it."))
            chat.chat_with_memory("More about Dali: the old town, the three pagodas, the cherry trees. " * 4)
        assert chat.agent.state.counters.get("flushes", 0) >= 1
        assert chat.agent.state.summary == "Ann grew up in Dali by Erhai lake; her sister lives there."
        summary_requests = [r for r in fake_openai.requests if r.path.endswith("/chat/completions") and not r.body.get("tools")]
        assert summary_requests and "Dali" in json.dumps(summary_requests[0].body["messages"])
        assert all(long_words.strip() not in json.dumps(m) for m in chat.agent.state.queue)  # evicted from the queue ...
        found = scope.search("Dali Erhai lake", USER, types=["conversation"])
        assert any(record.memory == long_words.strip() for record in found)  # ... and still found by conversation_search
        context = chat.agent.main_context()
        assert context[1]["role"] == "system" and "Dali" in context[1]["content"]  # the summary heads the queue


def test_state_survives_a_restart(db: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue_replies(
        step(call("core_memory_append", heartbeat=True, label="human", content="Plays the cello.")), say("Lovely!")
    )
    with opened(db, monkeypatch, fake_openai) as scope:
        agent_chat(scope).chat_with_memory("I play the cello")
    with opened(db, monkeypatch, fake_openai) as scope:
        agent = agent_chat(scope).agent
        assert agent.core.get("human").value == "Plays the cello."
        roles = [m["role"] for m in agent.state.queue]
        assert roles == ["user", "assistant", "tool", "user", "assistant", "tool"]
        assert agent.state.counters["steps"] == 2


def test_pop_retry_rethink_rewrite_and_checkpoints(
    db: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue_replies(
        step(call("conversation_search", heartbeat=True, query="cello")),
        say("You play the cello.", thought="Found it."),
        say("Yes: the cello!", thought="Retried."),
    )
    with opened(db, monkeypatch, fake_openai) as scope:
        agent = agent_chat(scope).agent
        agent.send("What do I play?")
        agent.save_checkpoint("before-retry")
        assert [m["role"] for m in agent.state.queue] == ["user", "assistant", "tool", "user", "assistant", "tool"]

        retried = agent.retry()  # drops everything after the user's message and asks again
        assert retried.reply == "Yes: the cello!"
        assert [m["role"] for m in agent.state.queue] == ["user", "assistant", "tool"]
        assert json.loads(agent_requests(fake_openai)[-1]["messages"][-1]["content"])["message"] == "What do I play?"

        agent.rethink("I should answer warmly.")
        agent.rewrite("Yes, the cello, beautifully!")
        last = agent.state.queue[-2]
        assert last["content"] == "I should answer warmly."
        assert json.loads(last["tool_calls"][0]["function"]["arguments"])["message"] == "Yes, the cello, beautifully!"

        assert agent.pop(1) == 2  # the tool result, and the call it answered: never one without the other
        assert [m["role"] for m in agent.state.queue] == ["user"]

        agent.load_checkpoint("before-retry")
        assert len(agent.state.queue) == 6
        assert [name for name, _ in agent.checkpoints()] == ["before-retry"]


def test_two_users_have_their_own_agents(db: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue_replies(
        step(call("core_memory_append", heartbeat=True, label="human", content="Ann plays the cello.")),
        say("Noted."),
        step(call("conversation_search", heartbeat=True, query="cello")),
        say("I know nothing about a cello."),
    )
    with opened(db, monkeypatch, fake_openai) as scope:
        agent_chat(scope, "ann").chat_with_memory("I play the cello")
        bob = agent_chat(scope, "bob")
        bob.chat_with_memory("What do I play?")
        assert bob.agent.core.get("human").value == ""
        [results] = [tool_results(b) for b in agent_requests(fake_openai)[-1:]]
        assert not any("cello" in line for line in results[-1]["content"]["results"])  # ann's messages are not bob's
        assert "cello" not in agent_requests(fake_openai)[-1]["messages"][0]["content"]


def test_streaming_and_async(db: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> None:
    import asyncio

    fake_openai.queue_replies(say("One two three four."), say("Five six."))
    with opened(db, monkeypatch, fake_openai) as scope:
        chat = agent_chat(scope)
        pieces = list(chat.chat_with_memory("count", stream=True))
        assert "".join(p.delta for p in pieces) == "One two three four." and len(pieces) == 4

        async def ask() -> str:
            response = await chat.achat_with_memory("go on")
            return str(response.message.content)

        assert asyncio.run(ask()) == "Five six."


def test_background_consolidation_feeds_archival_search(
    db: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer
) -> None:
    from memoryscope.testing.consolidation_script import ConsolidationScript

    script = ConsolidationScript(user=USER)
    script.say("I play the guitar every evening", score=3, facts=[("ann plays the guitar", "guitar")])
    script.install(fake_openai)  # answers the consolidation workers once the scripted steps are used up
    fake_openai.queue_replies(say("Nice!"))
    with opened(db, monkeypatch, fake_openai) as scope:
        chat = agent_chat(scope)
        chat.chat_with_memory("I play the guitar every evening")
        scope.default_service.run_operation("consolidate_memory", USER)
        assert [r.memory for r in scope.get_all(USER, types=[MemoryType.OBSERVATION])] == ["ann plays the guitar"]
        fake_openai.queue_replies(
            step(call("archival_memory_search", heartbeat=True, query="instrument guitar")), say("The guitar.")
        )
        chat.chat_with_memory("What do I play?")
        [*_, found] = tool_results(agent_requests(fake_openai)[-1])
        assert any("ann plays the guitar" in line for line in found["content"]["results"])


def test_a_model_that_cannot_call_functions_is_refused_at_config_check(tmp_path: Path) -> None:
    config = tmp_path / "no-tools.yaml"
    config.write_text("extends: agent\nmodel:\n  generation_model:\n    function_calling: false\n", encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(str(config))
    message = str(refused.value)
    assert "memory_chat.agent_memory_chat.generation_model" in message and "function_calling: false" in message


def test_the_agent_config_and_its_chinese_version_check(
    monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    for name in ("agent", "agent_zh"):
        config = load_config(name)
        assert config.server.chat == "agent_memory_chat"
        assert "agent_memory_chat" in config.chats
    scope = agent_scope(tmp_path / "zh.db", monkeypatch, fake_openai, config="agent_zh")
    try:
        agent = agent_chat(scope, "用户").agent
        assert "温暖" in agent.core.get("persona").value and "助手" in agent.core.get("persona").value
        assert "核心记忆" in agent.main_context()[0]["content"]
    finally:
        scope.close(timeout=5)
