"""`memoryscope add | search | get | update | delete`: the memory API's verbs on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryscope.cli import main

LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    return str(tmp_path / "cli.db")


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_add_then_search_get_update_delete(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--store", store, "--user", "lin"]
    assert main(["add", "prefers green tea", "--no-infer", "--meta", "source=crm", "--meta", "rating=4", "--json", *base]) == 0
    (added,) = json_lines(capsys.readouterr().out)
    assert added["memory_type"] == "obs_customized" and added["metadata"] == {"source": "crm", "rating": 4}
    assert main(["add", "I keep bees on the roof", *base]) == 0
    assert "I keep bees on the roof" in capsys.readouterr().out

    assert main(["search", "tea", "--top-k", "1", "--json", *base]) == 0
    (hit,) = json_lines(capsys.readouterr().out)
    assert hit["id"] == added["id"] and hit["score"] is not None
    assert main(["search", "tea", "--filter", "source=chat", *base]) == 0
    assert capsys.readouterr().out.strip() == "no memories found"
    assert main(["search", "roof", "--filters", '{"rating": {"gte": 3}}', "--json", *base]) == 0
    assert [h["memory"] for h in json_lines(capsys.readouterr().out)] == ["prefers green tea"]

    assert (
        main(["update", added["id"], "--text", "prefers oolong tea", "--meta", "rating=5", "--unset", "source", "--json", *base])
        == 0
    )
    (updated,) = json_lines(capsys.readouterr().out)
    assert updated["memory"] == "prefers oolong tea" and updated["metadata"] == {"rating": 5}
    assert main(["get", added["id"], *base]) == 0
    shown = capsys.readouterr().out
    assert "prefers oolong tea" in shown and "rating=5" in shown

    assert main(["delete", added["id"], *base]) == 0
    assert main(["get", added["id"], *base]) == 1
    assert "no memory has the id" in capsys.readouterr().err
    assert main(["history", added["id"], "--store", store]) == 0
    assert [line.split()[1] for line in capsys.readouterr().out.splitlines()] == ["created", "updated", "deleted"]
    assert main(["delete", "--all", *base]) == 2  # every memory of a user: only with --yes
    assert main(["delete", "--all", "--yes", *base]) == 0
    assert "deleted all 1 memories of lin" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["delete"], "takes memory ids, or --all"),
        (["delete", "x", "--all"], "takes memory ids, or --all"),
        (["update", "x"], "needs --text"),
        (["add", "x", "--meta", "novalue"], "write KEY=VALUE"),
        (["search", "x", "--filters", "{bad"], "--filters is not JSON"),
        (["search", "x", "--since", "last week"], "not an ISO 8601 time"),
        (["search", "x", "--type", "facts"], "unknown memory type"),
    ],
)
def test_misuse_is_a_one_line_error_with_exit_2(
    store: str, argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["add", "Ann keeps bees", "--no-infer", "--store", store]) == 0  # a read needs a store that exists
    capsys.readouterr()
    assert main([*argv, "--store", store]) == 2
    err = capsys.readouterr().err.strip()
    assert complaint in err and len(err.splitlines()) == 1


def test_delete_of_unknown_ids_exits_1(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["delete", "nope", "--store", store]) == 1
    captured = capsys.readouterr()
    assert "no memory has the id 'nope'" in captured.err and "deleted 0 of 1" in captured.out
