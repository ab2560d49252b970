"""One user's MemGPT-style agent: the main context, the step loop and the commands on it.

The main context sent with every step is the system prompt (instructions, the core memory
blocks, how much lies outside), the recursive summary, then the FIFO queue of messages (the
user's, the agent's inner monologue and function calls, their results, heartbeats). Everything
else is external: past messages (conversation memories: the user's messages and the messages
the agent sent) and archival memory, reached only by the functions the model calls
(`memoryscope.agent.tools`).

A turn: the user's message is stored at once (nothing said is lost, whatever fails later) and
joins the queue; then steps run until a step's calls ask for no heartbeat, at most
`max_steps` of them. Before each step the request is measured: past the warning fraction of the
context window a memory-pressure warning joins the queue (once per period), past the flush
fraction the oldest part of the queue is folded into the summary by one LLM call. After the
turn the messages sent are stored and the state (summary, queue, counters) is saved, so the
agent picks up where it was after a restart.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memoryscope.agent.blocks import BlockSpec, CoreMemory
from memoryscope.agent.context_window import ContextWindow, TokenCounter, WindowSettings, memory_pressure_warning
from memoryscope.agent.instructions import (
    SEND_MESSAGE_REMINDER,
    step_budget_notice,
    summary_message,
    system_prompt,
)
from memoryscope.agent.state import AgentStateStore
from memoryscope.agent.tools import AgentFunctions
from memoryscope.chat.remember import Ask, TurnStorage
from memoryscope.door import Caller
from memoryscope.errors import InvalidInputError, MemoryScopeError
from memoryscope.memory import MemoryStatus, MemoryType
from memoryscope.models.base import GenerationModel, ToolReply
from memoryscope.stores.base import MemoryFilter

if TYPE_CHECKING:
    from memoryscope.app import MemoryScope

__all__ = ["Agent", "AgentSettings", "CallRecord", "Step", "TurnResult"]

_ARCHIVAL = (MemoryType.OBSERVATION, MemoryType.OBS_CUSTOMIZED, MemoryType.INSIGHT)


@dataclass(frozen=True)
class AgentSettings:
    blocks: tuple[BlockSpec, ...]
    window: WindowSettings
    max_steps: int = 8
    language: str = "en"
    assistant_name: str = "assistant"


@dataclass(frozen=True)
class CallRecord:
    """One function call of a step: what was called, with what, and what came back."""

    name: str
    arguments: str
    ok: bool
    result: str


@dataclass(frozen=True)
class Step:
    """One request to the model: its inner monologue, the calls it made, and whether they asked
    for a heartbeat (another step after them)."""

    thought: str
    calls: tuple[CallRecord, ...] = ()
    heartbeat: bool = False


@dataclass(frozen=True)
class TurnResult:
    """A turn: the messages the agent sent (`reply` joins them), its steps and any notices."""

    messages: tuple[str, ...]
    steps: tuple[Step, ...]
    notices: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    # the window after the turn: tokens the next request starts with, the model's limit, and the
    # fractions at which the agent is warned and old messages are folded into the summary
    context_window: dict[str, float] = field(default_factory=dict)

    @property
    def reply(self) -> str:
        return "\n\n".join(self.messages)


class Agent:
    """The agent of one user: `send(text)` runs a turn; the other methods are the CLI's commands."""

    def __init__(
        self,
        scope: MemoryScope,
        user: str,
        model: GenerationModel,
        settings: AgentSettings,
        storage: TurnStorage | None,
        *,
        target_name: str = "",
        workspace: str = "",
    ) -> None:
        if scope.store is None:
            raise MemoryScopeError("the agent keeps its memory in the store: configure a memory_store")
        self.scope = scope
        self.user = user
        self.model = model
        self.settings = settings
        self._storage = storage
        self.target_name = target_name
        self.workspace = workspace
        self.core = CoreMemory(scope.store, user, settings.blocks, target_name=target_name, workspace=workspace)
        self.tools = AgentFunctions(scope, user, self.core, target_name=target_name, workspace=workspace)
        self.window = ContextWindow(settings.window, TokenCounter(model.model_name))
        self._states = AgentStateStore(scope.store, user, target_name=target_name, workspace=workspace)
        self.state = self._states.load()
        self._lock = threading.RLock()

    # -- turns -----------------------------------------------------------------------------------

    def send(self, text: str, *, when: datetime | None = None) -> TurnResult:
        """The user says `text`: store it, run the steps, store what the agent sent, save."""
        if not text.strip():
            raise MemoryScopeError("the agent needs a message with text")
        with self._turn():
            now = when or self._now()
            ask = Ask(
                text, self.user, now, remember=self._storage is not None, target_name=self.target_name, workspace=self.workspace
            )
            stored = self._storage.store(ask, None) if self._storage is not None else None
            self.state.queue.append(_packet("user_message", now, message=text))
            result = self._run_steps()
            if self._storage is not None and stored is not None and result.reply.strip():
                self._storage.store(replace(ask, stored_ids=stored.message_ids), result.reply)
            return result

    def heartbeat(self, reason: str = "the user asked for one") -> TurnResult:
        """Another step with no new message (`/heartbeat`)."""
        with self._turn():
            self.state.queue.append(_packet("heartbeat", self._now(), reason=reason))
            return self._run_steps()

    def memory_warning(self) -> TurnResult:
        """Tell the agent its memory is under pressure now, and let it act (`/memorywarning`)."""
        with self._turn():
            self.state.queue.append({"role": "system", "content": memory_pressure_warning(self.settings.language)})
            self.state.last_warning_at = self._now()
            return self._run_steps()

    def retry(self) -> TurnResult:
        """Run the last user message's turn again, dropping what followed it (`/retry`)."""
        with self._turn():
            last = _last_user_message(self.state.queue)
            if last is None:
                raise MemoryScopeError("there is no user message in the main context to retry")
            del self.state.queue[last + 1 :]
            return self._run_steps()

    def summarize(self) -> int:
        """Fold the oldest part of the queue into the recursive summary now, as the window does
        when it is full (`/summarize`, MemGPT's `summarize_messages_inplace`); how many messages
        went. Nothing to fold (the queue holds only the message being answered) is an InvalidInputError."""
        with self._turn():
            split = self.window.eviction_split(self.state.queue)
            if not split:
                raise InvalidInputError(f"nothing to summarise: the main context holds {len(self.state.queue)} messages")
            self._fold(split)
            return split

    # -- data sources -----------------------------------------------------------------------------

    def attach_source(self, name: str) -> str:
        """Let `archival_memory_search` find the passages of data source `name` (`/attach NAME`); its name."""
        return self.scope.door.attach_source(self._caller(), name).name

    def detach_source(self, name: str) -> None:
        self.scope.door.detach_source(self._caller(), name)

    def attached_sources(self) -> list[str]:
        return self.scope.door.attached_sources(self._caller())

    def available_sources(self) -> list[str]:
        """The names of the user's data sources (`memoryscope load` makes them)."""
        return [source.name for source in self.scope.door.list_sources(self._caller())]

    # -- editing the main context -------------------------------------------------------------------

    def pop(self, count: int = 3) -> int:
        """Drop the newest `count` messages of the queue (a call's results go with it); how many went."""
        if count < 1:
            raise MemoryScopeError(f"pop: give a number of messages from 1, not {count}")
        with self._turn():
            before = len(self.state.queue)
            del self.state.queue[max(0, before - count) :]
            _drop_dangling_calls(self.state.queue)
            return before - len(self.state.queue)

    def rethink(self, thought: str) -> None:
        """Replace the last inner monologue (`/rethink TEXT`)."""
        with self._turn():
            message = self._last_assistant(lambda m: True)
            message["content"] = thought

    def rewrite(self, text: str) -> None:
        """Replace the last message the agent sent (`/rewrite TEXT`)."""
        with self._turn():
            message = self._last_assistant(lambda m: any(_called(c) == "send_message" for c in m.get("tool_calls") or ()))
            call = next(c for c in reversed(message["tool_calls"]) if _called(c) == "send_message")
            arguments = _loaded(call["function"].get("arguments"))
            arguments["message"] = text
            call["function"]["arguments"] = json.dumps(arguments, ensure_ascii=False)

    def save_checkpoint(self, name: str) -> None:
        with self._lock:
            self._states.save_checkpoint(name, self.state, {n: b.value for n, b in self.core.blocks().items()})

    def load_checkpoint(self, name: str) -> None:
        with self._turn():
            state, blocks = self._states.load_checkpoint(name)
            known = self.core.blocks()
            self.core.set_many({block: value for block, value in blocks.items() if block in known})  # one write
            self.state = state

    def checkpoints(self) -> list[tuple[str, datetime]]:
        return self._states.checkpoints()

    # -- what the agent sees --------------------------------------------------------------------

    def main_context(self) -> list[dict[str, Any]]:
        """The messages exactly as the next step sends them (`/dump`)."""
        now = self._now()
        recall, archival = self._counts()
        system = system_prompt(
            self.settings.language, self.settings.assistant_name, now, self.core.render(),
            recall, archival, self.state.counters.get("evicted_messages", 0),
        )  # fmt: skip
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        if self.state.summary:
            messages.append({"role": "system", "content": summary_message(self.settings.language, self.state.summary)})
        return messages + [dict(message) for message in self.state.queue]

    def overview(self) -> dict[str, Any]:
        """The blocks, the counts of recall and archival memory, the window's use (`/memory`)."""
        recall, archival = self._counts()
        request = self.main_context()
        tokens = self.window.counter.count_request(request, self.tools.schemas)
        return {
            "blocks": {name: {"value": b.value, "limit": b.limit} for name, b in self.core.blocks().items()},
            "recall_messages": recall,
            "archival_memories": archival,
            "queue_messages": len(self.state.queue),
            "summary": self.state.summary,
            "tokens": tokens,
            "context_window": self.settings.window.context_window,
            "tokens_estimated": self.window.counter.estimated,
            "counters": dict(self.state.counters),
        }

    # -- the loop ---------------------------------------------------------------------------------

    def _run_steps(self) -> TurnResult:
        started = time.perf_counter()
        steps: list[Step] = []
        sent: list[str] = []
        notices: list[str] = []
        schemas = self.tools.schemas
        for number in range(1, self.settings.max_steps + 1):
            self._relieve_pressure(schemas, notices)
            reply = self.model.chat_with_tools(self.main_context(), schemas)
            self._count("steps")
            step, heartbeat, messages = self._take(reply, notices)
            steps.append(step)
            sent.extend(messages)
            if not heartbeat:
                break
            if number == self.settings.max_steps:
                notices.append(step_budget_notice(self.settings.language, number))
                self._count("step_budget_stops")
                break
            self.state.queue.append(_packet("heartbeat", self._now(), reason="request_heartbeat"))
        timings = {"agent": time.perf_counter() - started}
        return TurnResult(tuple(sent), tuple(steps), tuple(notices), timings, self._window_now(schemas))

    def _window_now(self, schemas: list[dict[str, Any]]) -> dict[str, float]:
        """How full the next request leaves the window, with the marks the agent goes by."""
        pressure = self.window.pressure(self.main_context(), schemas, last_warning_at=self.state.last_warning_at, now=self._now())
        settings = self.window.settings
        return {
            "tokens": pressure.tokens,
            "limit": pressure.limit,
            "warning_fraction": settings.warning_fraction,
            "flush_fraction": settings.flush_fraction,
        }

    def _take(self, reply: ToolReply, notices: list[str]) -> tuple[Step, bool, list[str]]:
        """The model's answer into the queue and its calls run: (the step, heartbeat?, messages sent)."""
        message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
                for call in reply.tool_calls
            ]
        self.state.queue.append(message)
        if not reply.tool_calls:  # a model that answered in plain text: that text is what it says
            notices.append(SEND_MESSAGE_REMINDER.get(self.settings.language, SEND_MESSAGE_REMINDER["en"]))
            said = [reply.content.strip()] if reply.content.strip() else []
            return Step(reply.content), False, said
        records, sent, heartbeat = [], [], False
        for call in reply.tool_calls:
            outcome = self.tools.run(call.name, call.arguments)
            self.state.queue.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": outcome.result})
            records.append(CallRecord(call.name, call.arguments, outcome.ok, outcome.result))
            if outcome.message is not None:
                sent.append(outcome.message)
            if not outcome.ok:
                self._count("tool_errors")
            heartbeat = heartbeat or outcome.heartbeat
        return Step(reply.content, tuple(records), heartbeat), heartbeat, sent

    def _relieve_pressure(self, schemas: list[dict[str, Any]], notices: list[str]) -> None:
        now = self._now()
        pressure = self.window.pressure(self.main_context(), schemas, last_warning_at=self.state.last_warning_at, now=now)
        if pressure.flush:
            split = self.window.eviction_split(self.state.queue)
            if split:
                self._fold(split)
                notices.append(f"the oldest {split} messages were summarised to make room ({pressure.tokens} tokens in use)")
        elif pressure.warn:
            self.state.queue.append({"role": "system", "content": memory_pressure_warning(self.settings.language)})
            self.state.last_warning_at = now
            self._count("warnings")

    # -- helpers ----------------------------------------------------------------------------------

    def _fold(self, split: int) -> None:
        """The oldest `split` messages of the queue into the summary (one LLM call), then out of the queue."""
        evicted = self.state.queue[:split]
        self.state.summary = self.window.summarize(self.model, self.state.summary, evicted, language=self.settings.language)
        del self.state.queue[:split]
        self._count("flushes")
        self._count("evicted_messages", split)
        self.state.last_warning_at = None  # a new period begins

    def _caller(self) -> Caller:
        return self.scope.door.caller(self.user, workspace=self.workspace, target=self.target_name)

    @contextmanager
    def _turn(self) -> Iterator[None]:
        """One command at a time; the state is saved after it, whatever happened (a failed step
        leaves the queue as far as it got, the user's message included)."""
        with self._lock:
            try:
                yield
            finally:
                self.state.updated_at = self._now()
                self._states.save(self.state)

    def _counts(self) -> tuple[int, int]:
        store = self.scope.store
        assert store is not None
        base = MemoryFilter(self.user, self.target_name, self.workspace, status=MemoryStatus.VALID)
        recall = store.count(replace(base, memory_types=(MemoryType.CONVERSATION,)))
        archival = store.count(replace(base, memory_types=_ARCHIVAL))
        return recall, archival

    def _count(self, name: str, by: int = 1) -> None:
        self.state.counters[name] = self.state.counters.get(name, 0) + by

    def _now(self) -> datetime:
        return datetime.now(self.scope.config.settings.tzinfo)

    def _last_assistant(self, wanted: Any) -> dict[str, Any]:
        for message in reversed(self.state.queue):
            if message.get("role") == "assistant" and wanted(message):
                return message
        raise MemoryScopeError("the main context holds no such message of the agent's")


