"""MemoryOS's tiers moving on a real SQLite store with the scripted LLM on the fake server:
short term to mid term at capacity (batched), segments merged or opened, heat from retrieval and
its decay, promotion at the threshold, and the capacities of mid term and knowledge."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from memoryos_scripted_llm import Script, at

from memoryscope.context import Message
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.memoryos import Memoryos
from memoryscope.stores.base import MemoryFilter
from memoryscope.workers._memoryos import (
    MEMORYOS_KNOWLEDGE,
    MEMORYOS_PAGE,
    MEMORYOS_SEGMENT,
    HeatParams,
    segment_heat,
)

TEA = ("I drink green tea every morning", "Green tea is lovely.")
TEA_AGAIN = ("I drink green tea every evening too", "Twice a day!")
BIKE = ("My bicycle got a flat tyre yesterday", "Oh no, did you fix it?")
PIANO = ("I started piano lessons on Mondays", "How fun!")


def nodes(memo: Memoryos, kind: MemoryType, status: MemoryStatus | None = MemoryStatus.VALID) -> list[MemoryNode]:
    store = memo.scope.store
    assert store is not None
    found = store.scan(
        MemoryFilter(memo.user_id, target_name=memo.assistant_id, memory_types=(kind,), status=status),
        limit=1000,
        newest_first=False,
    )
    return found


def tiers(memo: Memoryos) -> list[str]:
    """Each valid page's tier, in the order the pages were said."""
    pages = sorted(nodes(memo, MEMORYOS_PAGE), key=lambda page: page.message_time or page.created_at)
    return [page.meta["memoryos_tier"] for page in pages]


def test_the_short_term_keeps_its_capacity_and_the_oldest_pages_move(
    make_memoryos: Callable[..., Memoryos], script: Script
) -> None:
    memo = make_memoryos(short_term_capacity=3)
    for minute, turn in enumerate((TEA, BIKE, PIANO)):
        memo.add_memory(*turn, timestamp=at(minute))
    assert tiers(memo) == ["short"] * 3
    assert script.calls["mid"] == 0  # within capacity: no LLM call at all

    result = memo.add_memory(*TEA_AGAIN, timestamp=at(3))

    assert tiers(memo) == ["mid", "short", "short", "short"]
    assert script.calls["mid"] == 1
    assert "moved page: 1" in result.context.result
    [segment] = nodes(memo, MEMORYOS_SEGMENT)
    assert segment.content == TEA[0]  # the scripted summary of the page
    assert segment.meta["memoryos_interaction_length"] == 1


def test_an_overflow_of_several_pages_moves_in_one_llm_call(make_memoryos: Callable[..., Memoryos], script: Script) -> None:
    memo = make_memoryos(short_term_capacity=2)
    said = []
    for minute, (question, answer) in enumerate((TEA, TEA_AGAIN, BIKE, PIANO, BIKE)):
        said += [Message("user", question, at(minute)), Message("assistant", answer, at(minute))]
    memo.service.run_operation("memoryos_add", "ann", target_name=memo.assistant_id, messages=tuple(said), query_time=at(5))

    assert script.calls["mid"] == 1  # three pages, two segments, one call
    assert tiers(memo) == ["mid", "mid", "mid", "short", "short"]
    segments = {segment.content: segment for segment in nodes(memo, MEMORYOS_SEGMENT)}
    assert {content: segment.meta["memoryos_page_count"] for content, segment in segments.items()} == {TEA[0]: 2, BIKE[0]: 1}
    [request] = [request for request in script.server.requests if "Summaries of all" in str(request.body)]
    assert "Segment 2" in str(request.body) and "Segment 3" not in str(request.body)


