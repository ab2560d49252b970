"""The README's main job: `memoryscope demo`, offline."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memoryscope.cli import main
from memoryscope.demo import run_demo


def test_demo_remembers_the_conversation_and_answers_with_time_stamped_memories(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH"):
        monkeypatch.delenv(name, raising=False)  # the README's main job runs offline
    lines: list[str] = []
    assert run_demo(echo=lines.append) == 0
    text = "\n".join(lines)
    assert "Remembering 12 messages of Lin over 4 sessions" in text
    assert "[4/4] 2024-10-26: stored 3 messages" in text
    answer = text.split("Q: What instrument do I play?")[1].split("Q:")[0]
    # said at 19:12 in Shanghai, shown in the config's zone (UTC), as `memoryscope run` shows it
    assert re.match(r"\s+\[2024-10-05 11:12:00 Sat\] I finally bought a secondhand acoustic guitar", answer.splitlines()[1])
    assert "times are shown in UTC" in text
    cat = text.split("Q: What is my cat's name?")[1].split("Q:")[0]
    assert "Mochi" in cat.splitlines()[1]
    coffee = text.split("Q: 我早上喝什么？")[1].split("Q:")[0]
    assert "手冲咖啡" in coffee.splitlines()[1]


def test_a_kept_demo_store_shows_the_same_times_in_memoryscope_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMORYSCOPE_TIMEZONE", "Asia/Shanghai")  # the user's own zone
    store = str(tmp_path / "demo.db")
    assert main(["demo", "--store", store]) == 0
    demo = capsys.readouterr().out
    assert main(["run", "list_memory", "--store", store, "--user", "Lin"]) == 0
    listing = capsys.readouterr().out
    shown = "[2024-10-05 19:12:00 Sat] I finally bought a secondhand acoustic guitar"
    assert shown in demo and shown in listing
    assert "times are shown in" not in demo  # the user's zone is the conversation's
