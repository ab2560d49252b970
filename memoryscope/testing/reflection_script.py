"""A scripted LLM for the reflection workers' prompts, served by `FakeOpenAIServer`.

It reads each prompt the way a model would and answers from a script: which attribute
(subject) a kind of fact reveals, which value an attribute takes from the facts it sees, and
which older memory a new fact contradicts or repeats. Tests run the real workers, the real
`openai_like` client and real HTTP, and assert on what lands in the store::

    script = ReflectionScript()
    script.subject("guitar", "hobby")                      # facts with "guitar" reveal a hobby
    script.value("hobby", "guitar", "playing the guitar")  # ... whose value is this
    script.verdict("Beijing", "moved to Hangzhou", "contradiction")
    with FakeOpenAIServer() as server:
        script.install(server)
        ...

`garbage(worker, count)` answers that worker's next `count` requests (repair requests
included) with chatter; `calls` counts requests per worker.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from memoryscope.testing.fake_openai import FakeOpenAIServer

__all__ = ["ReflectionScript", "REFLECTION_MARKERS", "GARBAGE"]

# How each worker's prompt (its first user message) ends, in English and Chinese.
REFLECTION_MARKERS: dict[str, tuple[str, ...]] = {
    "get_reflection_subject": ("New attributes (JSON array):", "新属性（JSON 数组）："),
    "update_insight": ("Values (JSON object):", "属性值（JSON 对象）："),
    "long_contra_repeat": ("Judgments (JSON array):", "判断（JSON 数组）："),
}
GARBAGE = "Hmm, let me think about what you mean here. Could you tell me more?"
_OBSERVATION_LINE = re.compile(r"^(?:\d+|O\d+)\. (.*)$")
_ATTRIBUTE_LINE = re.compile(r"^(\d+)\. (.+?) ?[(（](?:current value|当前值)[:：]")
_FACT_LINE = re.compile(r"^(N?)(\d+)\. (.*)$")
_EXISTING = re.compile(r"(?:Existing attributes of .+?: |已有的属性：)(.*)$", re.MULTILINE)


@dataclass
class ReflectionScript:
    """What the scripted model knows; `language` picks the words of its judgments."""

    language: str = "en"
    subjects: dict[str, str] = field(default_factory=dict)  # word in a fact -> attribute it reveals
    values: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # attribute -> [(word, value)]
    verdicts: list[tuple[str, str, str]] = field(default_factory=list)  # (word in old, word in new, judgment)
    calls: Counter[str] = field(default_factory=Counter)
    _garbage: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- scripting --

    def subject(self, word: str, attribute: str) -> None:
        """Facts containing `word` reveal `attribute` (named when the profile lacks it)."""
        self.subjects[word] = attribute

    def value(self, attribute: str, word: str, value: str) -> None:
        """Asked for `attribute`, a fact containing `word` gives `value` (the newest such fact wins)."""
        self.values.setdefault(attribute, []).append((word, value))

    def verdict(self, old_word: str, new_word: str, judgment: str) -> None:
        """An older memory containing `old_word` is `judgment` ("contradiction" / "repeat", or
        矛盾 / 重复) by a new fact containing `new_word`."""
        self.verdicts.append((old_word, new_word, judgment))

    def garbage(self, worker: str, count: int = 1) -> None:
        with self._lock:
            self._garbage[worker] += count

    def install(self, server: FakeOpenAIServer) -> None:
        markers = [re.escape(marker) for group in REFLECTION_MARKERS.values() for marker in group]
        server.add_rule(re.compile("|".join(markers)), self.reply, target="prompt")

    # -- answering --

    def reply(self, body: dict[str, Any]) -> str:
        prompt = _first_user_message(body)
        worker = next((name for name, marks in REFLECTION_MARKERS.items() if any(mark in prompt for mark in marks)), "")
        with self._lock:
            self.calls[worker] += 1
            if self._garbage[worker] > 0:
                self._garbage[worker] -= 1
                return GARBAGE
        if worker == "get_reflection_subject":
            return self._subjects(prompt)
        if worker == "update_insight":
            return self._values(prompt)
        return self._judgments(prompt)

    def _subjects(self, prompt: str) -> str:
        existing_line = _EXISTING.search(prompt)
        existing = existing_line.group(1) if existing_line else ""
        facts = " ".join(match.group(1) for line in prompt.splitlines() if (match := _OBSERVATION_LINE.match(line.strip())))
        named = [attribute for word, attribute in self.subjects.items() if word in facts and attribute not in existing]
        return "```json\n" + json.dumps(list(dict.fromkeys(named)), ensure_ascii=False) + "\n```"

    def _values(self, prompt: str) -> str:
        lines = [line.strip() for line in prompt.splitlines()]
        facts = [match.group(1) for line in lines if line.startswith("O") and (match := _OBSERVATION_LINE.match(line))]
        answer: dict[str, str] = {}
        for line in lines:
            match = _ATTRIBUTE_LINE.match(line)
            if not match:
                continue
            value = "unknown" if self.language == "en" else "未知"
            for fact in facts:  # oldest first: the newest match wins
                for word, told in self.values.get(match.group(2), []):
                    if word in fact:
                        value = told
            answer[match.group(1)] = value
        return json.dumps(answer, ensure_ascii=False)

    def _judgments(self, prompt: str) -> str:
        new: dict[int, str] = {}
        old: dict[int, str] = {}
        for line in prompt.splitlines():
            match = _FACT_LINE.match(line.strip())
            if match:
                (new if match.group(1) else old)[int(match.group(2))] = match.group(3)
        found = []
        for old_number, old_text in old.items():
            for new_number, new_text in new.items():
                judgment = next((verdict for was, now, verdict in self.verdicts if was in old_text and now in new_text), None)
                if judgment:
                    found.append({"old": old_number, "new": new_number, "judgment": judgment})
                    break
        return json.dumps(found, ensure_ascii=False)


def _first_user_message(body: dict[str, Any]) -> str:
    """The prompt itself, also when the last message is a repair request."""
    users = [message for message in body.get("messages", []) if isinstance(message, dict) and message.get("role") == "user"]
    return str(users[0].get("content", "")) if users else ""