def test_a_similar_page_joins_its_segment_and_another_topic_opens_a_new_one(
    make_memoryos: Callable[..., Memoryos], script: Script
) -> None:
    memo = make_memoryos(short_term_capacity=1)
    memo.add_memory(*TEA, timestamp=at(0))
    memo.add_memory(*TEA_AGAIN, timestamp=at(1))  # TEA moves: a new segment
    memo.add_memory(*BIKE, timestamp=at(2))  # TEA_AGAIN moves: joins the tea segment
    [segment] = nodes(memo, MEMORYOS_SEGMENT)
    assert segment.meta["memoryos_page_count"] == 2 and segment.meta["memoryos_interaction_length"] == 2

    memo.add_memory(*PIANO, timestamp=at(3))  # BIKE moves: another topic, a new segment

    segments = {segment.content: segment for segment in nodes(memo, MEMORYOS_SEGMENT)}
    assert set(segments) == {TEA[0], BIKE[0]}
    pages = nodes(memo, MEMORYOS_PAGE)
    tea_pages = [page for page in pages if page.meta.get("memoryos_segment_id") == segments[TEA[0]].memory_id]
    assert len(tea_pages) == 2


def test_retrieval_visits_heat_the_segment_and_heat_decays_with_time(
    make_memoryos: Callable[..., Memoryos], script: Script
) -> None:
    memo = make_memoryos(short_term_capacity=1, mid_term_heat_threshold=100.0)
    memo.add_memory(*TEA, timestamp=at(0))
    memo.add_memory(*BIKE, timestamp=at(1))
    [before] = nodes(memo, MEMORYOS_SEGMENT)
    heat = HeatParams()
    moment = at(10)

    pack = memo.retrieve("Do I like green tea?", timestamp=moment)

    assert pack["mid_term"][0]["memory_id"] == before.memory_id
    [after] = nodes(memo, MEMORYOS_SEGMENT)
    assert after.access_count == before.access_count + 1
    assert after.last_accessed_at == moment
    assert segment_heat(after, moment, heat) > segment_heat(before, moment, heat)
    # recency decays with the time constant: after one tau it is e^-1 of what it was
    later = segment_heat(after, moment + timedelta(seconds=heat.recency_tau_seconds), heat)
    assert abs((segment_heat(after, moment, heat) - later) - (1 - 2.718281828459045**-1)) < 1e-6
    fast = HeatParams(recency_tau_seconds=60)
    assert segment_heat(after, moment + timedelta(hours=1), fast) < segment_heat(after, moment, fast) - 0.99


def test_a_hot_segment_is_promoted_once_and_its_heat_reset(make_memoryos: Callable[..., Memoryos], script: Script) -> None:
    memo = make_memoryos(short_term_capacity=1, mid_term_heat_threshold=4.5)
    memo.add_memory(*TEA, timestamp=at(0))
    memo.add_memory(*TEA_AGAIN, timestamp=at(1))
    memo.add_memory(*BIKE, timestamp=at(2))  # the tea segment: 2 pages, heat 2 + recency
    assert script.calls["long"] == 0 and memo.get_user_profile() == ""

    memo.retrieve("green tea", timestamp=at(3))  # a visit: heat 3 + recency, still under 4.5
    assert script.calls["long"] == 0
    memo.retrieve("green tea", timestamp=at(4))  # heat 4 + recency: promoted right after

    assert script.calls["long"] == 1
    assert memo.get_user_profile() == "Ann loves green tea."
    [fact] = nodes(memo, MEMORYOS_KNOWLEDGE)
    assert (fact.key, fact.content) == ("user", "Ann drinks green tea")
    tea = next(segment for segment in nodes(memo, MEMORYOS_SEGMENT) if segment.content == TEA[0])
    assert tea.access_count == 0 and tea.meta["memoryos_interaction_length"] == 0
    memo.update(timestamp=at(4))
    assert script.calls["long"] == 1  # cooled down: not promoted again
    pack = memo.retrieve("green tea", timestamp=at(5))
    assert pack["profile"] == "Ann loves green tea."
    assert "User profile:" in pack["text"] and "Ann drinks green tea" in pack["text"]


