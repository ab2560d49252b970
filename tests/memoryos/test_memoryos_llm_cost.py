"""`benchmarks.llm_cost` on the memoryos config: one `memoryos_add` run per question-answer turn,
calls counted by the fake server, at most one move call per turn plus rare promotions."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks._locomo import load_conversations
from benchmarks.llm_cost import measure

TALK = [
    ("Ann", "I adopted a grey kitten called Pebble last Saturday."),
    ("Bo", "Congrats! What is she like?"),
    ("Ann", "Pebble sleeps on my keyboard all day."),
    ("Bo", "Cats love warm keyboards."),
    ("Ann", "My work at the library keeps me busy."),
    ("Bo", "Do you like it there?"),
    ("Ann", "I love the library, especially the old maps room."),
    ("Bo", "Old maps are fascinating."),
]


def test_llm_cost_measures_the_memoryos_policy_per_ingested_turn(tmp_path: Path) -> None:
    said = [(speaker, f"{text} ({round_ + 1})") for round_ in range(3) for speaker, text in TALK]  # each text once
    turns = [{"speaker": speaker, "dia_id": f"D1:{i + 1}", "text": text} for i, (speaker, text) in enumerate(said)]
    conversation = {"speaker_a": "Ann", "speaker_b": "Bo", "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns}
    (tmp_path / "tiny.json").write_text(json.dumps({**conversation, "qa": []}), encoding="utf-8")
    [chosen] = load_conversations(str(tmp_path))

    report = measure(chosen, "memoryos")

    assert report["ingested_turns"] == 12
    add = report["operations"]["memoryos_add"]
    assert add["runs"] == 12
    moves = report["memoryos_calls_by_worker"]["memoryos_mid_term"]
    assert moves == 12 - 7  # one call per move: the turns past the short term's capacity of 7
    assert add["llm_calls"] == moves + report["memoryos_calls_by_worker"].get("memoryos_long_term", 0)
    assert report["total"]["calls_per_turn"] == round(add["llm_calls"] / 12, 4) <= 1.5
    assert add["prompt_tokens"] > 0
