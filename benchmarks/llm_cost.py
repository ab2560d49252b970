"""LLM cost of consolidation and reflection over a LoCoMo conversation (BENCHMARKS.md §4).

    python -m benchmarks.llm_cost --data DIR [--conversation NAME] [--config default] --out FILE.json
    python -m benchmarks.llm_cost --data DIR --config memoryos --out FILE.json

With a MemoryOS config (one whose service has `memoryos_add`), each question-answer turn (a user
message and the replies after it) is added as MemoryOS adds it, one `memoryos_add` run per turn:
its page is stored, the short term's overflow moves to mid term (one LLM call) and hot segments
are promoted (one call each). The scripted model (`memoryscope.testing.memoryos_script`) answers
in the right shape; calls and tokens are reported per ingested turn (`calls_per_turn`) and in
`total`. MemoryOS's own pipeline makes about 4.9 calls per turn.

One conversation's turns arrive message by message through the project's own ingest path; the
first speaker is the user, the second the assistant. Backend operations run when their
configured triggers would fire (`trigger_messages` pending user messages for
`consolidate_memory`, `trigger_observations` unreflected observations for
`reflect_and_reconsolidate`), on demand so the count is deterministic. The LLM is the fake
OpenAI-compatible server, answering each worker's prompt from a script that treats every user
message as informative and extracts one fact from it, and proposes a few generic profile
attributes: a busy but realistic run. The server counts requests and prompt/completion tokens
(tiktoken cl100k_base). Reported per ingested user message, per operation.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._common import Progress, machine, print_table, run_stamp, write_json
from benchmarks._locomo import Conversation, Turn, load_conversations
from memoryscope.app import MemoryScope
from memoryscope.config import load_config
from memoryscope.context import Message
from memoryscope.memory import MemoryType
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.testing.memoryos_script import MemoryosScript
from memoryscope.testing.reflection_script import ReflectionScript

OPERATIONS = ("consolidate_memory", "reflect_and_reconsolidate")
MEMORYOS_ADD = "memoryos_add"  # a config whose service has it keeps memory MemoryOS's way
ANCHORS = {
    "MemoryScope 0.1": "about 3 LLM calls per consolidation batch",
    "MemoryOS": "about 4.9 LLM calls per turn",
    "mem0 (paper)": "2 LLM calls per added turn",
}
# Generic profile attributes the scripted model proposes when a fact mentions the word.
GENERIC_SUBJECTS = {"work": "job", "job": "job", "family": "family", "kids": "family", "friend": "friends",
                    "paint": "hobby", "music": "hobby", "book": "reading", "travel": "travel", "pet": "pets"}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.llm_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="folder of LoCoMo JSON files")
    parser.add_argument("--conversation", default=None, help="file stem to use (default: the first file)")
    parser.add_argument("--config", default="default", help="config name or path (default: default)")
    parser.add_argument("--out", required=True, help="JSON file to write")
    args = parser.parse_args(argv)

    conversations = load_conversations(args.data)
    if not conversations:
        parser.error(f"no LoCoMo conversations in {args.data}")
    chosen = next((c for c in conversations if c.name == args.conversation), None) if args.conversation else conversations[0]
    if chosen is None:
        parser.error(f"no conversation {args.conversation!r} in {args.data}; found {[c.name for c in conversations]}")
    report = measure(chosen, args.config)
    write_json(args.out, report)
    rows = [
        [name, op["runs"], op["llm_calls"], op["prompt_tokens"], op["calls_per_message"], op["prompt_tokens_per_message"]]
        for name, op in report["operations"].items()
    ]
    print(f"{chosen.name}: {report['user_messages']} user messages of {report['turns']} turns", file=sys.stderr)
    if "total" in report:
        total = report["total"]
        print(
            f"MemoryOS policy: {total['calls_per_turn']} LLM calls per ingested turn ({report['ingested_turns']} turns)",
            file=sys.stderr,
        )
    print_table(["operation", "runs", "LLM calls", "prompt tokens", "calls/message", "prompt tokens/message"], rows)
    return 0


def measure(conversation: Conversation, config: str) -> dict[str, Any]:
    user = conversation.speakers[0]
    turns = conversation.turns
    consolidation = ConsolidationScript(user=user)
    for turn in turns:
        if turn.speaker == user:
            consolidation.say(turn.content, 2, [(f"{user}: {turn.content[:160]}", " ".join(turn.text.split()[:4]))])
    reflection = ReflectionScript()
    for word, attribute in GENERIC_SUBJECTS.items():
        reflection.subject(word, attribute)
        reflection.value(attribute, word, f"mentions {word}")

    memoryos = MemoryosScript()
    with FakeOpenAIServer() as server, tempfile.TemporaryDirectory(prefix="memoryscope-llm-cost-") as scratch:
        memoryos.install(server)  # first match wins: MemoryOS prompts, reflection prompts, then everything else
        reflection.install(server)
        consolidation.install(server)
        saved = {name: os.environ.get(name) for name in ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY")}
        os.environ.update(MEMORYSCOPE_LLM_API_BASE=server.base_url, MEMORYSCOPE_LLM_API_KEY="sk-benchmark")
        try:
            service_name = next(iter(load_config(config).services), "memoryscope_service")
            overrides = {
                "memory_store.path": str(Path(scratch) / "cost.db"),
                # runs happen below, when the triggers would fire, so the counts are repeatable
                f"memory_service.{service_name}.enable_scheduler": False,
            }
            with MemoryScope(config, overrides=overrides) as scope:
                memoryos_policy = MEMORYOS_ADD in scope.default_service.operations
                costs = _run_memoryos(scope, server, user, turns) if memoryos_policy else _run(scope, server, user, turns)
        finally:
            for name, value in saved.items():
                os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)
    user_messages = sum(turn.speaker == user for turn in turns)
    for cost in costs.values():
        cost["calls_per_message"] = round(cost["llm_calls"] / user_messages, 4)
        cost["prompt_tokens_per_message"] = round(cost["prompt_tokens"] / user_messages, 1)
        cost["calls_per_run"] = round(cost["llm_calls"] / cost["runs"], 2) if cost["runs"] else 0.0
    extra: dict[str, Any] = {}
    if memoryos_policy:
        ingested = len(_pages(turns, user))
        for cost in costs.values():
            cost["calls_per_turn"] = round(cost["llm_calls"] / ingested, 4)
            cost["prompt_tokens_per_turn"] = round(cost["prompt_tokens"] / ingested, 1)
        calls = sum(cost["llm_calls"] for cost in costs.values())
        tokens = sum(cost["prompt_tokens"] for cost in costs.values())
        extra = {
            "ingested_turns": ingested,
            "total": {
                "llm_calls": calls,
                "prompt_tokens": tokens,
                "calls_per_turn": round(calls / ingested, 4),
                "prompt_tokens_per_turn": round(tokens / ingested, 1),
            },
            "memoryos_calls_by_worker": dict(memoryos.calls),
        }
    return {
        "config": config,
        "conversation": conversation.name,
        "turns": len(turns),
        "user_messages": user_messages,
        **extra,
        "operations": costs,
        "anchors": ANCHORS,
        "llm": "fake OpenAI-compatible server (memoryscope.testing), scripted per prompt; tokens by cl100k_base",
        "date": run_stamp(),
        "machine": machine(),
    }


def _run(scope: MemoryScope, server: FakeOpenAIServer, user: str, turns: list[Turn]) -> dict[str, dict[str, Any]]:
    service = scope.default_service
    missing = [name for name in OPERATIONS if name not in service.operations]
    if missing:
        raise SystemExit(f"config {scope.config.source} has no {', '.join(missing)} operation")
    triggers = {name: service.operations[name].params for name in OPERATIONS}
    message_trigger = getattr(triggers["consolidate_memory"], "trigger_messages", None) or 5
    observation_trigger = getattr(triggers["reflect_and_reconsolidate"], "trigger_observations", None) or 6
    store = scope.store
    if store is None:
        raise SystemExit("the config has no memory store")
    pending = MemoryFilter(user_name=user, memory_types=(MemoryType.CONVERSATION,), reflected=False)
    unreflected = MemoryFilter(user_name=user, memory_types=(MemoryType.OBSERVATION, MemoryType.OBS_CUSTOMIZED), reflected=False)
    costs = {name: {"runs": 0, "llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0} for name in OPERATIONS}
    progress = Progress("llm cost", len(turns), "turns")
    waiting_user_messages = 0
    for turn in turns:
        role = "user" if turn.speaker == user else "assistant"
        message = Message(role, turn.content, turn.time, name=turn.speaker, message_id=turn.dia_id)
        service.run_operation("read_message", user, messages=(message,))
        waiting_user_messages += role == "user"
        if waiting_user_messages >= message_trigger:
            _measured(service, server, "consolidate_memory", user, costs)
            waiting_user_messages = 0
            if store.count(unreflected) >= observation_trigger:
                _measured(service, server, "reflect_and_reconsolidate", user, costs)
        progress.advance()
    if store.count(pending):
        _measured(service, server, "consolidate_memory", user, costs)
    progress.close()
    return costs


def _pages(turns: list[Turn], user: str) -> list[list[Message]]:
    """The conversation as MemoryOS's turns: each user message with the replies after it."""
    pages: list[list[Message]] = []
    for turn in turns:
        role = "user" if turn.speaker == user else "assistant"
        if role == "user" or not pages:
            pages.append([])
        pages[-1].append(Message(role, turn.content, turn.time, name=turn.speaker, message_id=turn.dia_id))
    return pages


