"""Small traps of the simple API (issue 32): a time given as ISO text, and a search that names
no user. Through the real app and a real SQLite file; no LLM needed (`infer=False`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memoryscope import MemoryScope
from memoryscope.errors import InvalidInputError

LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH")


@pytest.fixture
def ms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryScope]:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    with MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "traps.db")}) as scope:
        yield scope


@pytest.mark.parametrize("infer", [False, True])
def test_add_takes_the_time_as_iso_text_as_a_message_does(ms: MemoryScope, infer: bool) -> None:
    (added,) = ms.add("drinks oolong every morning", user_id="lin", infer=infer, time="2024-10-01T10:00:00+08:00")
    assert added.message_time == datetime(2024, 10, 1, 2, 0, tzinfo=timezone.utc)
    beijing = timezone(timedelta(hours=8))
    (same,) = ms.add("keeps bees", user_id="lin", infer=infer, time=datetime(2024, 10, 1, 10, tzinfo=beijing))
    assert same.message_time == added.message_time


def test_a_time_without_a_zone_is_read_in_the_configs_zone(ms: MemoryScope) -> None:
    (added,) = ms.add("keeps bees", user_id="lin", infer=False, time="2024-10-01T10:00:00")
    zone = ms.config.settings.tzinfo
    assert added.message_time == datetime(2024, 10, 1, 10, 0, tzinfo=zone)


@pytest.mark.parametrize(
    ("given", "complaint"),
    [("last tuesday", r"time 'last tuesday' is not an ISO 8601 time"), (20241001, "time must be an ISO 8601 time, got int")],
)
def test_a_time_that_is_no_time_is_refused_naming_time(ms: MemoryScope, given: object, complaint: str) -> None:
    with pytest.raises(InvalidInputError, match=complaint):
        ms.add("keeps bees", user_id="lin", infer=False, time=given)  # type: ignore[arg-type]  # the mistake under test
    assert ms.get_all("lin") == []


def test_search_query_time_takes_iso_text_and_names_a_bad_one(ms: MemoryScope) -> None:
    ms.add("keeps bees", user_id="lin", infer=False)
    assert [hit.memory for hit in ms.search("bees", user_id="lin", query_time="2030-01-01T00:00:00+00:00")] == ["keeps bees"]
    with pytest.raises(InvalidInputError, match="query_time 'tomorrow' is not an ISO 8601 time"):
        ms.search("bees", user_id="lin", query_time="tomorrow")


def test_search_without_a_user_finds_what_add_without_a_user_added(ms: MemoryScope) -> None:
    ms.add("drinks oolong every morning", infer=False)
    hits = ms.search("what does the user drink?")
    assert [hit.memory for hit in hits] == ["drinks oolong every morning"]
    assert hits[0].user_id == ms.default_service.params.human_name


def test_search_without_a_user_says_whose_memories_it_searched_when_they_have_none(
    ms: MemoryScope, caplog: pytest.LogCaptureFixture
) -> None:
    ms.add("drinks oolong every morning", user_id="lin", infer=False)
    with caplog.at_level(logging.WARNING, logger="memoryscope"):
        assert ms.search("what does Lin drink?") == []
    (said,) = [record.getMessage() for record in caplog.records if "search named no user_id" in record.getMessage()]
    assert "default user 'user'" in said and "human_name" in said and "users with memories: lin" in said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="memoryscope"):
        assert ms.search("what does Lin drink?", user_id="ann") == []  # named: an empty answer is the answer
        assert [hit.memory for hit in ms.search("what does Lin drink?", user_id="lin")] == ["drinks oolong every morning"]
    assert not [record for record in caplog.records if "search named no user_id" in record.getMessage()]
