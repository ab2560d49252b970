"""`memoryscope demo`: an offline tour — remember a bundled conversation, then answer from it."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from datetime import datetime, tzinfo
from importlib import resources
from pathlib import Path
from typing import Any

from memoryscope.app import MemoryScope
from memoryscope.config import load_config
from memoryscope.context import Message
from memoryscope.listing import memory_listing

__all__ = ["run_demo", "load_demo_conversation"]


def load_demo_conversation() -> dict[str, Any]:
    text = resources.files("memoryscope").joinpath("data/demo_conversation.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


def run_demo(config: str = "default", store_path: str | None = None, top: int = 3, echo: Callable[[str], None] = print) -> int:
    """Ingest the demo conversation, ask its questions, print the memories used. Returns 0.

    The conversation is read in its own time zone (what "yesterday" and "last weekend" mean to
    its speaker), and times are shown in the config's `global.timezone`, as every other command
    (`memoryscope run`, `chat`, `search`) shows them: a store the demo keeps shows the same."""
    conversation = load_demo_conversation()
    shown = load_config(config).settings.tzinfo
    with tempfile.TemporaryDirectory(prefix="memoryscope-demo-") as scratch:
        path = store_path or str(Path(scratch) / "demo.db")
        overrides = {"memory_store.path": path, "global.timezone": conversation["timezone"]}
        with MemoryScope(config, overrides=overrides) as scope:
            for notice in scope.notices:
                if notice not in scope.warned:  # a warning was logged already: once is enough
                    echo(f"note: {notice}")
            if str(shown) != conversation["timezone"]:
                echo(
                    f"note: times are shown in {shown} (global.timezone; MEMORYSCOPE_TIMEZONE={conversation['timezone']} "
                    f"shows them in {conversation['user_name']}'s zone)"
                )
            _ingest(scope, conversation, shown, echo)
            _answer(scope, conversation, top, shown, echo)
            echo(f"\nModel usage: {json.dumps(scope.usage())}")
    return 0


def _ingest(scope: MemoryScope, conversation: dict[str, Any], shown: tzinfo, echo: Callable[[str], None]) -> None:
    service = scope.default_service
    user = conversation["user_name"]
    sessions = conversation["sessions"]
    service.run_operation("delete_all", user)
    echo(f"Remembering {sum(len(s['messages']) for s in sessions)} messages of {user} over {len(sessions)} sessions")
    for number, session in enumerate(sessions, start=1):
        when = datetime.fromisoformat(session["time"])
        messages = tuple(
            Message(role="user", content=text, time=when, name=user, message_id=f"demo-{number}-{index}")
            for index, text in enumerate(session["messages"])
        )
        result = service.run_operation("read_message", user, messages=messages)
        new = result.context.stored_message_ids
        stored = len(messages) if new is None else len(new)
        echo(f"  [{number}/{len(sessions)}] {when:%Y-%m-%d}: stored {stored} messages")
    if not scope.has_generation_model:
        echo("  (no LLM configured: messages stay conversation memories; set MEMORYSCOPE_LLM_API_BASE to consolidate)")
        return
    # The scheduler consolidates in the background as messages arrive; let it finish, then run
    # both backend operations on demand for whatever is left.
    service.scheduler.wait_idle(timeout=600)
    for operation in ("consolidate_memory", "reflect_and_reconsolidate"):
        if operation in service.operations:
            echo(f"  running {operation} ...")
            outcome = service.run_operation(operation, user)
            echo(f"  {operation}: {outcome.context.result or outcome.stopped or 'done'}")
    listing = service.run_operation("list_memory", user) if "list_memory" in service.operations else None
    if listing is not None:
        known = memory_listing(listing.context.memories, scope.config.settings.language, shown)
        echo("\nWhat MemoryScope now knows:\n" + known)


def _answer(scope: MemoryScope, conversation: dict[str, Any], top: int, shown: tzinfo, echo: Callable[[str], None]) -> None:
    service = scope.default_service
    settings = scope.config.settings
    user = conversation["user_name"]
    # The conversation's user's memories answer, and the tour's questions are not remembered: else
    # each question would be stored as a message and come back as a memory of the next one.
    chat = scope.default_memory_chat if scope.has_generation_model and scope.chats else None
    for question in conversation["questions"]:
        when = datetime.fromisoformat(question["time"])
        result = service.run_operation("retrieve_memory", user, query=question["query"], query_time=when)
        elapsed_ms = sum(seconds for _, seconds in result.timings) * 1000
        echo(f"\nQ: {question['query']}   ({elapsed_ms:.1f} ms)")
        memories = result.context.memories[:top]
        if result.context.time_range is not None:
            span = result.context.time_range
            echo(f"   time asked about: {span.start:%Y-%m-%d} .. {span.end:%Y-%m-%d}")
        for memory in memories:
            echo(f"   {memory.format(settings.language, shown)}   (score {memory.score:.3f})")
        if not memories:
            echo("   (no memories found)")
        if chat is not None:
            reply = chat.chat_with_memory(
                question["query"], role_name=user, remember_response=False, stream=False, query_time=when
            )
            echo(f"A: {reply.message.content}")
