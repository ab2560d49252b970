"""The simple memory API on `MemoryScope`: add, search, get, get_all, update, delete, delete_all,
history — through the real app, a real SQLite file, and (for `infer=True`) the fake LLM server."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from memoryscope import MemoryScope
from memoryscope.errors import MemoryScopeError, StoreError
from memoryscope.memory_api import MemoryNotFoundError
from memoryscope.testing.consolidation_script import ConsolidationScript
from memoryscope.testing.fake_openai import FakeOpenAIServer

LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH")
MONDAY = datetime(2024, 10, 21, 9, 0, tzinfo=timezone.utc)


@pytest.fixture
def ms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryScope]:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    with MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "api.db")}) as scope:
        yield scope


def test_add_infers_by_keeping_the_conversation_with_roles(ms: MemoryScope) -> None:
    added = ms.add(
        [
            {"role": "user", "content": "Can you recommend a novel?", "time": "2024-10-21T09:00:00+00:00"},
            {"role": "assistant", "content": "Try 'The Left Hand of Darkness'.", "time": "2024-10-21T09:00:05+00:00"},
        ],
        user_id="lin",
        metadata={"channel": "web"},
    )
    assert [(r.memory_type, r.role, r.metadata) for r in added] == [
        ("conversation", "user", {"channel": "web"}),
        ("conversation", "assistant", {"channel": "web"}),
    ]
    assert added[0].message_time == MONDAY
    assert added[0].text.startswith("[2024-10-21 ")
    again = ms.add({"role": "user", "content": "Can you recommend a novel?", "time": "2024-10-21T09:00:00+00:00"}, "lin")
    assert again == []  # the same message (role, time, text) is kept once
    assert len(ms.get_all("lin")) == 2


def test_add_without_inference_stores_each_text_as_given(ms: MemoryScope) -> None:
    added = ms.add(["prefers green tea", "keeps bees"], user_id="lin", infer=False, metadata={"source": "crm"}, time=MONDAY)
    assert [(r.memory, r.memory_type, r.metadata, r.time) for r in added] == [
        ("prefers green tea", "obs_customized", {"source": "crm"}, MONDAY),
        ("keeps bees", "obs_customized", {"source": "crm"}, MONDAY),
    ]
    got = ms.get(added[0].id)
    assert got is not None and got.memory == "prefers green tea" and got.user_id == "lin"
    assert ms.get("no-such-id") is None


@pytest.mark.parametrize(
    ("metadata", "complaint"),
    [
        ({"role": "x"}, "MemoryScope's own"),
        ({"when": datetime(2024, 1, 1)}, "timezone-aware"),
        ({"blob": object()}, "cannot be stored"),
        ({"": 1}, "non-empty"),
        ({"gone": None}, "leave the key out"),
    ],
)
def test_bad_metadata_is_refused_naming_the_key(ms: MemoryScope, metadata: dict[str, object], complaint: str) -> None:
    with pytest.raises(MemoryScopeError, match=complaint):
        ms.add("likes tea", user_id="lin", infer=False, metadata=metadata)
    assert ms.get_all("lin") == []


@pytest.mark.parametrize(
    ("given", "complaint"),
    [
        ("   ", "nothing to remember"),
        ([{"role": "system", "content": "x"}], "'role' must be"),
        ([{"content": "x", "speaker": "a"}], "unknown keys"),
        ([{"content": "x", "time": "yesterday"}], "ISO 8601"),
        ([42], "expected a text"),
    ],
)
def test_bad_messages_are_refused_naming_the_message(ms: MemoryScope, given: object, complaint: str) -> None:
    with pytest.raises(MemoryScopeError, match=complaint):
        ms.add(given, user_id="lin")  # type: ignore[arg-type]


def test_search_returns_scored_records_best_first_within_top_k(ms: MemoryScope) -> None:
    ms.add(["plays the guitar in a band", "prefers green tea", "keeps bees on the roof", "runs marathons"], "lin", infer=False)
    ms.add("plays the guitar too", "ann", infer=False)
    found = ms.search("guitar", user_id="lin", top_k=2)
    assert len(found) == 2
    assert found[0].memory == "plays the guitar in a band"
    assert all(r.user_id == "lin" for r in found)
    scores = [r.score for r in found]
    assert all(score is not None for score in scores) and scores == sorted(scores, reverse=True)  # type: ignore[type-var]


def test_search_narrows_by_type_and_time(ms: MemoryScope) -> None:
    ms.add("I play the guitar", "lin", time=MONDAY)  # conversation
    ms.add("plays the guitar", "lin", infer=False, time=MONDAY + timedelta(days=7))  # obs_customized
    by_type = ms.search("guitar", "lin", types=["conversation"])
    assert [r.memory_type for r in by_type] == ["conversation"]
    week_two = ms.search("guitar", "lin", time_range=(MONDAY + timedelta(days=1), None))
    assert [r.memory for r in week_two] == ["plays the guitar"]
    with pytest.raises(MemoryScopeError, match="unknown memory type 'facts'"):
        ms.search("guitar", "lin", types=["facts"])
    with pytest.raises(MemoryScopeError, match="needs a query"):
        ms.search("  ", "lin")


def test_search_and_get_all_filter_on_metadata(ms: MemoryScope) -> None:
    ms.add("likes jazz", "lin", infer=False, metadata={"source": "crm", "rating": 5, "tags": ["music", "evening"]})
    ms.add("likes rock", "lin", infer=False, metadata={"source": "chat", "rating": 2, "seen": "2024-10-21T17:00:00+08:00"})
    ms.add("likes folk", "lin", infer=False, metadata={"source": "import", "rating": 3.5})

    def memories(records: list) -> set[str]:
        return {r.memory for r in records}

    assert memories(ms.search("likes music", "lin", filters={"source": "crm"})) == {"likes jazz"}
    assert memories(ms.get_all("lin", filters={"source": {"in": ["chat", "import"]}})) == {"likes rock", "likes folk"}
    assert memories(ms.get_all("lin", filters={"rating": {"gte": 3}})) == {"likes jazz", "likes folk"}
    assert memories(ms.get_all("lin", filters={"tags": "music"})) == {"likes jazz"}
    assert memories(ms.get_all("lin", filters={"seen": {"lt": "2024-10-21T10:00:00+00:00"}})) == {"likes rock"}
    assert memories(ms.get_all("lin", filters={"seen": {"lt": "2024-10-21T08:00:00+00:00"}})) == set()
    with pytest.raises(StoreError, match="unknown operator 'like'"):
        ms.get_all("lin", filters={"source": {"like": "c%"}})


def test_get_all_pages_newest_first_and_limits(ms: MemoryScope) -> None:
    for day in range(7):
        ms.add(f"note {day}", "lin", infer=False, time=MONDAY + timedelta(days=day))
    everything = ms.get_all("lin")
    assert len(everything) == 7
    assert [r.memory for r in ms.get_all("lin", limit=3)] == [r.memory for r in everything[:3]]
    assert ms.get_all("lin", limit=0) == []
    assert ms.get_all("nobody") == []


def test_update_re_embeds_and_merges_metadata_and_history_shows_it(ms: MemoryScope) -> None:
    (record,) = ms.add("prefers green tea", "lin", infer=False, metadata={"source": "crm", "rating": 4})
    assert ms.store is not None
    before = ms.store.get_vectors([record.id])[record.id]
    updated = ms.update(record.id, "prefers oolong tea", metadata={"rating": 5, "source": None})
    assert updated.memory == "prefers oolong tea" and updated.metadata == {"rating": 5}
    after = ms.store.get_vectors([record.id])[record.id]
    assert not np.allclose(before, after)  # embedded again, from the new text
    assert ms.search("oolong", "lin", top_k=1)[0].id == record.id
    assert ms.delete(record.id) is True
    assert ms.delete(record.id) is False
    actions = [change.action for change in ms.history(record.id)]
    assert actions == ["created", "updated", "deleted"]


def test_update_and_delete_all_refuse_or_report_plainly(ms: MemoryScope) -> None:
    with pytest.raises(MemoryNotFoundError, match="no memory has the id 'missing'"):
        ms.update("missing", "text")
    (record,) = ms.add("keeps bees", "lin", infer=False)
    with pytest.raises(MemoryScopeError, match="needs text= or metadata="):
        ms.update(record.id)
    ms.add(["a", "b"], "ann", infer=False)
    assert ms.delete_all("lin") == 1
    assert ms.get_all("lin") == [] and len(ms.get_all("ann")) == 2


def test_add_with_an_llm_lets_consolidation_extract_facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`infer=True` with an LLM: the messages are kept and consolidation draws observations from
    them. The LLM is a keyless local server (no key variable set): it is used, not dropped."""
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    script = ConsolidationScript(user="lin")
    script.say("I play the guitar every evening", score=3, facts=[("lin plays the guitar", "guitar")])
    with FakeOpenAIServer() as server:
        script.install(server)
        monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", server.base_url)
        with MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "llm.db")}) as ms:
            assert ms.has_generation_model
            assert any("called without a key" in notice for notice in ms.notices)
            ms.add("I play the guitar every evening", "lin", metadata={"channel": "app"})
            ms.default_service.run_operation("consolidate_memory", "lin")
            observations = ms.get_all("lin", types=["observation"])
            from_the_app = ms.get_all("lin", filters={"channel": "app"}, types=["observation"])
        assert [r.memory for r in observations] == ["lin plays the guitar"]
        assert observations[0].metadata == {"channel": "app"}  # what was learnt carries its message's metadata
        assert [r.id for r in from_the_app] == [observations[0].id]
        assert any(request.path.endswith("/chat/completions") for request in server.requests)
