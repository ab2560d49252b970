"""`benchmarks.locomo_qa` in process, on a two-session conversation, against the fake OpenAI-compatible
server: scripted answers and judge replies give scores computed here by hand; the server's
request log checks the LLM counts, category 5 and `--resume`."""

from __future__ import annotations

import itertools
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest

from benchmarks._qa_metrics import bleu1, judge_label, locomo_f1, normalise, spread, token_f1
from benchmarks.locomo_qa import main
from memoryscope.testing.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.slow  # a benchmark run end to end; `-m "not slow"` leaves it out

CONVERSATION: dict[str, Any] = {
    "speaker_a": "Ann",
    "speaker_b": "Bo",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo! I adopted a grey kitten called Pebble last Saturday."},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "Congrats! I just started pottery classes downtown."},
        {"speaker": "Ann", "dia_id": "D1:3", "text": "Look at this", "blip_caption": "a photo of a kitten on a sofa"},
        {"speaker": "Bo", "dia_id": "D1:4", "text": "So cute. My bowl cracked in the kiln though."},
    ],
    "session_2_date_time": "10:37 am on 27 June, 2023",
    "session_2": [
        {"speaker": "Bo", "dia_id": "D2:1", "text": "I finished my first vase at pottery class yesterday!"},
        {"speaker": "Ann", "dia_id": "D2:2", "text": "Wonderful. Pebble learned to open the kitchen door."},
        {"speaker": "Bo", "dia_id": "D2:3", "text": "Ha, clever cat. Are you still running on Sundays?"},
    ],
    "qa": [
        {"question": "What is the name of Ann's kitten?", "answer": "Pebble", "evidence": ["D1:1"], "category": 4},
        {"question": "When did Bo finish a vase?", "answer": "26 June 2023", "evidence": ["D2:1"], "category": 2},
        {"question": "What does Bo make?", "answer": "bowl, vase", "evidence": ["D1:4", "D2:1"], "category": 1},
        {"question": "Where does Bo take pottery classes?", "answer": "downtown", "evidence": ["D1:2"], "category": 4},
        {"question": "What is Bo's dog called?", "adversarial_answer": "Rex", "evidence": [], "category": 5},
    ],
}
# question -> the scripted answer, and what the judge says of it (a list: one reply per call, cycled)
SCRIPT = {
    "What is the name of Ann's kitten?": ("Pebble", ["CORRECT"]),
    "When did Bo finish a vase?": ("On 26 June, 2023", ["**WRONG**"]),
    "What does Bo make?": ("a vase", ["Hard to say."]),  # unparseable: counts as WRONG
    "Where does Bo take pottery classes?": ("At the library.", ["CORRECT", "WRONG"]),  # alternates run by run
}
ANSWER_MARK = "You are answering a question"
JUDGE_MARK = "Grade an answer to a question"
TOP_KEYS = {
    "config", "conversations", "conversation_names", "questions", "top_k", "judge_runs", "batch_size", "concurrency",
    "limit_questions", "categories", "ingest", "answering", "answer_model", "judge_model", "prompts", "retrieval",
    "metrics", "data_notes", "anchors", "details", "date", "machine", "wall_seconds",
}  # fmt: skip
CATEGORY_KEYS = {
    "name", "count", "f1", "bleu1", "j_mean", "j_std", "j_runs", "judge_unparseable",
    "memory_tokens_per_question", "memories_per_question",
}  # fmt: skip
INGEST_KEYS = {
    "conversations", "turns", "llm_calls", "llm_errors", "prompt_tokens", "completion_tokens", "llm_calls_per_turn",
    "prompt_tokens_per_turn", "completion_tokens_per_turn", "backend_runs", "backend_errors", "seconds", "turns_per_s",
}  # fmt: skip


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> Path:
    """The conversation in a folder; the LLM variables at the fake server; its rules scripted;
    the harness's temporary store under tmp_path."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "tiny.json").write_text(json.dumps(CONVERSATION), encoding="utf-8")
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", fake_openai.base_url)
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-test-qa")
    for name in ("MEMORYSCOPE_LLM_MODEL", "MEMORYSCOPE_JUDGE_API_BASE", "MEMORYSCOPE_JUDGE_API_KEY", "MEMORYSCOPE_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for question, (answer, verdicts) in SCRIPT.items():
        fake_openai.add_rule(f"Question: {question}\n", answer)
        replies = itertools.cycle(verdicts)
        fake_openai.add_rule(f"The answer to grade: {answer}\n", lambda _body, replies=replies: next(replies))
    return folder


def _chats(server: FakeOpenAIServer, mark: str | None = None, since: int = 0) -> list[Any]:
    return [
        request
        for request in server.requests[since:]
        if request.path.endswith("/chat/completions") and (mark is None or mark in request.body["messages"][-1]["content"])
    ]


def _run(data: Path, out: Path, *extra: str) -> dict[str, Any]:
    assert main(["--data", str(data), "--out", str(out), *extra]) == 0
    return json.loads(out.read_text(encoding="utf-8"))


def test_scores_counts_and_report_keys(data: Path, tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    result = _run(data, tmp_path / "qa.json", "--config", "default", "--judge-runs", "3")

    assert set(result) >= TOP_KEYS
    assert result["questions"] == 4 and result["data_notes"]["category_5_skipped"] == 1
    assert not _chats(fake_openai, "What is Bo's dog called?")  # category 5: never asked
    categories = result["categories"]
    assert set(categories) == {"1", "2", "3", "4", "all"}
    assert all(set(row) == CATEGORY_KEYS for row in categories.values())
    assert [categories[c]["count"] for c in ("1", "2", "3", "4", "all")] == [1, 1, 0, 2, 4]
    assert categories["3"]["f1"] is None and categories["3"]["j_mean"] is None

    # F1: "On 26 June, 2023" vs "26 June 2023" -> 3 common of 4 and 3 tokens; "a vase" vs "bowl, vase"
    # (category 1: parts) -> mean(0, 1). BLEU-1: 3/4 (longer, no penalty); 1/1 x exp(1 - 2/1).
    f1_temporal = 2 * 0.75 * 1.0 / 1.75
    expected_f1 = {"1": 0.5, "2": f1_temporal, "4": (1.0 + 0.0) / 2, "all": (1.0 + f1_temporal + 0.5 + 0.0) / 4}
    expected_bleu = {"1": math.exp(-1), "2": 0.75, "4": 0.5, "all": (1.0 + 0.75 + math.exp(-1) + 0.0) / 4}
    for category, value in expected_f1.items():
        assert categories[category]["f1"] == pytest.approx(value, abs=1e-4)
        assert categories[category]["bleu1"] == pytest.approx(expected_bleu[category], abs=1e-4)

    # J per run: kitten always CORRECT, vase WRONG, "make" unparseable, pottery CORRECT/WRONG/CORRECT
    assert categories["4"]["j_runs"] == [1.0, 0.5, 1.0]
    assert categories["4"]["j_mean"] == pytest.approx(5 / 6, abs=1e-4)
    assert categories["4"]["j_std"] == pytest.approx(math.sqrt(((1 / 6) ** 2 * 2 + (1 / 3) ** 2) / 3), abs=1e-4)
    assert categories["all"]["j_runs"] == [0.5, 0.25, 0.5]
    assert categories["all"]["j_std"] == pytest.approx(0.11785, abs=1e-4)
    assert (categories["1"]["j_mean"], categories["2"]["j_mean"]) == (0.0, 0.0)
    assert categories["1"]["judge_unparseable"] == 3 and categories["all"]["judge_unparseable"] == 3
    assert categories["all"]["memory_tokens_per_question"] > 0

    # every LLM call is counted once, in its part: ingest (consolidation), answers, judgements, retrieval
    ingest, answering = result["ingest"], result["answering"]
    assert set(ingest) == INGEST_KEYS
    assert ingest["turns"] == 7 and ingest["backend_runs"]["consolidate_memory"] >= 1
    assert ingest["llm_calls"] > 0 and ingest["llm_calls_per_turn"] == round(ingest["llm_calls"] / 7, 4)
    assert answering["answer"]["calls"] == 4 and answering["answer"]["calls_per_question"] == 1.0
    assert answering["judge"]["calls"] == 12 and answering["questions_counted"] == 4
    assert len(_chats(fake_openai, ANSWER_MARK)) == 4 and len(_chats(fake_openai, JUDGE_MARK)) == 12
    counted = ingest["llm_calls"] + sum(answering[part]["calls"] for part in ("answer", "judge", "retrieval"))
    assert counted == len(_chats(fake_openai))

    assert result["answer_model"]["config_key"] == "generation_model"
    assert result["judge_model"]["model"] == result["answer_model"]["model"]
    assert "{question}" in result["prompts"]["answer"] and "{gold}" in result["prompts"]["judge"]
    assert {"cores", "memory_gb"} <= set(result["machine"])

    lines = [json.loads(line) for line in Path(result["details"]).read_text(encoding="utf-8").splitlines()]
    asked = {line["question"]: line for line in lines if line["record"] == "question"}
    assert set(asked) == set(SCRIPT)
    assert asked["What does Bo make?"]["judge"] == ["WRONG"] * 3
    assert any("Pebble" in memory for memory in asked["What is the name of Ann's kitten?"]["memory_lines"])


def test_resume_answers_only_what_is_missing(data: Path, tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    out, details = tmp_path / "qa.json", tmp_path / "qa-details.jsonl"
    first = _run(data, out, "--details", str(details), "--limit-questions", "2", "--judge-runs", "2")
    assert first["questions"] == 2 and len(_chats(fake_openai, ANSWER_MARK)) == 2

    before = len(fake_openai.requests)
    second = _run(data, out, "--details", str(details), "--judge-runs", "2", "--resume")
    assert len(_chats(fake_openai, ANSWER_MARK, since=before)) == 2  # the two not answered yet
    assert len(_chats(fake_openai, JUDGE_MARK, since=before)) == 4
    assert second["questions"] == 4 and second["categories"]["all"]["count"] == 4
    assert second["answering"]["questions_counted"] == 4
    records = [json.loads(line)["record"] for line in details.read_text(encoding="utf-8").splitlines()]
    assert records.count("run") == 1 and records.count("ingest") == 1 and records.count("question") == 4

    before = len(fake_openai.requests)
    third = _run(data, out, "--details", str(details), "--judge-runs", "2", "--resume")
    assert len(fake_openai.requests) == before  # all answered: no ingest, no call
    assert third["categories"] == second["categories"]

    with pytest.raises(SystemExit, match="judge_runs: 2 then, 3 now"):
        main(["--data", str(data), "--out", str(out), "--details", str(details), "--judge-runs", "3", "--resume"])


def test_agent_config_with_a_separate_judge(
    data: Path, tmp_path: Path, fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYSCOPE_JUDGE_API_BASE", fake_openai.base_url)
    monkeypatch.setenv("MEMORYSCOPE_JUDGE_MODEL", "judge-model")
    result = _run(data, tmp_path / "agent.json", "--config", "agent", "--judge-runs", "1", "--concurrency", "2")
    assert result["config"] == "agent" and result["questions"] == 4
    assert result["judge_model"]["model"] == "judge-model"
    assert {request.body["model"] for request in _chats(fake_openai, JUDGE_MARK)} == {"judge-model"}
    assert result["categories"]["2"]["f1"] == pytest.approx(2 * 0.75 / 1.75, abs=1e-4)
    assert result["ingest"]["llm_calls_per_turn"] > 0


def test_no_generation_model_names_the_variables(data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORYSCOPE_LLM_API_BASE")
    with pytest.raises(SystemExit, match="MEMORYSCOPE_LLM_API_BASE, MEMORYSCOPE_LLM_API_KEY, MEMORYSCOPE_LLM_MODEL"):
        main(["--data", str(data), "--out", str(tmp_path / "qa.json")])


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("Pebble", "pebble", 1.0),
        ("The kitten, Pebble!", "Pebble", 2 * 0.5 * 1.0 / 1.5),  # "kitten pebble" vs "pebble"
        ("painting sunsets", "paints sunset", 1.0),  # Porter stems: paint, sunset
        ("at the library", "downtown", 0.0),
        ("", "downtown", 0.0),
    ],
)
def test_token_f1(prediction: str, gold: str, expected: float) -> None:
    assert token_f1(prediction, gold) == pytest.approx(expected)


def test_locomo_f1_per_category_rules() -> None:
    assert locomo_f1("pottery, painting", "painting, pottery, running", 1) == pytest.approx(2 / 3)
    assert locomo_f1("pottery", "pottery; she also paints", 3) == 1.0  # gold cut at ';'
    assert locomo_f1("pottery", "pottery; she also paints", 4) == pytest.approx(2 * 1 * 0.25 / 1.25)


def test_bleu1() -> None:
    assert bleu1("the cat sat on the mat", "the cat sat on the mat") == 1.0
    assert bleu1("cat cat cat", "cat sat") == pytest.approx(1 / 3)  # clipped: "cat" counts once; longer: no penalty
    assert bleu1("cat", "cat sat on mat") == pytest.approx(math.exp(1 - 4))  # all match, penalty exp(1 - r/c)
    assert bleu1("painting", "paints") == 0.0  # not stemmed
    assert bleu1("", "cat") == 0.0 and bleu1("cat", "") == 0.0


def test_normalise_and_judge_labels() -> None:
    assert normalise("The vase, and a Bowl!") == "vase bowl"
    assert [judge_label(reply) for reply in ("CORRECT", "**wrong**", '{"label": "CORRECT"}', "INCORRECT", "maybe")] == [
        "CORRECT", "WRONG", "CORRECT", None, None,
    ]  # fmt: skip
    assert judge_label("not CORRECT, so WRONG") is None
    assert spread([0.5, 0.25, 0.5]) == {"mean": 0.4167, "std": 0.1179}
    assert spread([]) == {"mean": None, "std": None}
