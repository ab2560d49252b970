"""A served MemoryScope for the playground tests and the README's screenshot.

The `default` config on a temp SQLite file, its LLM the fake OpenAI-compatible server, served
by a real uvicorn on 127.0.0.1. The fake LLM answers the consolidation workers from a
`ConsolidationScript` and the chat from `CHAT_REPLIES` (word by word when streamed). The LLM's
key is read from `MEMORYSCOPE_LLM_API_KEY`, which the caller sets.

    python tests/playground/playground_stage.py docs/playground.png   # the README's screenshots
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memoryscope.app import MemoryScope
from memoryscope.context import Message
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.server.access import KeyRing
from memoryscope.server.app import create_app
from memoryscope.testing.consolidation_script import WORKER_MARKERS, ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer, FakeToolCalls
from memoryscope.testing.live_server import LiveServer

USER = "ann"
SAID = (  # what the user says, the facts consolidation finds in it, the assistant's reply
    ("I play the guitar every evening", ["ann plays the guitar"], "That sounds lovely. What do you like to play?"),
    ("I moved to Hangzhou last spring", ["ann lives in Hangzhou"], "Hangzhou is beautiful. How do you like the lake?"),
    ("I am learning to cook Sichuan food", ["ann is learning Sichuan cooking"], "Great! Mapo tofu is a good start."),
    ("I have a cat called Mochi", ["ann has a cat called Mochi"], "Mochi is a lovely name."),
    ("I run every morning before work", ["ann runs every morning"], "That is a good habit."),
)
OLDER_FACT = "ann lives in Beijing"  # stored before the chat; "lives in Hangzhou" contradicts it
CHAT_REPLIES = {said: reply for said, _, reply in SAID}


class PlaygroundStage:
    """`with PlaygroundStage(folder) as stage:` a server at `stage.url`, with `stage.fake`."""

    def __init__(self, folder: Path, *, keys: KeyRing | None = None, stream_chunk_delay_s: float = 0.0) -> None:
        self.folder = folder
        self.keys = keys
        self.fake = FakeOpenAIServer(stream_chunk_delay_s=stream_chunk_delay_s)
        self.script = ConsolidationScript(user=USER)
        for said, facts, _ in SAID:
            self.script.say(said, score=3, facts=[(fact, fact.split()[-1]) for fact in facts])
        self.script.verdict("ann lives in Hangzhou", "contradict", OLDER_FACT)
        self.scope: MemoryScope | None = None
        self.live: LiveServer | None = None

    def __enter__(self) -> PlaygroundStage:
        self.fake.start()
        self.fake.add_rule(re.compile(""), self._reply)
        overrides = {
            "memory_store.path": str(self.folder / "playground.db"),
            "model.generation_model.api_base": self.fake.base_url,
            "model.generation_model.model_name": "fake-qwen",
        }
        self.scope = MemoryScope("default", overrides=overrides)
        assert self.scope.store is not None
        self.scope.store.upsert([MemoryNode(user_name=USER, content=OLDER_FACT, memory_type=MemoryType.OBSERVATION)])
        self.live = LiveServer(create_app(self.scope, keys=self.keys)).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.stop()
        if self.scope is not None:
            self.scope.close(timeout=5)
        self.fake.stop()

    @property
    def url(self) -> str:
        assert self.live is not None, "use the stage in a with block"
        return self.live.url

    def _reply(self, body: dict[str, Any]) -> str:
        """The consolidation workers get the script's answers; the chat gets `CHAT_REPLIES`."""
        users = [str(message.get("content", "")) for message in body.get("messages", []) if message.get("role") == "user"]
        first = users[0] if users else ""
        if any(first.startswith(mark) for marks in WORKER_MARKERS.values() for mark in marks):
            return self.script.reply(body)
        last = users[-1] if users else ""
        return next((reply for said, reply in CHAT_REPLIES.items() if said in last), "Tell me more!")


MID_MARKER = "Summaries of all"  # MemoryOS's prompts (workers/memoryos_mid_term.py, memoryos_long_term.py)
LONG_MARKER = "Updated profile and new knowledge"
_SEGMENT = re.compile(r"^Segment (\d+)\nPrevious summary: (.*?)\nNew pages:\n(.*?)(?=\n\nSegment \d+\n|\Z)", re.S | re.M)
_QUESTION = re.compile(r"User: (.*?) Assistant:")
TURNS = (  # what ann tells the MemoryOS assistant, and its answers
    ("I drink green tea every morning", "Green tea is lovely."),
    ("My bicycle got a flat tyre yesterday", "Oh no, did you fix it?"),
    ("I started piano lessons on Mondays", "How fun!"),
    ("I drink green tea every evening too", "Twice a day!"),
)
PROFILE = "Ann loves green tea and plays the piano."
KNOWLEDGE = "Ann drinks green tea twice a day"


