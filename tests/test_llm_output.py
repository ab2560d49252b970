"""Reading LLM answers tolerantly; one repair attempt through a real model on the fake server."""

from __future__ import annotations

import pytest

from memoryscope.llm_output import ask, extract_json, numbered_lines
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