def test_knowledge_over_capacity_evicts_the_least_recently_used(make_memoryos: Callable[..., Memoryos], script: Script) -> None:
    memo = make_memoryos(
        short_term_capacity=1,
        mid_term_heat_threshold=2.5,
        long_term_knowledge_capacity=2,
        similarity_threshold=0.8,
        overrides={"worker.memoryos_recall_long.knowledge_top_k": 1},
    )
    script.analysis = {
        "profile": "Ann.",
        "user_knowledge": ["Ann drinks tea", "Ann cycles"],
        "assistant_knowledge": ["I recommended oolong"],
    }
    memo.add_memory(*TEA, timestamp=at(0))
    memo.add_memory(*TEA_AGAIN, timestamp=at(1))  # TEA moves: tea segment, heat 1 + recency
    memo.add_memory(*BIKE, timestamp=at(2))  # TEA_AGAIN joins it: heat 2 + recency, promoted, then reset
    assert script.calls["long"] == 1
    assert sorted(fact.content for fact in nodes(memo, MEMORYOS_KNOWLEDGE)) == [
        "Ann cycles",
        "Ann drinks tea",
        "I recommended oolong",
    ]
    pack = memo.retrieve("Do I drink tea?", timestamp=at(3))  # uses "Ann drinks tea"; the tea segment: heat 1 + recency
    assert [record["content"] for record in pack["knowledge"]] == ["Ann drinks tea", "I recommended oolong"]
    script.analysis = {"profile": "Ann.", "user_knowledge": ["Ann plays piano"], "assistant_knowledge": []}
    memo.add_memory(*TEA_AGAIN, timestamp=at(4))  # BIKE moves: a segment of its own
    memo.add_memory(*PIANO, timestamp=at(5))  # the second tea page joins the tea segment: promoted again
    assert script.calls["long"] == 2

    user_facts = {fact.content for fact in nodes(memo, MEMORYOS_KNOWLEDGE) if fact.key == "user"}
    assert user_facts == {"Ann drinks tea", "Ann plays piano"}
    [evicted] = nodes(memo, MEMORYOS_KNOWLEDGE, MemoryStatus.EXPIRED)
    assert evicted.content == "Ann cycles"  # used least recently
    assistant = [fact.content for fact in nodes(memo, MEMORYOS_KNOWLEDGE) if fact.key == "assistant"]
    assert assistant == ["I recommended oolong"]  # each kind has its own capacity


def test_mid_term_over_capacity_evicts_the_coldest_segment_with_its_pages(
    make_memoryos: Callable[..., Memoryos], script: Script
) -> None:
    # multilingual-e5-small scores unrelated texts about 0.75: 0.8 keeps "green tea" off the bicycle
    memo = make_memoryos(short_term_capacity=1, mid_term_capacity=2, mid_term_heat_threshold=100.0, similarity_threshold=0.8)
    memo.add_memory(*TEA, timestamp=at(0))
    memo.add_memory(*BIKE, timestamp=at(1))  # tea segment
    memo.add_memory(*PIANO, timestamp=at(2))  # bike segment
    memo.retrieve("green tea", timestamp=at(3))  # the tea segment is visited: warmer than the bike one
    memo.add_memory("What should I cook tonight?", "Maybe pasta.", timestamp=at(4))  # piano segment: a third

    segments = nodes(memo, MEMORYOS_SEGMENT)
    assert sorted(segment.content for segment in segments) == sorted([TEA[0], PIANO[0]])
    [gone] = nodes(memo, MEMORYOS_SEGMENT, MemoryStatus.EXPIRED)
    assert gone.content == BIKE[0]
    expired_pages = nodes(memo, MEMORYOS_PAGE, MemoryStatus.EXPIRED)
    assert [page.meta["memoryos_segment_id"] for page in expired_pages] == [gone.memory_id]
