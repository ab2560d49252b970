"""Reading LLM answers tolerantly; one repair attempt through a real model on the fake server."""

from __future__ import annotations

import pytest

from memoryscope.llm_output import (
    ReplyLine,
    as_number,
    ask,
    extract_json,
    item_field,
    iter_json,
    labelled,
    numbered_lines,
    relation,
    relation_and_number,
    reply_lines,
    strip_markup,
)
from memoryscope.models.base import ChatMessage
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.testing.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Sure! ```json\n{"a": [1, "}"]}\n``` hope that helps', {"a": [1, "}"]}),
        ('[{"a": 1}, {"a": 2}]', [{"a": 1}, {"a": 2}]),
        ('Here: {"broken": } and then {"ok": true}', {"ok": True}),
        ("no structure at all", None),
        ('{"unclosed": [1, 2}', None),
    ],
)
def test_extract_json_finds_the_structure_inside_chatter(text: str, expected: object) -> None:
    assert extract_json(text) == expected


def test_numbered_lines_reads_common_numbering_styles() -> None:
    assert numbered_lines("1. yes\n[2] no\n3：也许\n- 4) maybe\nnot numbered\n1. again") == {
        1: "yes",
        2: "no",
        3: "也许",
        4: "maybe",
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{'1': 3, '2': 0}", {"1": 3, "2": 0}),
        ("[{'content': 'x', 'keywords': 'y'}]", [{"content": "x", "keywords": "y"}]),
        ('{"a": [1, 2,],}', {"a": [1, 2]}),
        ('```json\n[{"a": 1},\n]\n```', [{"a": 1}]),
        ("{'ok': True, 'none': None, 'json': true, 'null': null}", {"ok": True, "none": None, "json": True, "null": None}),
        ("{'pair': (1, 2), 3: 'three'}", {"pair": [1, 2], "3": "three"}),
        ("{'quote': \"it's fine\", 'text': 'a \\'b\\' c'}", {"quote": "it's fine", "text": "a 'b' c"}),
        ("I'm sure it's this: {'a': 'true, false'}", {"a": "true, false"}),
    ],
)
def test_loose_json_as_models_write_it_is_read(text: str, expected: object) -> None:
    assert extract_json(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I cannot help with that.",
        "{'content': __import__('os').getcwd()}",  # never run: literals only
        "{'a': open('x')}",
        "{1, 2, 3}",  # a set is no JSON
        "[b'bytes']",
        "{'a': 1j}",
        "{'a': 1 + 2}",
        "Here is [what I think], {roughly}",
    ],
)
def test_what_is_no_plain_literal_reads_as_nothing(text: str) -> None:
    assert extract_json(text) is None


def test_a_pathological_reply_reads_as_nothing() -> None:
    # the work on such replies is capped (memoryscope._llm_structures); its cost is measured, not asserted here
    assert extract_json("[{'a" * 20_000) is None
    assert extract_json("{" * 50_000) is None
    assert extract_json("[" * 3000 + "'") is None
    assert extract_json("[" * 100_000) is None


def test_markdown_tables_come_after_json_as_lists_of_rows() -> None:
    table = "Scores:\n| Sentence | **Score** |\n|:---|---:|\n| **1** | `3` |\n| 2 | 0 |\n\nDone."
    assert list(iter_json(table)) == [[{"Sentence": "1", "Score": "3"}, {"Sentence": "2", "Score": "0"}]]
    assert list(iter_json('{"a": 1}\n| x |\n|---|\n| y |')) == [{"a": 1}, [{"x": "y"}]]
    assert extract_json("a | b\nno separator | here") is None
    assert extract_json("| a | b |\n|---|---|") is None  # a header alone holds no rows


def test_reply_lines_strip_bullets_emphasis_and_pipes_and_find_the_number() -> None:
    reply = "```\n- **1**: 3\n| 2 | 0 |\n|---|---|\nSentence 3 gets a score of 1\n* hobby: guitar\n4 apples\n\nno number"
    assert reply_lines(reply) == [
        ReplyLine("3", 1, True),
        ReplyLine("0", 2, True),
        ReplyLine("gets a score of 1", 3, True),
        ReplyLine("hobby: guitar", None, True),
        ReplyLine("apples", 4, False),
        ReplyLine("no number", None, False),
    ]
    assert [line.number for line in reply_lines("1.5 hours\n2024-10-01 hike\n10:30 call")] == [1, 2024, 10]
    assert not any(line.listed for line in reply_lines("1.5 hours\n2024-10-01 hike"))


