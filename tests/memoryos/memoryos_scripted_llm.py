"""What the MemoryOS tests share: a scripted LLM on the fake server, and times."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from memoryscope.testing.fake_openai import FakeOpenAIServer

T0 = datetime(2024, 10, 26, 12, 0, tzinfo=timezone.utc)
MID_MARKER = "Summaries of all"
LONG_MARKER = "Updated profile and new knowledge"
_SEGMENT = re.compile(r"^Segment (\d+)\nPrevious summary: (.*?)\nNew pages:\n(.*?)(?=\n\nSegment \d+\n|\Z)", re.S | re.M)
_QUESTION = re.compile(r"User: (.*?) Assistant:")


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


class Script:
    """The scripted model: segment summaries echo what the segment is about (its previous summary,
    else its first page's question), so similar pages keep joining it; the analysis says what
    `analysis` holds. `garbage_mid` / `garbage_long` answer that many requests with chatter."""

    def __init__(self, server: FakeOpenAIServer) -> None:
        self.server = server
        self.analysis: dict[str, Any] = {
            "profile": "Ann loves green tea.",
            "user_knowledge": ["Ann drinks green tea"],
            "assistant_knowledge": [],
        }
        self.garbage_mid = 0
        self.garbage_long = 0
        self.calls = {"mid": 0, "long": 0}
        self.block: Callable[[], None] | None = None
        # on the whole prompt, so a repair request (the answer, then "reply in the format") is scripted too
        server.add_rule(MID_MARKER, self._mid, target="prompt")
        server.add_rule(LONG_MARKER, self._long, target="prompt")

    def _mid(self, body: dict[str, Any]) -> str:
        self.calls["mid"] += 1
        if self.garbage_mid:
            self.garbage_mid -= 1
            return "I am not sure."
        text = next(message["content"] for message in body["messages"] if MID_MARKER in message["content"])
        segments = []
        for number, previous, pages in _SEGMENT.findall(text):
            first = _QUESTION.search(pages)
            summary = previous or (first.group(1) if first else "chat")
            segments.append({"segment": int(number), "summary": summary, "keywords": summary.split()[:3]})
        return json.dumps({"segments": segments})

    def _long(self, body: dict[str, Any]) -> str:
        self.calls["long"] += 1
        if self.block is not None:
            self.block()
        if self.garbage_long:
            self.garbage_long -= 1
            return "Here is what I think about the user: they are nice."
        return json.dumps(self.analysis)
