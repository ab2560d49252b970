"""The demo tour with an LLM: the fake OpenAI-compatible server plays the model, scripted per prompt."""

from __future__ import annotations

import pytest

from memoryscope.demo import load_demo_conversation, run_demo
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.testing.reflection_script import ReflectionScript


def test_demo_consolidates_reflects_and_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    conversation = load_demo_conversation()
    facts = {
        "guitar": ("Lin plays an acoustic guitar, a Yamaha FG800", "guitar"),
        "peanuts": ("Lin is allergic to peanuts", "allergy peanuts"),
        "10 kilometres": ("Lin ran 10 kilometres along the river", "running", "2024-10-11"),
        "half marathon": ("Lin is training for the Shanghai half marathon", "running marathon"),
        "data engineer": ("Lin works as a data engineer at a logistics startup", "job"),
        "Mochi": ("Lin adopted a grey cat named Mochi", "cat Mochi"),
    }
    consolidation = ConsolidationScript(user="Lin")
    for session in conversation["sessions"]:
        for text in session["messages"]:
            fact = next((value for word, value in facts.items() if word in text), None)
            consolidation.say(text, score=3 if fact else 1, facts=[fact] if fact else [])
    reflection = ReflectionScript()
    reflection.subject("guitar", "hobby")
    reflection.value("hobby", "guitar", "playing the guitar")
    reflection.subject("data engineer", "job")
    reflection.value("job", "data engineer", "data engineer")

    with FakeOpenAIServer() as server:
        # first matching rule wins: the reflection prompts and the chat question, then the
        # consolidation script, which answers everything else
        reflection.install(server)
        server.add_rule("What instrument do I play?", "You play the guitar, a Yamaha FG800.")
        consolidation.install(server)
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", server.base_url)
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-demo")
        monkeypatch.setenv("MEMORYSCOPE_TIMEZONE", "Asia/Shanghai")  # shown in Lin's zone: dates as she said them
        lines: list[str] = []
        assert run_demo(echo=lines.append) == 0
        reply_prompts = {
            body["messages"][-1]["content"]: body["messages"]
            for body in (r.body for r in server.requests if r.path.endswith("/chat/completions"))
            if body["messages"][0]["role"] == "system"
        }

    text = "\n".join(lines)
    assert "no LLM configured" not in text
    assert "What MemoryScope now knows:" in text
    known = text.split("What MemoryScope now knows:")[1].split("\nQ:")[0]
    assert "Lin is allergic to peanuts" in known
    assert "hobby" in known and "playing the guitar" in known
    assert "[2024-10-11" in known  # the run's event time, from "Yesterday I ran ..." said on 2024-10-12
    answer = text.split("Q: What instrument do I play?")[1].split("\nQ:")[0]
    assert "A: You play the guitar, a Yamaha FG800." in answer
    assert consolidation.calls["info_filter"] >= 1
    assert reflection.calls["update_insight"] >= 1

    # each reply answers from Lin's memories (those printed above it), and no question becomes a memory
    questions = [question["query"] for question in conversation["questions"]]
    assert set(questions) <= set(reply_prompts)
    for question in questions:
        system = reply_prompts[question][0]["content"]
        assert "of the user, Lin." in system
        assert "(nothing yet)" not in system
        memory_lines = [line for line in system.splitlines() if line.startswith("[")]
        assert memory_lines
        assert not [line for line in memory_lines if any(asked in line for asked in questions)]
        assert [message["role"] for message in reply_prompts[question]] == ["system", "user"]  # no earlier questions
    guitar = reply_prompts["What instrument do I play?"][0]["content"]
    assert "Yamaha FG800" in guitar
