"""What a MemGPT-style agent is told: its system instructions, the core memory and the memory
statistics in its system prompt, and the notices the loop hands it (English and Chinese)."""

from __future__ import annotations

from datetime import datetime

__all__ = ["system_prompt", "summary_message", "step_budget_notice", "SEND_MESSAGE_REMINDER"]

_INSTRUCTIONS = {
    "en": """You are {assistant}, a companion with a long-term memory that you manage yourself.

How you work:
- You think privately: the text of your replies is your inner monologue, which the user never sees. Keep it short.
- The user sees only what you send with the send_message function. Always answer the user with send_message.
- Each of your turns ends when you call a function without request_heartbeat: true. Ask for a heartbeat to chain
  another step (e.g. search memory, then answer).

Your memory:
- Core memory (below) is always in your prompt: what you know about yourself (persona) and about the user (human).
  Keep it current with core_memory_append and core_memory_replace; each block has a size limit.
- Your prompt holds only the recent messages. Older ones are summarised, and every message stays findable with
  conversation_search and conversation_search_date.
- Archival memory holds facts outside your prompt, without limit: keep one with archival_memory_insert, find them
  with archival_memory_search (it also finds what was learnt about the user from past conversations).
- When the user tells you something lasting about themselves, save it before answering.

The time now: {now}.""",
    "zh": """你是{assistant}，一个自己管理长期记忆的伙伴。

你的工作方式：
- 你的回复文本是你的内心独白，用户看不到。请保持简短。
- 用户只能看到你通过 send_message 函数发送的内容。请始终用 send_message 回答用户。
- 当你调用函数且没有 request_heartbeat: true 时，你的这一轮结束。需要继续下一步（例如先搜索记忆再回答）时请求 heartbeat。

你的记忆：
- 核心记忆（见下文）始终在你的提示中：关于你自己（persona）和关于用户（human）的信息。
  用 core_memory_append 和 core_memory_replace 保持更新；每个块都有长度上限。
- 提示中只有最近的消息。更早的消息会被总结，所有消息都可以用 conversation_search 和 conversation_search_date 找到。
- 档案记忆在提示之外保存事实，没有上限：用 archival_memory_insert 保存，用 archival_memory_search 查找
  （它也能找到从过去的对话中了解到的关于用户的信息）。
- 当用户告诉你关于他们的长期信息时，先保存再回答。

现在的时间：{now}。""",
}
_CORE_HEADER = {"en": "Core memory (yours to edit):", "zh": "核心记忆（可由你编辑）："}
_STATS = {
    "en": "Memory outside your prompt: {recall} past messages (conversation_search), {archival} archival memories "
    "(archival_memory_search). {hidden} older messages are summarised below, not shown.",
    "zh": "提示之外的记忆：{recall} 条过去的消息（conversation_search），{archival} 条档案记忆（archival_memory_search）。"
    "{hidden} 条更早的消息已总结在下方，不再显示。",
}
_SUMMARY = {
    "en": "Summary of the conversation before the messages below (conversation_search finds the messages):\n{summary}",
    "zh": "以下消息之前的对话总结（原始消息可用 conversation_search 找到）：\n{summary}",
}
_BUDGET = {
    "en": "The agent stopped after {steps} steps in this turn (its step budget) without sending a message.",
    "zh": "智能体在本轮执行了 {steps} 步（步数上限）后停止，没有发送消息。",
}
SEND_MESSAGE_REMINDER = {
    "en": "[system] You replied without calling a function. The user sees nothing unless you call send_message.",
    "zh": "[system] 你没有调用任何函数就回复了。除非调用 send_message，否则用户什么也看不到。",
}


def system_prompt(language: str, assistant: str, now: datetime, core_memory: str, recall: int, archival: int, hidden: int) -> str:
    """The first message of every request: instructions, core memory, what lies outside the prompt."""
    lang = language if language in _INSTRUCTIONS else "en"
    parts = [
        _INSTRUCTIONS[lang].format(assistant=assistant, now=now.strftime("%Y-%m-%d %H:%M %A")),
        _STATS[lang].format(recall=recall, archival=archival, hidden=hidden),
        f"{_CORE_HEADER[lang]}\n{core_memory}",
    ]
    return "\n\n".join(parts)


def summary_message(language: str, summary: str) -> str:
    return _SUMMARY.get(language, _SUMMARY["en"]).format(summary=summary)


def step_budget_notice(language: str, steps: int) -> str:
    return _BUDGET.get(language, _BUDGET["en"]).format(steps=steps)
