"""A scripted LLM for the MemoryOS workers' prompts (`memoryos_mid_term`, `memoryos_long_term`),
served by `FakeOpenAIServer`, in English and Chinese.

It answers the way a model would in shape: each segment's summary is its previous summary, else
the first question of its new pages (so pages on one topic keep finding their segment); the
analysis of a hot segment writes a profile naming the topic and one user fact. `calls` counts the
requests per worker::

    script = MemoryosScript()
    with FakeOpenAIServer() as server:
        script.install(server)
        ...
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from memoryscope.testing.fake_openai import FakeOpenAIServer

__all__ = ["MemoryosScript", "MEMORYOS_MARKERS"]

# How each worker's data message ends, in English and Chinese (see workers/prompts/memoryos_*.yaml).
MEMORYOS_MARKERS: dict[str, tuple[str, ...]] = {
    "memoryos_mid_term": ("Summaries of all", "个片段的摘要（JSON）"),
    "memoryos_long_term": ("Updated profile and new knowledge", "更新后的画像和新知识"),
}
_SEGMENT = re.compile(
    r"^(?:Segment|片段) (\d+)\n(?:Previous summary: |之前的摘要：)(.*?)\n(?:New pages:|新的对话页：)\n"
    r"(.*?)(?=\n\n(?:Segment|片段) \d+\n|\n[^\n]*(?:Summaries of all|个片段的摘要)|\Z)",
    re.S | re.M,
)
_QUESTION = re.compile(r"(?:User: |用户：)(.*?)(?: (?:Assistant: |助手：)|\n|$)")
_TOPIC = re.compile(r"^(?:Topic: |话题：)(.*)$", re.M)


@dataclass
class MemoryosScript:
    """What the scripted model answers; `calls` counts requests by worker name."""

    summary_chars: int = 200
    calls: Counter[str] = field(default_factory=Counter)

    def install(self, server: FakeOpenAIServer) -> None:
        for marker in MEMORYOS_MARKERS["memoryos_mid_term"]:
            server.add_rule(marker, self._summaries, target="prompt")
        for marker in MEMORYOS_MARKERS["memoryos_long_term"]:
            server.add_rule(marker, self._analysis, target="prompt")

    def _summaries(self, body: dict[str, Any]) -> str:
        self.calls["memoryos_mid_term"] += 1
        text = _data_message(body, "memoryos_mid_term")
        segments = []
        for number, previous, pages in _SEGMENT.findall(text):
            first = _QUESTION.search(pages)
            summary = (previous or (first.group(1) if first else "") or "chat").strip()[: self.summary_chars]
            segments.append({"segment": int(number), "summary": summary, "keywords": summary.split()[:4]})
        return json.dumps({"segments": segments}, ensure_ascii=False)

    def _analysis(self, body: dict[str, Any]) -> str:
        self.calls["memoryos_long_term"] += 1
        found = _TOPIC.search(_data_message(body, "memoryos_long_term"))
        topic = found.group(1).strip() if found else "chat"
        answer = {"profile": f"The user talks about: {topic[:120]}", "user_knowledge": [topic[:160]], "assistant_knowledge": []}
        return json.dumps(answer, ensure_ascii=False)


def _data_message(body: dict[str, Any], worker: str) -> str:
    """The prompt's data message (a repair request repeats it before asking again)."""
    markers = MEMORYOS_MARKERS[worker]
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str) and any(marker in content for marker in markers):
            return content
    return ""
