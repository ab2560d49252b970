"""The system prompt of a chat turn: who is who, the time, and what is remembered.

Its parts may be replaced per call as MemoryScope 0.1.x allowed: `system_prompt` replaces the
introduction (who the assistant is, the time; a chat's `system_prompt` param sets it for every
turn), `memory_prompt` the words put before the memories, and `temporary_memories` are added
after the retrieved ones for this call only. In an introduction, `{assistant}`, `{user}` and
`{now}` are filled in; any other braces (JSON, `{topic}`) are left as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SystemPrompt", "NO_MEMORIES", "fill_placeholders"]

_PLACEHOLDER = re.compile(r"\{(assistant|user|now)\}")

INTRODUCTIONS = {
    "en": "You are {assistant}, a helpful assistant with long-term memory of the user, {user}.\nThe current time is {now}.",
    "zh": "你是{assistant}，一个拥有用户（{user}）长期记忆的助手。\n现在的时间是 {now}。",
}
MEMORY_HEADERS = {
    "en": 'What you remember about the user (time-stamped, most relevant first; "{assistant}:" after the time '
    "marks a reply you gave):",
    "zh": "你记得的关于用户的信息（带时间，最相关的在前；时间后标有“{assistant}:”的是你之前的回复）：",
}
MEMORY_FOOTERS = {
    "en": "Use these memories when they help; do not invent memories.",
    "zh": "在有帮助时使用这些记忆；不要编造记忆。",
}
NO_MEMORIES = {"en": "(nothing yet)", "zh": "（暂无）"}


@dataclass(frozen=True)
class SystemPrompt:
    """The parts of one turn's system prompt; `text()` joins them."""

    language: str
    assistant: str
    user: str
    now: str
    memories: tuple[str, ...] = ()
    system_prompt: str | None = None  # replaces the introduction
    memory_prompt: str | None = None  # replaces the words before the memories (and the advice after)
    temporary_memories: str | None = None  # added after the memories, this turn only

    def text(self) -> str:
        introduction = fill_placeholders(
            INTRODUCTIONS[self.language] if self.system_prompt is None else self.system_prompt,
            assistant=self.assistant,
            user=self.user,
            now=self.now,
        )
        remembered = list(self.memories)
        if self.temporary_memories and self.temporary_memories.strip():
            remembered.append(self.temporary_memories.strip())
        if self.memory_prompt is not None:
            # 0.1.x's form: the memory prompt and the memories, only when there are memories
            parts = [introduction, self.memory_prompt, *remembered] if remembered else [introduction]
        else:
            body = "\n".join(remembered) or NO_MEMORIES[self.language]
            header = fill_placeholders(MEMORY_HEADERS[self.language], assistant=self.assistant, user=self.user, now=self.now)
            parts = [introduction, header, body, MEMORY_FOOTERS[self.language]]
        return "\n".join(part.strip() for part in parts if part.strip())


def fill_placeholders(template: str, *, assistant: str, user: str, now: str) -> str:
    """`template` with `{assistant}`, `{user}` and `{now}` replaced; other braces left as they are."""
    values = {"assistant": assistant, "user": user, "now": now}
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)
