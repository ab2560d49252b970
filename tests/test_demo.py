"""The README's main job: `memoryscope demo`, offline."""

from __future__ import annotations

import re

from memoryscope.demo import run_demo


def test_demo_remembers_the_conversation_and_answers_with_time_stamped_memories() -> None:
    lines: list[str] = []
    assert run_demo(echo=lines.append) == 0
    text = "\n".join(lines)
    assert "Remembering 12 messages of Lin over 4 sessions" in text
    assert "[4/4] 2024-10-26: stored 3 messages" in text
    answer = text.split("Q: What instrument do I play?")[1].split("Q:")[0]
    assert re.match(r"\s+\[2024-10-05 19:12:00 Sat\] I finally bought a secondhand acoustic guitar", answer.splitlines()[1])
    cat = text.split("Q: What is my cat's name?")[1].split("Q:")[0]
    assert "Mochi" in cat.splitlines()[1]
    coffee = text.split("Q: 我早上喝什么？")[1].split("Q:")[0]
    assert "手冲咖啡" in coffee.splitlines()[1]
