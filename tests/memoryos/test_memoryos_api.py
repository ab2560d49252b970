"""The rest of MemoryOS's `Memoryos` API: the profile and knowledge summaries,
`force_mid_term_analysis`, `get_memory_stats`, MemoryOS's defaults, and the tier objects its MCP
server and README use (read-only views over the store, answering with MemoryOS's dicts)."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest
from memoryos_scripted_llm import Script, at

from memoryscope.errors import InvalidInputError
from memoryscope.memoryos import Memoryos

TEA = ("I drink green tea every morning", "Green tea is lovely.")
TEA_AGAIN = ("I drink green tea every evening too", "Twice a day!")
BIKE = ("My bicycle got a flat tyre yesterday", "Oh no, did you fix it?")


def test_memoryos_defaults_where_ours_differed_only_by_default(make_memoryos: Callable[..., Memoryos]) -> None:
    memo = make_memoryos(short_term_capacity=10)  # the conftest's 3 replaced by MemoryOS's default
    workers = memo.scope.config.workers
    defaults = {name: parameter.default for name, parameter in inspect.signature(Memoryos).parameters.items()}
    assert defaults["short_term_capacity"] == 10 and defaults["mid_term_capacity"] == 2000  # MemoryOS's
    assert workers["memoryos_mid_term"].params.short_term_capacity == 10  # type: ignore[attr-defined]
    assert memo.short_term_memory.max_capacity == 10 and memo.mid_term_memory.max_capacity == 2000
    assert repr(memo).startswith("<Memoryos user_id='ann' assistant_id='default_assistant_profile' data_path='/")


def test_summaries_stats_and_tiers_follow_a_promotion(make_memoryos: Callable[..., Memoryos], script: Script) -> None:
    script.analysis["assistant_knowledge"] = ["The assistant suggested sencha"]
    memo = make_memoryos(short_term_capacity=1, mid_term_heat_threshold=2.5, assistant_id="tutor")
    assert memo.get_user_profile_summary() == "None"  # as MemoryOS's get_raw_user_profile answers
    assert memo.get_assistant_knowledge_summary() == []
    assert memo.get_memory_stats() == {
        "user_id": "ann", "short_term_count": 0, "mid_term_sessions_count": 0,
        "has_user_profile": False, "assistant_knowledge_count": 0,
    }  # fmt: skip
    for minute, turn in enumerate((TEA, TEA_AGAIN, BIKE)):
        memo.add_memory(*turn, timestamp=at(minute))  # the tea segment grows hot: promoted

    assert memo.get_user_profile_summary() == "Ann loves green tea."
    [entry] = memo.get_assistant_knowledge_summary()
    assert entry["knowledge"] == "The assistant suggested sencha" and len(entry["timestamp"]) == 19
    assert [k["knowledge"] for k in memo.user_long_term_memory.get_user_knowledge()] == ["Ann drinks green tea"]
    assert memo.user_long_term_memory.get_user_profile_data("ann")["data"] == "Ann loves green tea."
    assert memo.user_long_term_memory.get_raw_user_profile("bob") == "None"  # only this user's memory is here
    assert memo.get_memory_stats() == {
        "user_id": "ann", "short_term_count": 1, "mid_term_sessions_count": 1,
        "has_user_profile": True, "assistant_knowledge_count": 1,
    }  # fmt: skip

    assert memo.short_term_memory.get_all() == [
        {"user_input": BIKE[0], "agent_response": BIKE[1], "timestamp": "2024-10-26 12:02:00"}
    ]
    assert memo.short_term_memory.is_full()
    [(segment_id, session)] = memo.mid_term_memory.sessions.items()
    assert session["summary"] == TEA[0] and session["N_visit"] == 0 and session["L_interaction"] == 0  # reset by promotion
    assert [page["user_input"] for page in session["details"]] == [TEA[0], TEA_AGAIN[0]]
    first = session["details"][0]
    assert first["meta_info"] == TEA[0] and first["timestamp"] == "2024-10-26 12:00:00"
    assert memo.mid_term_memory.get_page_by_id(first["page_id"]) == first
    assert memo.mid_term_memory.get_page_by_id(segment_id) is None  # a segment is not a page

    other = make_memoryos("ann", assistant_id="chef")  # another assistant of the same user: nothing shared
    assert other.get_user_profile_summary() == "None" and other.mid_term_memory.sessions == {}


def test_the_retriever_answers_as_memoryos_and_counts_the_visit(make_memoryos: Callable[..., Memoryos], script: Script) -> None:
    memo = make_memoryos(short_term_capacity=1, mid_term_heat_threshold=50)
    for minute, turn in enumerate((TEA, TEA_AGAIN, BIKE)):
        memo.add_memory(*turn, timestamp=at(minute))

    found = memo.retriever.retrieve_context(user_query="green tea", user_id="ann")

    assert set(found) == {"retrieved_pages", "retrieved_user_knowledge", "retrieved_assistant_knowledge", "retrieved_at"}
    assert {page["user_input"] for page in found["retrieved_pages"]} == {TEA[0], TEA_AGAIN[0]}  # not the short-term bike
    assert set(found["retrieved_pages"][0]) == {"user_input", "agent_response", "timestamp", "page_id", "meta_info"}
    assert all(page["meta_info"] == TEA[0] for page in found["retrieved_pages"])
    assert found["retrieved_user_knowledge"] == [] and found["retrieved_assistant_knowledge"] == []
    [session] = memo.mid_term_memory.sessions.values()
    assert session["N_visit"] == 1  # retrieval visited the segment: its heat grows, as in MemoryOS
    with pytest.raises(ValueError, match="'bob' is not this memory's user 'ann'"):
        memo.retriever.retrieve_context("green tea", user_id="bob")


def test_force_mid_term_analysis_promotes_the_hottest_new_segment_below_the_threshold(
    make_memoryos: Callable[..., Memoryos], script: Script
) -> None:
    memo = make_memoryos(short_term_capacity=1, mid_term_heat_threshold=100)
    for minute, turn in enumerate((TEA, TEA_AGAIN, BIKE)):
        memo.add_memory(*turn, timestamp=at(minute))
    assert memo.get_user_profile_summary() == "None" and script.calls["long"] == 0  # far below 100

    memo.force_mid_term_analysis()

    assert memo.get_user_profile_summary() == "Ann loves green tea." and script.calls["long"] == 1
    memo.force_mid_term_analysis()  # no page joined since: nothing to analyse, no LLM call
    assert script.calls["long"] == 1


def test_meta_data_is_kept_on_the_page_and_checked(make_memoryos: Callable[..., Memoryos]) -> None:
    memo = make_memoryos()
    memo.add_memory(*TEA, timestamp=at(0), meta_data={"mood": "calm", "turn": 1})
    [page] = memo.door.get_all(memo.caller, types=["memoryos_page"])
    assert page.metadata == {"mood": "calm", "turn": 1}
    with pytest.raises(InvalidInputError, match="'memoryos_tier' is MemoryScope's own"):
        memo.add_memory(*BIKE, meta_data={"memoryos_tier": "mid"})
    with pytest.raises(InvalidInputError, match="user_id"):
        Memoryos("  ")