def test_numbered_lines_read_bold_and_table_numbers() -> None:
    assert numbered_lines("**1**: yes\n| 2 | no |\n第3条：也许\n4 not set off") == {1: "yes", 2: "no", 3: "也许"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hobby: guitar", ("hobby", "guitar")),
        ("home city：杭州", ("home city", "杭州")),
        ("job - nurse", ("job", "nurse")),
        ("name = Lin", ("name", "Lin")),
        ("a well-known fact", None),
        ("I cannot help with that.", None),
    ],
)
def test_labelled(text: str, expected: tuple[str, str] | None) -> None:
    assert labelled(text) == expected


def test_item_field_and_as_number_read_what_models_write() -> None:
    row = {"Sentence No.": "**2**", "Old memory": "<3>", "new_fact": "N1"}
    assert item_field(row, ["sentence_no"]) == "**2**" and as_number(item_field(row, ["sentence_no"])) == 2
    assert as_number(item_field(row, ["old"])) == 3 and as_number(item_field(row, ["new fact"])) == 1
    assert item_field(row, ["score"]) is None
    assert [as_number(value) for value in (3, 3.0, "#3", "No. 3", "3.", True, 3.5, "3a", None)] == [
        3,
        3,
        3,
        3,
        3,
        None,
        None,
        None,
        None,
    ]
    assert strip_markup("***x*** and `y` and __z__ but 2 * 3 * 4") == "x and y and z but 2 * 3 * 4"


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        *[(word, "contradict") for word in ("contradict", "Contradicts", "CONTRADICTED", "contradiction", "contradictory",
                                            "conflict", "矛盾", "冲突", "<contradict>", "**Contradiction**")],
        *[(word, "repeat") for word in ("repeat", "REPEATED", "duplicate", "duplicated", "contain", "contains", "contained",
                                        "included", "重复", "包含", "被包含", "'repeat'")],
        *[(word, "keep") for word in ("keep", "None", "no relation", "No_Relation", "no-relation", "unrelated", "保留", "无")],
        *[(word, None) for word in ("maybe", "nonexistent", "containers", "I cannot help with that.", "", 3)],
    ],
)  # fmt: skip
def test_relation_reads_every_label_the_prompts_teach(label: object, expected: str | None) -> None:
    assert relation(label) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("contradict 1", ("contradict", 1)),
        ("Contradiction with fact 2", ("contradict", 2)),
        ("contradicted by <N1>", ("contradict", 1)),
        ("repeat of 3", ("repeat", 3)),
        ("CONTAINED IN 2", ("repeat", 2)),
        ("duplicate | 4", ("repeat", 4)),
        ("重复 2", ("repeat", 2)),
        ("矛盾（与第1条）", ("contradict", 1)),
        ("keep", ("keep", None)),
        ("repeat", ("repeat", None)),
        ("ann likes coffee", None),
    ],
)
def test_relation_and_number(text: str, expected: tuple[str, int | None] | None) -> None:
    assert relation_and_number(text) == expected


def _model(server: FakeOpenAIServer) -> OpenAILikeGeneration:
    params = OpenAILikeGeneration.Params(model_name="fake", api_base=server.base_url, max_retries=0)
    return OpenAILikeGeneration(params)


def test_ask_repairs_once_then_gives_up() -> None:
    with FakeOpenAIServer() as server:
        replies = iter(["I think the answer is yes", '{"answer": "yes"}'])
        server.add_rule("question", lambda _request: next(replies))
        server.add_rule("could not be read", lambda _request: next(replies))
        parsed = ask(_model(server), [ChatMessage("user", "question?")], extract_json, expected_format='{"answer": ...}')
        assert parsed == {"answer": "yes"}
        assert len(server.requests) == 2
        assert "could not be read" in server.requests[1].body["messages"][-1]["content"]

        server.clear_rules()
        server.default_reply = "still chatter"
        server.clear_requests()
        assert ask(_model(server), [ChatMessage("user", "q")], extract_json, expected_format="{}") is None
        assert len(server.requests) == 2


def test_ask_takes_a_loose_answer_at_once_and_repairs_an_unrelated_one() -> None:
    with FakeOpenAIServer() as server:
        server.add_rule("question", "Sure! {'answer': 'yes',}")
        assert ask(_model(server), [ChatMessage("user", "question?")], extract_json, expected_format="{}") == {"answer": "yes"}
        assert len(server.requests) == 1
        server.clear_requests()
        server.default_reply = "I cannot help with that."
        assert ask(_model(server), [ChatMessage("user", "other?")], extract_json, expected_format="{}") is None
        assert len(server.requests) == 2 and "could not be read" in server.requests[1].body["messages"][-1]["content"]
