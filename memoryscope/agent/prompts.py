"""The texts of the context-window manager (English and Chinese): the memory-pressure warning and
the prompt that folds evicted messages into the recursive summary.

An unknown language falls back to English.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["LANGUAGES", "memory_pressure_warning", "summary_prompt", "render_messages"]

LANGUAGES = ("en", "zh")

_WARNING = {
    "en": "[memory pressure] The conversation has nearly filled your context window. Soon its oldest messages will "
    "leave the window and be replaced by a summary (they stay findable with conversation_search). Save what matters "
    "now: facts about the user or yourself with core_memory_append or core_memory_replace, anything else worth "
    "keeping with archival_memory_insert.",
    "zh": "[内存压力] 对话几乎占满了你的上下文窗口。最早的消息很快会移出窗口，由一段总结代替（仍可用 conversation_search 找到）。"
    "现在就保存重要的信息：关于用户或你自己的事实用 core_memory_append 或 core_memory_replace，其他值得保留的内容用 "
    "archival_memory_insert。",
}

_SUMMARY_SYSTEM = {
    "en": "You keep the running summary of a conversation between a user and an AI assistant with a long-term memory. "
    "The oldest messages are leaving the assistant's context window; you fold them into the summary.",
    "zh": "你负责维护用户与一个拥有长期记忆的 AI 助手之间对话的滚动总结。"
    "最早的消息正在移出助手的上下文窗口，你要把它们并入总结。",
}

_SUMMARY_USER = {
    "en": """Summary so far:
{summary}

Messages leaving the context window, oldest first:
{messages}

Write the updated summary of the whole conversation so far: the summary so far together with these messages. \
Keep what the user said about themselves, their requests and decisions, what the assistant did, found or promised, \
and questions still open; leave out greetings and repetition. Write in the third person, as plain text, in at most \
{limit} words, without a preamble.""",
    "zh": """目前的总结：
{summary}

正在移出上下文窗口的消息（从早到晚）：
{messages}

写出到目前为止整个对话的最新总结：把目前的总结与这些消息合在一起。保留用户关于自己说过的话、用户的请求和决定、\
助手做过、查到或答应的事，以及仍未解决的问题；省略寒暄和重复。用第三人称、纯文本书写，不超过 {limit} 字，不要开场白。""",
}

_NO_SUMMARY = {"en": "(none yet)", "zh": "（暂无）"}

# how a message is introduced in the summary prompt
_LABELS = {
    "en": {"user": "user", "assistant": "assistant", "system": "system", "call": "assistant called", "result": "result of"},
    "zh": {"user": "用户", "assistant": "助手", "system": "系统", "call": "助手调用", "result": "结果，来自"},
}


def _language(language: str) -> str:
    return language if language in LANGUAGES else "en"


def memory_pressure_warning(language: str = "en") -> str:
    """The system message that tells the agent its context window is nearly full (MemGPT's warning)."""
    return _WARNING[_language(language)]


def summary_prompt(previous_summary: str, rendered_messages: str, limit: int, language: str = "en") -> tuple[str, str]:
    """(system, user) texts asking for the recursive summary; `limit` is in words (English) or characters (Chinese)."""
    lang = _language(language)
    user = _SUMMARY_USER[lang].format(
        summary=previous_summary.strip() or _NO_SUMMARY[lang], messages=rendered_messages, limit=limit
    )
    return _SUMMARY_SYSTEM[lang], user


def render_messages(messages: Sequence[Mapping[str, Any]], language: str = "en") -> list[str]:
    """One readable line (or paragraph) per message and per tool call, oldest first.

    A user-role message in MemGPT's packed form (a JSON object with `type`, `message`, `time`)
    is unpacked; a tool call shows as `name(key=value, ...)`; a tool result names its function.
    """
    labels = _LABELS[_language(language)]
    called: dict[str, str] = {}  # tool_call_id -> function name, for results that do not name it
    lines: list[str] = []
    for message in messages:
        role = str(message.get("role") or "")
        content = _text(message.get("content"))
        if role == "tool":
            name = str(message.get("name") or called.get(str(message.get("tool_call_id")), "a function"))
            lines.append(f"{labels['result']} {name}: {content}")
            continue
        if role == "user":
            content = _unpacked(content)
        if content.strip():
            lines.append(f"{labels.get(role, role)}: {content}")
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            name = str(function.get("name") or "")
            called[str(call.get("id"))] = name
            lines.append(f"{labels['call']} {name}({_arguments(function.get('arguments'))})")
    return lines


def _text(content: Any) -> str:
    """A message's content as text: a string, the text parts of a list of parts, or nothing."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return json.dumps(content, ensure_ascii=False)


def _unpacked(content: str) -> str:
    """`{"type": "user_message", "message": "hi", "time": "..."}` -> `(time) hi`; other text as is."""
    try:
        packet = json.loads(content)
    except ValueError:
        return content
    if not isinstance(packet, dict) or "type" not in packet:
        return content
    when = f"({packet['time']}) " if packet.get("time") else ""
    if packet["type"] == "user_message" and "message" in packet:
        return f"{when}{packet['message']}"
    detail = packet.get("message") or packet.get("reason") or ""
    return f"{when}[{packet['type']}] {detail}".rstrip()


def _arguments(arguments: Any) -> str:
    """JSON arguments as `key=value, ...`; arguments that are not a JSON object as they came."""
    try:
        loaded = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return str(arguments)
    if not isinstance(loaded, dict):
        return str(arguments or "")
    return ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in loaded.items())
