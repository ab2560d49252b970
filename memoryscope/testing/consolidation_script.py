"""A scripted LLM for the consolidation workers' prompts, served by `FakeOpenAIServer`.

It reads the numbered lines of each prompt the way a model would and answers from a script:
how informative each message is, which facts each message gives, and which new fact repeats or
contradicts which other one. So tests run the real workers, the real `openai_like` client and
real HTTP, and assert on what lands in the store::

    script = ConsolidationScript(user="ann")
    script.say("I play the guitar every evening", score=3, facts=[("ann plays the guitar", "guitar")])
    script.say("I went hiking last Saturday", score=3, facts=[("ann went hiking", "hiking", "2024-10-19")])
    script.verdict("ann does not drink coffee", "contradict", "ann likes coffee")
    with FakeOpenAIServer() as server:
        script.install(server)
        ...

Faults: `garbage(worker, count)` answers that worker's next `count` requests (repair requests
included) with chatter; `hold(worker)` makes its next request wait until `release()`, so a test
can kill a process mid-run; `after(worker, action)` calls `action()` once that worker's next
request is answered (e.g. `server.fail_next` to fail the requests after it). `calls` counts
requests per worker.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memoryscope.testing.fake_openai import FakeOpenAIServer

__all__ = ["ConsolidationScript", "WORKER_MARKERS"]

# How each worker's data message (its first user message) begins, in English and Chinese.
WORKER_MARKERS: dict[str, tuple[str, ...]] = {
    "info_filter": ("Sentences:", "句子："),
    "get_observation_with_time": ("Messages (each with the time", "消息（每条带有说话时间）"),
    "get_observation": ("Messages:", "消息："),
    "contra_repeat": ("Known facts:", "已知事实："),
}
_MESSAGE_LINE = re.compile(r"^(\d+) (?:\[[^\]]*\] )?(.+?)[:：] ?(.*)$")
_FACT_LINE = re.compile(r"^(\d+) \[[^\]]*\] (.*)$")
_VERDICT_WORDS = {"en": {"repeat": "repeat", "contradict": "contradict"}, "zh": {"repeat": "重复", "contradict": "矛盾"}}
GARBAGE = "Sorry, I am not sure what you would like me to do here."


@dataclass
class _Said:
    score: int
    facts: list[dict[str, str]]


@dataclass
class ConsolidationScript:
    """What the scripted model knows. `language` picks the words of its contra_repeat verdicts."""

    user: str = "user"
    language: str = "en"
    messages: dict[str, _Said] = field(default_factory=dict)
    verdicts: dict[str, tuple[str, str]] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)
    _garbage: Counter[str] = field(default_factory=Counter)
    _held: dict[str, threading.Event] = field(default_factory=dict)
    _holding: list[threading.Event] = field(default_factory=list)  # requests held now, waiting for `release()`
    reached: dict[str, threading.Event] = field(default_factory=dict)
    _after: dict[str, Callable[[], None]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- scripting --

    def say(self, text: str, score: int, facts: Sequence[tuple[str, ...]] = ()) -> None:
        """`text` (a user message) scores `score`; it gives `facts`: (content, keywords[, time])."""
        items = [{"content": fact[0], "keywords": fact[1] if len(fact) > 1 else "", "time": fact[2] if len(fact) > 2 else ""}
                 for fact in facts]  # fmt: skip
        self.messages[text] = _Said(score, items)

    def verdict(self, new_fact: str, verdict: str, other_fact: str) -> None:
        """When `new_fact` is shown beside `other_fact`, answer `repeat` or `contradict` it."""
        self.verdicts[new_fact] = (verdict, other_fact)

    def garbage(self, worker: str, count: int = 1) -> None:
        with self._lock:
            self._garbage[worker] += count

    def hold(self, worker: str) -> threading.Event:
        """Make `worker`'s next request wait for `release()`; the returned event is set when it arrives."""
        with self._lock:
            self._held[worker] = threading.Event()
            self.reached[worker] = threading.Event()
            return self.reached[worker]

    def after(self, worker: str, action: Callable[[], None]) -> None:
        with self._lock:
            self._after[worker] = action

    def release(self) -> None:
        with self._lock:
            for event in (*self._held.values(), *self._holding):  # not yet reached, and already waiting
                event.set()

    def install(self, server: FakeOpenAIServer) -> None:
        """Answer every chat on `server` from this script."""
        server.add_rule(re.compile(""), self.reply)

    # -- answering --

    def reply(self, body: dict[str, Any]) -> str:
        users = [str(message.get("content", "")) for message in body.get("messages", []) if message.get("role") == "user"]
        first = users[0] if users else ""
        worker = next((name for name, marks in WORKER_MARKERS.items() if any(first.startswith(m) for m in marks)), "")
        with self._lock:
            self.calls[worker] += 1
            held = self._held.pop(worker, None)
            if held is not None:
                self._holding.append(held)
            reached = self.reached.get(worker)
            garbage = self._garbage[worker] > 0
            if garbage:
                self._garbage[worker] -= 1
            action = self._after.pop(worker, None)
        if held is not None and reached is not None:
            reached.set()
            held.wait(timeout=30)
        if garbage or not worker:
            answer = GARBAGE
        elif worker == "info_filter":
            answer = self._scores(first)
        elif worker == "contra_repeat":
            answer = self._verdicts(first)
        else:
            answer = self._facts(first, with_time=worker == "get_observation_with_time")
        if action is not None:
            action()
        return answer

    def _lines(self, text: str) -> list[tuple[int, str]]:
        return [(int(match[1]), match[3]) for line in text.splitlines() if (match := _MESSAGE_LINE.match(line))]

    def _scores(self, text: str) -> str:
        said = self.messages
        return "\n".join(f"{number}: {said[line].score if line in said else 0}" for number, line in self._lines(text))

    def _facts(self, text: str, with_time: bool) -> str:
        items = []
        for number, line in self._lines(text):
            for fact in self.messages[line].facts if line in self.messages else []:
                item = {"message": number, "content": fact["content"], "keywords": fact["keywords"]}
                if with_time:
                    item["time"] = fact["time"]
                items.append(item)
        return "```json\n" + json.dumps(items, ensure_ascii=False) + "\n```"

    def _verdicts(self, text: str) -> str:
        marker = "新事实：" if "新事实：" in text else "New facts:"
        numbers = {match[2]: int(match[1]) for line in text.splitlines() if (match := _FACT_LINE.match(line))}
        new_part = text.split(marker, 1)[1]
        words = _VERDICT_WORDS.get(self.language, _VERDICT_WORDS["en"])
        keep = "保留" if self.language == "zh" else "keep"
        answer = []
        for line in new_part.splitlines():
            match = _FACT_LINE.match(line)
            if match is None:
                continue
            verdict = self.verdicts.get(match[2])
            if verdict is not None and verdict[1] in numbers:
                answer.append(f"{match[1]}: {words[verdict[0]]} {numbers[verdict[1]]}")
            else:
                answer.append(f"{match[1]}: {keep}")
        return "\n".join(answer)
