"""mem0's README quick start, with only its import line changed, against the fake OpenAI-compatible
server: set up as a mem0 user does (OPENAI_API_KEY, OPENAI_BASE_URL), the LLM learns facts in
`add`, and the next turn's `search` puts them in the prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer

FACT = "alice plays the guitar every evening"


def test_the_readme_quick_start_runs_with_only_the_import_changed(
    store_path: Path, fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-mem0-user")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    fake_openai.add_rule("You are a helpful AI.", "Noted!", target="prompt")  # the quick start's own chat
    script = ConsolidationScript(user="alice")
    script.say("I play the guitar every evening", score=3, facts=[(FACT, "guitar")])
    script.install(fake_openai)  # the consolidation prompts

    # ---- mem0's README, verbatim but for the import line ----
    from openai import OpenAI

    from memoryscope.mem0 import Memory  # was: from mem0 import Memory

    openai_client = OpenAI()
    memory = Memory()

    def chat_with_memories(message: str, user_id: str = "default_user") -> str:
        # Retrieve relevant memories
        relevant_memories = memory.search(query=message, filters={"user_id": user_id}, top_k=3)
        memories_str = "\n".join(f"- {entry['memory']}" for entry in relevant_memories["results"])

        # Generate Assistant response
        system_prompt = f"You are a helpful AI. Answer the question based on query and memories.\nUser Memories:\n{memories_str}"
        messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": message}]
        response = openai_client.chat.completions.create(model="gpt-5-mini", messages=messages)
        assistant_response = response.choices[0].message.content

        # Create new memories from the conversation
        messages.append({"role": "assistant", "content": assistant_response})
        memory.add(messages, user_id=user_id)

        return assistant_response

    # ---- the loop, two turns ----
    try:
        assert chat_with_memories("I play the guitar every evening", user_id="alice") == "Noted!"
        assert chat_with_memories("What do I do in the evening?", user_id="alice") == "Noted!"
        learnt = memory.get_all(filters={"user_id": "alice"})["results"]
    finally:
        memory.close()

    chats = [request.body for request in fake_openai.requests if request.path.endswith("/chat/completions")]
    turns = [body for body in chats if "You are a helpful AI." in body["messages"][0]["content"]]
    assert len(turns) == 2
    assert turns[0]["messages"][0]["content"].endswith("User Memories:\n")  # nothing known yet
    assert f"- {FACT}" in turns[1]["messages"][0]["content"]  # learnt in the first add, found by the second search
    # consolidation called the model mem0 calls by default, with the user's key, at OPENAI_BASE_URL
    consolidation = [body for body in chats if body not in turns]
    assert consolidation and {body["model"] for body in consolidation} == {"gpt-5-mini"}
    keys = {r.api_key_suffix for r in fake_openai.requests if r.path.endswith("/chat/completions")}
    assert keys == {"user"}  # the last 4 characters of sk-mem0-user
    assert FACT in [item["memory"] for item in learnt]
    assert store_path.exists()


def test_add_answers_with_the_facts_the_llm_learnt(
    store_path: Path, fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-mem0-user")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    script = ConsolidationScript(user="alice")
    script.say("I moved to Kyoto last month", score=3, facts=[("alice lives in Kyoto", "Kyoto")])
    script.install(fake_openai)
    from memoryscope.mem0 import Memory

    with Memory() as memory:
        added = memory.add("I moved to Kyoto last month", user_id="alice")
        kept_as_given = memory.add("alice's cat is called Mochi", user_id="alice", infer=False)
    assert [(item["memory"], item["event"]) for item in added["results"]] == [("alice lives in Kyoto", "ADD")]
    assert [item["memory"] for item in kept_as_given["results"]] == ["alice's cat is called Mochi"]