class MemoryosStage(PlaygroundStage):
    """The `memoryos` config (short term: 3 pages), its LLM the fake server scripted as MemoryOS's
    workers expect: a segment's summary is its first question; the analysis gives `PROFILE` and
    `KNOWLEDGE`. `add_turns(n)` keeps the first n `TURNS` for `USER`, as the chat would."""

    def __enter__(self) -> MemoryosStage:
        self.fake.start()
        self.fake.add_rule(MID_MARKER, self._mid, target="prompt")
        self.fake.add_rule(LONG_MARKER, lambda body: json.dumps(
            {"profile": PROFILE, "user_knowledge": [KNOWLEDGE], "assistant_knowledge": []}), target="prompt")  # fmt: skip
        self.fake.add_rule(re.compile(""), lambda body: "Noted!")
        overrides = {
            "memory_store.path": str(self.folder / "memoryos.db"),
            "model.generation_model.api_base": self.fake.base_url,
            "model.generation_model.model_name": "fake-qwen",
            "worker.memoryos_add_page.short_term_capacity": 3,
            "worker.memoryos_mid_term.short_term_capacity": 3,
        }
        self.scope = MemoryScope("memoryos", overrides=overrides)
        self.live = LiveServer(create_app(self.scope, keys=self.keys)).start()
        return self

    def add_turns(self, count: int) -> None:
        assert self.scope is not None
        caller = self.scope.door.caller(USER)
        for minute, (said, answer) in enumerate(TURNS[:count]):
            when = datetime(2024, 10, 26, 12, minute, tzinfo=timezone.utc)
            messages = (Message("user", said, when, name=USER), Message("assistant", answer, when))
            self.scope.door.run(caller, "memoryos_add", messages=messages, query_time=when)

    @staticmethod
    def _mid(body: dict[str, Any]) -> str:
        text = next(message["content"] for message in body["messages"] if MID_MARKER in message["content"])
        segments = []
        for number, previous, pages in _SEGMENT.findall(text):
            first = _QUESTION.search(pages)
            summary = previous or (first.group(1) if first else "chat")
            segments.append({"segment": int(number), "summary": summary, "keywords": summary.split()[:3]})
        return json.dumps({"segments": segments})


class AgentStage(PlaygroundStage):
    """The `agent` config (no background runs), its model the fake server; `queue_turn()` queues the
    steps of one turn: a core memory edit with a heartbeat, then the message the agent sends."""

    def __enter__(self) -> AgentStage:
        self.fake.start()
        overrides = {
            "memory_store.path": str(self.folder / "agent.db"),
            "model.generation_model.api_base": self.fake.base_url,
            "model.generation_model.model_name": "fake-qwen",
            "memory_service.memoryscope_service.enable_scheduler": False,
        }
        self.scope = MemoryScope("agent", overrides=overrides)
        self.live = LiveServer(create_app(self.scope, keys=self.keys)).start()
        return self

    def queue_turn(self, fact: str, reply: str) -> None:
        self.fake.queue_replies(
            _step("core_memory_append", thought="Ann told me something to keep.", heartbeat=True, label="human", content=fact),
            _step("send_message", thought="Now I answer.", message=reply),
        )


def _step(name: str, thought: str = "", heartbeat: bool = False, **arguments: Any) -> FakeToolCalls:
    return FakeToolCalls(calls=((name, {**arguments, "request_heartbeat": heartbeat}),), content=thought)


def take_screenshot(target: Path) -> None:
    """The README's pictures: the playground after two turns of chat and a consolidation
    (`target`), the MemoryOS view after a promotion (`<target>-memoryos.png`) and an agent's turn
    with its steps, context window and core memory blocks (`<target>-agent.png`)."""
    from playground_browser import chromium_driver  # beside this file
    from playground_page import chat, run_operation, wait, wait_for_memory

    os.environ.setdefault("MEMORYSCOPE_LLM_API_KEY", "sk-playground-llm")
    folder = Path(tempfile.mkdtemp(prefix="playground-"))
    try:
        with chromium_driver(width=1400, height=1000) as driver:
            with PlaygroundStage(folder) as stage:
                driver.get(f"{stage.url}/?user={USER}")
                for said, _, reply in SAID[:2]:  # one message short of consolidating by itself
                    chat(driver, said, reply)
                run_operation(driver, "consolidate_memory")
                wait_for_memory(driver, "ann lives in Hangzhou")
                driver.find_element("css selector", "#last-reply summary").click()
                driver.execute_script("document.activeElement.blur()")
                driver.save_screenshot(str(target))
            with MemoryosStage(folder) as memoryos:
                memoryos.add_turns(len(TURNS))
                driver.get(f"{memoryos.url}/?user={USER}")
                run_operation(driver, "memoryos_force_update")
                wait(driver, lambda d: d.find_elements("css selector", "#tier-long .profile"), "no profile")
                driver.set_window_size(1400, 1250)  # the tiers whole, beside the chat
                driver.execute_script("document.activeElement.blur()")
                driver.save_screenshot(str(target.with_name(target.stem + "-memoryos.png")))
            driver.set_window_size(1400, 1000)
            with AgentStage(folder) as agent:
                agent.queue_turn("Ann plays the cello.", "Noted, Ann: the cello!")
                driver.get(f"{agent.url}/?user={USER}")
                chat(driver, "I play the cello", "Noted, Ann: the cello!")
                wait(driver, lambda d: d.find_elements("css selector", "#tier-core .block"), "no core memory blocks")
                driver.execute_script("document.activeElement.blur()")
                driver.save_screenshot(str(target.with_name(target.stem + "-agent.png")))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    take_screenshot(Path(sys.argv[1] if len(sys.argv) > 1 else "playground.png"))
