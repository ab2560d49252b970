"""The agent behind the server's OpenAI-compatible chat endpoint (`memoryscope serve --config agent`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from agent_stage import agent_scope, call, say, step

from memoryscope.testing.fake_openai import FakeOpenAIServer

pytest.importorskip("fastapi", reason="the server tests need the server extra: pip install 'memoryscope[server]'")


def test_the_chat_endpoint_answers_with_what_the_agent_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer
) -> None:
    from memoryscope.server.app import create_app
    from memoryscope.testing.live_server import LiveServer

    scope = agent_scope(tmp_path / "served.db", monkeypatch, fake_openai)
    fake_openai.queue_replies(
        step(call("core_memory_append", heartbeat=True, label="human", content="Ann plays the cello.")),
        say("Noted, Ann."),
        say("You play the cello."),
    )
    with LiveServer(create_app(scope)) as live:
        said = {"model": "memoryscope", "user": "ann", "messages": [{"role": "user", "content": "I play the cello"}]}
        reply = requests.post(f"{live.url}/v1/chat/completions", json=said, timeout=60)
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"] == "Noted, Ann."

        asked = {**said, "stream": True, "messages": [{"role": "user", "content": "What do I play?"}]}
        with requests.post(f"{live.url}/v1/chat/completions", json=asked, stream=True, timeout=60) as streamed:
            events = [line[6:] for line in streamed.iter_lines(decode_unicode=True) if line.startswith("data: ")]
        chunks = [json.loads(event) for event in events if event != "[DONE]"]
        pieces = [chunk["choices"][0]["delta"].get("content", "") for chunk in chunks if chunk["choices"]]
        assert "".join(pieces) == "You play the cello."
        assert scope.chats["agent_memory_chat"].agent_for("ann").core.get("human").value == "Ann plays the cello."
