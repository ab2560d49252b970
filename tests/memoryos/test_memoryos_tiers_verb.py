"""The door's `tiers` verb under MemoryOS, on a real SQLite store with the scripted LLM: the
short-term pages in the order said, the mid-term segments with their heat and pages, the long-term
profile and knowledge, and the promotion threshold from the config; empty tiers under another
policy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from memoryos_scripted_llm import Script, at

from memoryscope.app import MemoryScope
from memoryscope.memoryos import Memoryos

TURNS = (
    ("I drink green tea every morning", "Green tea is lovely."),
    ("My bicycle got a flat tyre yesterday", "Oh no, did you fix it?"),
    ("I started piano lessons on Mondays", "How fun!"),
    ("I drink green tea every evening too", "Twice a day!"),
)


def test_tiers_show_each_tier_and_the_threshold(make_memoryos: Callable[..., Memoryos], script: Script) -> None:
    memo = make_memoryos(short_term_capacity=3, mid_term_heat_threshold=7.5)
    for minute, turn in enumerate(TURNS):
        memo.add_memory(*turn, timestamp=at(minute))
    tiers = memo.door.tiers(memo.caller)
    assert tiers.policy == "memoryos" and tiers.heat_threshold == 7.5
    assert [page.memory.split("\n")[0] for page in tiers.short_term] == [f"User: {said}" for said, _ in TURNS[1:]]
    assert len(tiers.mid_term) == 1
    segment = tiers.mid_term[0]
    assert segment.record.memory == TURNS[0][0] and [page.id for page in segment.pages] != []
    assert segment.heat > 0 and segment.interaction_length == 1 and not segment.due_for_promotion
    assert tiers.profile is None and tiers.knowledge == ()

    memo.force_mid_term_analysis()
    promoted = memo.door.tiers(memo.caller)
    assert promoted.profile is not None and promoted.profile.memory == "Ann loves green tea."
    assert [entry.memory for entry in promoted.knowledge] == ["Ann drinks green tea"]
    shown = promoted.to_dict()
    assert shown["mid_term"][0]["pages"][0]["memory_type"] == "memoryos_page" and shown["heat_threshold"] == 7.5


def test_another_policy_has_no_tiers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORYSCOPE_STORE_PATH", raising=False)
    with MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "default.db")}) as scope:
        scope.add(["ann plays the guitar"], user_id="ann", infer=False)
        tiers = scope.tiers("ann")
        assert (tiers.policy, tiers.short_term, tiers.mid_term, tiers.profile, tiers.heat_threshold) == (
            "memoryscope", (), (), None, None,
        )  # fmt: skip


def test_the_command_line_prints_the_tiers(
    make_memoryos: Callable[..., Memoryos], script: Script, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from memoryscope.cli import main

    memo = make_memoryos(short_term_capacity=3)
    for minute, turn in enumerate(TURNS):
        memo.add_memory(*turn, timestamp=at(minute))
    assert memo.scope.store is not None
    path = str(memo.scope.store.path)
    memo.close()
    user = ["--config", "memoryos", "--store", path, "--user", "ann", "--target", memo.assistant_id]
    assert main(["tiers", *user]) == 0
    printed = capsys.readouterr().out
    assert "mid term: 1 segments, promoted at heat 5" in printed and f"User: {TURNS[3][0]}" in printed
    assert main(["tiers", *user, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["policy"] == "memoryos" and len(shown["short_term"]) == 3 and shown["mid_term"][0]["memory"] == TURNS[0][0]
