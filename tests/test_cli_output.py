"""What `memoryscope run` prints says what is true: a listing cut at its top-k says how many
memories there are in all, and a search that finds nothing says so. Real app, real SQLite."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from memoryscope.app import MemoryScope
from memoryscope.cli import main

pytestmark = pytest.mark.slow  # commands run whole; `-m "not slow"` leaves it out

LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    path = str(tmp_path / "out.db")
    with MemoryScope("default", overrides={"memory_store.path": path}) as ms:
        for start in (0, 60):
            ms.add([f"fact number {n}" for n in range(start, start + 60)], user_id="ann", infer=False)
        ms.add(["keeps bees", "is vegetarian"], user_id="bob", infer=False)
    return path


def test_a_listing_cut_at_its_top_k_says_how_many_there_are(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "list_memory", "--store", store, "--user", "ann"]) == 0
    out = capsys.readouterr().out
    headers = [line for line in out.splitlines() if line.startswith("-----")]
    assert headers == ["----- added memory (120; the newest 100 shown) -----"], headers
    assert out.count("(id: ") == 100
    assert "fact number 119" in out and "fact number 0 " not in out


def test_a_listing_that_shows_everything_gives_the_plain_count(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "list_memory", "--store", store, "--user", "bob"]) == 0
    headers = [line for line in capsys.readouterr().out.splitlines() if line.startswith("-----")]
    assert headers == ["----- added memory (2) -----"]


def test_a_search_with_no_hits_says_nothing_matched(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "retrieve_memory", "--store", store, "--user", "carol", "--query", "what does Carol drink?"]) == 0
    assert capsys.readouterr().out.strip() == "No memory of 'carol' matched the query."
    assert main(["run", "retrieve_memory", "--store", store, "--user", "carol", "--query", "tea", "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""  # JSON lines only on stdout: none
    assert "No memory of 'carol' matched the query." in captured.err


def test_a_search_with_hits_prints_them_and_no_such_note(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "retrieve_memory", "--store", store, "--user", "bob", "--query", "bees", "--json"]) == 0
    captured = capsys.readouterr()
    assert "keeps bees" in {json.loads(line)["content"] for line in captured.out.splitlines()}
    assert "matched the query" not in captured.err


def test_a_chat_retrieval_with_no_hits_says_nothing_matched(
    store: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMORYSCOPE_STORE_PATH", store)
    monkeypatch.setattr(sys, "stdin", io.StringIO("/retrieve_memory what does Carol drink?\n/retrieve_memory bees\n/exit\n"))
    assert main(["chat", "--user", "carol"]) == 0
    out = capsys.readouterr().out
    assert out.count("retrieve_memory: no memory matched the query") == 2
    assert "retrieve_memory: done" not in out
