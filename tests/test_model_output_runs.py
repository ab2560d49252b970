"""Bad model output never fails a consolidation run, never lands raw in the store, and stored
text never reaches the terminal with its escape codes (issue 10, items 4 and 6).

consolidate_memory runs end to end (real runner, SQLite store, `openai_like` over HTTP to the
fake server answering from a `ConsolidationScript`) in `global.timezone: Asia/Shanghai`, east of
UTC, where a model date of 0001-01-01 used to raise OverflowError on every rerun.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memoryscope.cli import main
from memoryscope.context import CALLER_FIELDS, MemoryContext, Message
from memoryscope.memory import MemoryType
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.stores.base import MemoryFilter
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.workflow import WorkflowRunner, parse_workflow, validate_plan

SHANGHAI = ZoneInfo("Asia/Shanghai")
EVENING = datetime(2024, 10, 26, 21, 26, 20, tzinfo=SHANGHAI)
WORKFLOW = "info_filter,[get_observation|get_observation_with_time|load_today_memory],contra_repeat,store_memory"
WORKERS: dict[str, dict[str, Any]] = {
    "info_filter": {"class": "info_filter"},
    "get_observation": {"class": "get_observation"},
    "get_observation_with_time": {"class": "get_observation_with_time"},
    "load_today_memory": {"class": "load_memory", "retrieve_today_top_k": 50},
    "contra_repeat": {"class": "contra_repeat"},
    "store_memory": {"class": "store_memory"},
}
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteMemoryStore]:
    with SqliteMemoryStore(path=tmp_path / "memories.db", embedding_model=LocalEmbedding()) as opened:
        yield opened


@pytest.fixture
def runner(store: SqliteMemoryStore) -> Iterator[tuple[WorkflowRunner, FakeOpenAIServer]]:
    with FakeOpenAIServer() as server:
        model = OpenAILikeGeneration(OpenAILikeGeneration.Params(model_name="qwen", api_base=server.base_url, max_retries=0))
        env = make_env(store=store, models={"generation_model": model}, timezone="Asia/Shanghai")
        workers = {
            name: build_worker(entry["class"], {k: v for k, v in entry.items() if k != "class"}, env, name=name)
            for name, entry in WORKERS.items()
        }
        plan = parse_workflow(WORKFLOW, "consolidate_memory.workflow")
        validate_plan(plan, workers, CALLER_FIELDS, "consolidate_memory.workflow")
        built = WorkflowRunner("consolidate_memory", plan, workers)
        yield built, server
        built.close()


def tell(store: SqliteMemoryStore, *texts: str) -> None:
    messages = tuple(Message("user", text, EVENING) for text in texts)
    build_worker("read_message", {}, make_env(store=store, timezone="Asia/Shanghai")).run(
        MemoryContext(user_name="ann", messages=messages)
    )


def test_bad_model_dates_and_dirty_text_do_not_fail_or_stick_the_run(
    store: SqliteMemoryStore, runner: tuple[WorkflowRunner, FakeOpenAIServer]
) -> None:
    workflow, server = runner
    script = ConsolidationScript(user="ann")
    script.say("Recently I started learning Japanese", 3, [("ann is learning Japanese", "Japanese", "0001-01-01")])
    script.say("Lately I have been baking bread", 3, [("ann bakes bread", "bread", "99999-01-01")])
    script.say("These days I run a lot", 3, [("ann runs a lot", "running", "2024-13-45")])
    script.say("I play the guitar", 3, [("ann\x00 plays the \x1b[31mguitar\x07\u202e", "\x1b[1mguitar\x9b")])
    script.install(server)
    tell(store, "Recently I started learning Japanese", "Lately I have been baking bread", "These days I run a lot",
         "I play the guitar")  # fmt: skip

    first = workflow.run(MemoryContext(user_name="ann"))
    assert first.stopped == ""
    found = store.scan(MemoryFilter(user_name="ann", memory_types=(MemoryType.OBSERVATION,)), limit=100)
    by_content = {node.content: node for node in found}
    assert sorted(by_content) == ["ann bakes bread", "ann is learning Japanese", "ann plays the guitar", "ann runs a lot"]
    assert all(node.event_time is None for node in found)
    assert by_content["ann plays the guitar"].value == "guitar"
    assert all(not UNSAFE.search(node.content + node.value) for node in found)
    dropped = first.context.details["get_observation_with_time"]["dropped_times"]
    assert sorted(entry["time"] for entry in dropped) == ["0001-01-01", "2024-13-45", "99999-01-01"]
    assert store.scan(MemoryFilter(user_name="ann", memory_types=(MemoryType.CONVERSATION,), reflected=False)) == []

    again = workflow.run(MemoryContext(user_name="ann"))  # not stuck: nothing is left pending
    assert again.stopped == "no new messages"


def test_clean_model_text_removes_controls_escapes_and_bidi_and_types_values() -> None:
    from memoryscope.text import clean_model_text  # imported here: the other tests run without it

    dirty = "a\x00b\x07 \x1b[1;31mred\x1b[0m \x1b]0;title\x07x \u202eevil\u2066\u2069 \x9b2Jc"
    assert clean_model_text(dirty) == "ab red x evil c"
    assert clean_model_text("line one\nline\ttwo") == "line one line two"
    assert clean_model_text("line one\n\x1b[2Jline two", multiline=True) == "line one\nline two"
    assert clean_model_text(["guitar", ["piano", 3]]) == "guitar, piano, 3"
    assert clean_model_text({"name": "Mimi", "kind": "cat"}) == "name: Mimi; kind: cat"
    assert clean_model_text(None) == clean_model_text(float("nan")) == clean_model_text("\x1b[2J") == ""
    assert clean_model_text(True) == "true" and clean_model_text(2.5) == "2.5"
    capped = clean_model_text("word " * 100, 50)
    assert len(capped) <= 50 and capped.endswith("…") and capped.startswith("word word")
    assert clean_model_text("👩\u200d💻 codes") == "👩\u200d💻 codes"  # a joiner inside an emoji stays


def test_terminal_safe_shows_escapes_instead_of_running_them() -> None:
    from memoryscope.text import terminal_safe

    shown = terminal_safe("ok\n\tred \x1b[31mX\x07 \u202eY \x9b\x00")
    assert shown == "ok\n\tred \\u001b[31mX\\u0007 \\u202eY \\u009b\\u0000"
    line = json.dumps({"content": "a\x1b[2J\u202eb"}, ensure_ascii=False)
    assert json.loads(terminal_safe(line)) == {"content": "a\x1b[2J\u202eb"}  # JSON stays valid and lossless


def test_memoryscope_run_prints_stored_text_without_raw_escapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMORYSCOPE_STORE_PATH", str(tmp_path / "m.db"))
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    assert main(["run", "add_memory", "--user", "ann", "--text", "Ann \x1b[2J\x1b[31mplays\x07 the \u202ecello"]) == 0
    capsys.readouterr()
    for arguments in (["run", "list_memory", "--user", "ann"], ["run", "list_memory", "--user", "ann", "--json"]):
        assert main(arguments) == 0
        out = capsys.readouterr().out
        assert "cello" in out and not UNSAFE.search(out.replace("\n", ""))
        assert "\\u001b[31mplays" in out


def test_memoryscope_chat_prints_stored_text_without_raw_escapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMORYSCOPE_STORE_PATH", str(tmp_path / "m.db"))
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    script = "/add_memory I play the \x1b[31mcello\x07\u202e now\n/list_memory\n/clear\n/exit\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(script))
    assert main(["chat", "--user", "ann"]) == 0
    out = capsys.readouterr().out
    assert "\\u001b[31mcello\\u0007\\u202e now" in out
    assert not UNSAFE.search(out.replace("\n", "").replace("\x1b[2J\x1b[H", ""))  # /clear still clears
    assert out.count("\x1b[2J\x1b[H") == 1
