"""`memoryscope.memoryos.Memoryos`: MemoryOS's constructor and calls over the `memoryos` config;
users and assistants kept apart in one store; unreadable LLM answers skipped and reported with
nothing stored half-way; a process killed during a promotion loses nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from memoryos_scripted_llm import Script, at

from memoryscope.memory import MemoryStatus, MemoryType
from memoryscope.memoryos import Memoryos
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.workers._memoryos import MEMORYOS_KNOWLEDGE, MEMORYOS_PAGE, MEMORYOS_PROFILE, MEMORYOS_SEGMENT

pytestmark = pytest.mark.slow  # subprocesses; `-m "not slow"` leaves it out

TEA = ("I drink green tea every morning", "Green tea is lovely.")
TEA_AGAIN = ("I drink green tea every evening too", "Twice a day!")
BIKE = ("My bicycle got a flat tyre yesterday", "Oh no, did you fix it?")


def count(memo: Memoryos, kind: MemoryType, **fields: object) -> int:
    store = memo.scope.store
    assert store is not None
    memory_filter = MemoryFilter(memo.user_id, target_name=memo.assistant_id, memory_types=(kind,), status=MemoryStatus.VALID)
    nodes = store.scan(memory_filter, limit=1000)
    return sum(all(node.meta.get(f"memoryos_{key}") == value for key, value in fields.items()) for node in nodes)


def test_the_facade_answers_with_memory_and_keeps_the_turn(
    make_memoryos: Callable[..., Memoryos], script: Script, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    memo = make_memoryos(short_term_capacity=7, assistant_id="tutor")
    memo.add_memory("My cat is called Mochi", "What a sweet name!", timestamp="2024-10-26 12:00:00")
    fake_openai.add_rule("Where", "Your cat is called Mochi.")

    answer = memo.get_response("Where did I say my cat's name?")

    assert answer == "Your cat is called Mochi."
    system = fake_openai.requests[-1].body["messages"][0]["content"]
    assert "[2024-10-26 12:00:00 Sat] User: My cat is called Mochi | Assistant: What a sweet name!" in system
    assert count(memo, MEMORYOS_PAGE, tier="short") == 2  # the answered turn is kept too
    assert (tmp_path / "memoryos.db").exists()  # data_storage_path holds the embedded store
    assert memo.get_user_profile() == ""  # nothing promoted yet


def test_users_and_assistants_are_kept_apart(make_memoryos: Callable[..., Memoryos], script: Script) -> None:
    ann_tutor = make_memoryos("ann", assistant_id="tutor", short_term_capacity=1, mid_term_heat_threshold=2.5)
    ann_chef = make_memoryos("ann", assistant_id="chef", short_term_capacity=1, mid_term_heat_threshold=2.5)
    bob_tutor = make_memoryos("bob", assistant_id="tutor", short_term_capacity=1, mid_term_heat_threshold=2.5)
    for minute, turn in enumerate((TEA, TEA_AGAIN, BIKE)):
        ann_tutor.add_memory(*turn, timestamp=at(minute))  # the tea segment grows hot: promoted
    ann_chef.add_memory("I bake sourdough on Sundays", "Yum.", timestamp=at(0))
    bob_tutor.add_memory("I collect stamps", "Nice hobby.", timestamp=at(0))

    assert ann_tutor.get_user_profile() == "Ann loves green tea."
    assert ann_chef.get_user_profile() == "" and bob_tutor.get_user_profile() == ""
    chef_pack = ann_chef.retrieve("green tea", timestamp=at(5))
    assert "sourdough" in chef_pack["text"] and "tea" not in chef_pack["text"]
    bob_pack = bob_tutor.retrieve("green tea", timestamp=at(5))
    assert "stamps" in bob_pack["text"] and "tea" not in bob_pack["text"] and not bob_pack["knowledge"]
    assert count(ann_tutor, MEMORYOS_SEGMENT) == 1 and count(ann_chef, MEMORYOS_SEGMENT) == 0


def test_unreadable_segment_summaries_move_nothing_and_are_reported(
    make_memoryos: Callable[..., Memoryos], script: Script
) -> None:
    memo = make_memoryos(short_term_capacity=1)
    memo.add_memory(*TEA, timestamp=at(0))
    script.garbage_mid = 2  # the answer and the repair request's answer

    result = memo.add_memory(*BIKE, timestamp=at(1))

    assert "unreadable segment summaries" in result.context.result
    assert count(memo, MEMORYOS_PAGE, tier="short") == 2 and count(memo, MEMORYOS_SEGMENT) == 0
    memo.add_memory(*TEA_AGAIN, timestamp=at(2))  # the next move takes both waiting pages
    assert count(memo, MEMORYOS_PAGE, tier="mid") == 2


def test_an_unreadable_analysis_promotes_nothing_and_leaves_the_segment_hot(
    make_memoryos: Callable[..., Memoryos], script: Script
) -> None:
    memo = make_memoryos(short_term_capacity=1, mid_term_heat_threshold=2.5)
    memo.add_memory(*TEA, timestamp=at(0))
    memo.add_memory(*TEA_AGAIN, timestamp=at(1))
    script.garbage_long = 2

    result = memo.add_memory(*BIKE, timestamp=at(2))  # TEA_AGAIN joins the tea segment: hot

    assert "unreadable analysis" in result.context.result
    assert "moved page: 1" in result.context.result  # the move itself went through
    assert count(memo, MEMORYOS_PROFILE) == 0 and count(memo, MEMORYOS_KNOWLEDGE) == 0
    assert count(memo, MEMORYOS_SEGMENT, interaction_length=2) == 1  # not reset: still hot
    rerun = memo.update(timestamp=at(3))
    assert memo.get_user_profile() == "Ann loves green tea.", (rerun.stopped, rerun.context.result)


CHILD = """
import sys
from memoryscope.memoryos import Memoryos
memo = Memoryos("ann", openai_api_key="test-key", openai_base_url=sys.argv[1], data_storage_path=sys.argv[2],
                llm_model="fake", short_term_capacity=1, mid_term_heat_threshold=2.5)