def _packet(kind: str, when: datetime, **fields: str) -> dict[str, Any]:
    """A user-role message as MemGPT packs them: JSON with its type and time."""
    body = {"type": kind, **fields, "time": when.strftime("%Y-%m-%d %H:%M:%S %Z").strip()}
    return {"role": "user", "content": json.dumps(body, ensure_ascii=False)}


def _last_user_message(queue: list[dict[str, Any]]) -> int | None:
    for position in range(len(queue) - 1, -1, -1):
        message = queue[position]
        if message.get("role") == "user" and _loaded(message.get("content")).get("type") == "user_message":
            return position
    return None


def _drop_dangling_calls(queue: list[dict[str, Any]]) -> None:
    """After a cut, an assistant message whose calls lost any of their results goes too, with the
    results left (OpenAI-compatible servers refuse a call without its result)."""
    for position in range(len(queue) - 1, -1, -1):
        calls = queue[position].get("tool_calls") if queue[position].get("role") == "assistant" else None
        if calls:
            results = sum(1 for message in queue[position + 1 :] if message.get("role") == "tool")
            if results < len(calls):
                del queue[position:]
            return


def _called(call: Any) -> str:
    return str((call.get("function") or {}).get("name", "")) if isinstance(call, dict) else ""


def _loaded(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
