"""The messages a function-calling chat turn sends (`memoryscope.chat.tool_reply`)."""

from __future__ import annotations

from typing import Any

from memoryscope.chat.tool_reply import tool_messages, tools_in_play, wire_history
from memoryscope.models.base import ChatMessage

CALL = {"id": "call_7", "type": "function", "function": {"name": "local_time", "arguments": "{}"}}
EARLIER: list[dict[str, Any]] = [
    {"role": "user", "content": "what time is it?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "content": "18:30", "tool_call_id": "call_7"},
    {"role": "assistant", "content": "Half past six."},
]


def test_a_tool_result_cut_off_from_its_call_is_left_out() -> None:
    assert wire_history(EARLIER, keep=4) == EARLIER
    assert wire_history(EARLIER, keep=2) == [EARLIER[3]]  # its call was cut: the model would refuse the result
    assert wire_history([{"role": "tool", "content": "x", "tool_call_id": "call_9"}], keep=5) == []  # never called
    assert wire_history(EARLIER, keep=0) == []


def test_the_turn_is_system_history_query_then_the_exchange() -> None:
    prompt = [ChatMessage("system", "memories: ann plays the cello"), ChatMessage("user", "and now?")]
    exchange = [
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "content": "19:00", "tool_call_id": "call_7"},
    ]
    sent = tool_messages(prompt, EARLIER, 10, exchange)
    assert sent == [
        {"role": "system", "content": "memories: ann plays the cello"},
        *EARLIER,
        {"role": "user", "content": "and now?"},
        *exchange,
    ]
    # without a history given, the chat's own turns in the prompt are kept
    own = [prompt[0], ChatMessage("user", "hi"), ChatMessage("assistant", "hello"), prompt[1]]
    assert [message["content"] for message in tool_messages(own, None, 10, [])] == [m.content for m in own]


def test_tools_are_in_play_when_offered_or_answered() -> None:
    assert not tools_in_play(None, None) and not tools_in_play([], [])
    assert tools_in_play([{"type": "function", "function": {"name": "f"}}], None)
    assert tools_in_play(None, [{"role": "tool", "content": "x", "tool_call_id": "c"}])