def _run_memoryos(scope: MemoryScope, server: FakeOpenAIServer, user: str, turns: list[Turn]) -> dict[str, dict[str, Any]]:
    """One `memoryos_add` run per turn, measured (the move and the promotions run inside it)."""
    service = scope.default_service
    costs = {MEMORYOS_ADD: {"runs": 0, "llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}}
    pages = _pages(turns, user)
    progress = Progress("llm cost", len(pages), "turns")
    for page in pages:
        before = len(server.requests)
        service.run_operation(MEMORYOS_ADD, user, messages=tuple(page), query_time=page[0].time)
        chats = [r for r in server.requests[before:] if r.path.endswith("/chat/completions")]
        cost = costs[MEMORYOS_ADD]
        cost["runs"] += 1
        cost["llm_calls"] += len(chats)
        cost["prompt_tokens"] += sum(r.prompt_tokens for r in chats)
        cost["completion_tokens"] += sum(r.completion_tokens for r in chats)
        progress.advance()
    progress.close()
    return costs


def _measured(service: Any, server: FakeOpenAIServer, operation: str, user: str, costs: dict[str, dict[str, Any]]) -> None:
    before = len(server.requests)
    service.run_operation(operation, user)
    chats = [r for r in server.requests[before:] if r.path.endswith("/chat/completions")]
    cost = costs[operation]
    cost["runs"] += 1
    cost["llm_calls"] += len(chats)
    cost["prompt_tokens"] += sum(r.prompt_tokens for r in chats)
    cost["completion_tokens"] += sum(r.completion_tokens for r in chats)


if __name__ == "__main__":
    sys.exit(main())