memo.add_memory("My bicycle got a flat tyre yesterday", "Oh no, did you fix it?", timestamp="2024-10-26T12:02:00+00:00")
"""


def test_a_process_killed_during_a_promotion_loses_nothing(
    make_memoryos: Callable[..., Memoryos], script: Script, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    memo = make_memoryos(short_term_capacity=1, mid_term_heat_threshold=2.5)
    memo.add_memory(*TEA, timestamp=at(0))
    memo.add_memory(*TEA_AGAIN, timestamp=at(1))
    arrived, release = threading.Event(), threading.Event()
    script.block = lambda: (arrived.set(), release.wait(30))
    child = subprocess.Popen([sys.executable, "-c", CHILD, fake_openai.base_url, str(tmp_path)], env={**os.environ})
    try:
        assert arrived.wait(60), "the child never asked for the promotion"
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        release.set()
        if child.poll() is None:
            child.kill()
    script.block = None

    # the child's page was stored before the update; the update itself left nothing half-way
    assert count(memo, MEMORYOS_PAGE, tier="short") == 2
    assert count(memo, MEMORYOS_SEGMENT, interaction_length=1) == 1
    assert count(memo, MEMORYOS_PROFILE) == 0 and count(memo, MEMORYOS_KNOWLEDGE) == 0

    result = memo.update(timestamp=at(3))  # the next run does the whole work

    assert "profile updated: 1" in result.context.result, json.dumps(result.context.result)
    assert count(memo, MEMORYOS_PAGE, tier="short") == 1
    assert count(memo, MEMORYOS_SEGMENT, interaction_length=0) == 1
    assert memo.get_user_profile() == "Ann loves green tea."
