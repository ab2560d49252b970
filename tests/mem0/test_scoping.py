"""mem0's scoping by filters, against a real SQLite store: a memory carries every id it was added
with, and a `search`, `get_all` or `delete_all` naming some ids matches every memory that has them
(mem0's `_build_filters_and_metadata`); memories of a `user_id` are read only by naming it."""

from __future__ import annotations

import pytest

from memoryscope.errors import InvalidInputError
from memoryscope.mem0 import Memory

# text -> the ids it is added with
ADDED: dict[str, dict[str, str]] = {
    "alice likes green tea": {"user_id": "alice"},
    "alice plans a trip to Kyoto": {"user_id": "alice", "run_id": "trip"},
    "alice wants short answers from the bot": {"user_id": "alice", "agent_id": "bot"},
    "alice asked the bot for hotels in Kyoto": {"user_id": "alice", "agent_id": "bot", "run_id": "trip"},
    "the bot answers in English": {"agent_id": "bot"},
    "the trip run started in May": {"run_id": "trip"},
    "the bot booked a hotel for the trip": {"agent_id": "bot", "run_id": "trip"},
    "bob likes coffee": {"user_id": "bob"},
    "bob asked the bot about jazz": {"user_id": "bob", "agent_id": "bot"},
}

# the ids read -> the memories found (mem0 finds the same, but for agent/run-only reads, which in
# mem0 also find alice's and bob's memories of that agent or run: here a user is read by name only)
MATRIX: list[tuple[dict[str, str], set[str]]] = [
    ({"user_id": "alice"}, {text for text, ids in ADDED.items() if ids.get("user_id") == "alice"}),
    ({"user_id": "alice", "run_id": "trip"}, {"alice plans a trip to Kyoto", "alice asked the bot for hotels in Kyoto"}),
    (
        {"user_id": "alice", "agent_id": "bot"},
        {"alice wants short answers from the bot", "alice asked the bot for hotels in Kyoto"},
    ),
    ({"user_id": "alice", "agent_id": "bot", "run_id": "trip"}, {"alice asked the bot for hotels in Kyoto"}),
    ({"agent_id": "bot"}, {"the bot answers in English", "the bot booked a hotel for the trip"}),
    ({"run_id": "trip"}, {"the trip run started in May", "the bot booked a hotel for the trip"}),
    ({"agent_id": "bot", "run_id": "trip"}, {"the bot booked a hotel for the trip"}),
    ({"user_id": "bob"}, {"bob likes coffee", "bob asked the bot about jazz"}),
    ({"user_id": "carol"}, set()),
]


def _name(ids: dict[str, str]) -> str:
    return "+".join(f"{key}={value}" for key, value in ids.items())


@pytest.fixture(scope="module")
def filled(module_memory: Memory) -> Memory:
    """One store with every memory of ADDED, shared by the read-only tests of this module."""
    for text, ids in ADDED.items():
        module_memory.add(text, infer=False, **ids)
    return module_memory


def _memories(answer: dict[str, list[dict[str, object]]]) -> set[str]:
    return {str(item["memory"]) for item in answer["results"]}


@pytest.mark.parametrize(("ids", "expected"), MATRIX, ids=[_name(ids) for ids, _ in MATRIX])
def test_get_all_finds_every_memory_that_has_the_ids_given(filled: Memory, ids: dict[str, str], expected: set[str]) -> None:
    assert _memories(filled.get_all(filters=ids)) == expected
    assert _memories(filled.get_all(**ids)) == expected  # the older keyword form alike


@pytest.mark.parametrize(("ids", "expected"), MATRIX, ids=[_name(ids) for ids, _ in MATRIX])
def test_search_finds_among_every_memory_that_has_the_ids_given(filled: Memory, ids: dict[str, str], expected: set[str]) -> None:
    found = filled.search("what did they ask for, like or plan?", filters=ids, top_k=20)["results"]
    assert {str(item["memory"]) for item in found} == expected
    for item in found:  # each answer names the ids its memory was added with, as mem0's do
        assert {key: item[key] for key in ("user_id", "agent_id", "run_id") if key in item} == ADDED[str(item["memory"])]


def test_search_ranks_across_runs_and_agents(filled: Memory) -> None:
    best = filled.search("hotels in Kyoto", user_id="alice", top_k=1)["results"]
    assert [item["memory"] for item in best] == ["alice asked the bot for hotels in Kyoto"]  # in agent bot, run trip


def test_delete_all_deletes_every_memory_that_has_the_ids_given(memory: Memory) -> None:
    for text, ids in ADDED.items():
        memory.add(text, infer=False, **ids)
    remaining = set(ADDED)

    def gone(ids: dict[str, str]) -> None:
        memory.delete_all(**ids)
        remaining.difference_update(expected for given, found in MATRIX if given == ids for expected in found)
        everyone = [{"user_id": "alice"}, {"user_id": "bob"}, {"agent_id": "bot"}, {"run_id": "trip"}]
        left = set().union(*(_memories(memory.get_all(**read)) for read in everyone))
        left |= _memories(memory.get_all(agent_id="nobody")) | _memories(memory.get_all(user_id="alice", agent_id="bot"))
        assert left == remaining, _name(ids)

    gone({"user_id": "alice", "run_id": "trip"})  # alice's two memories of the trip, whatever the agent
    assert _memories(memory.get_all(user_id="alice")) == {"alice likes green tea", "alice wants short answers from the bot"}
    gone({"agent_id": "bot"})  # the bot's memories added without a user (with or without a run)
    assert _memories(memory.get_all(run_id="trip")) == {"the trip run started in May"}
    assert "bob asked the bot about jazz" in _memories(memory.get_all(user_id="bob"))  # a user's stay theirs
    gone({"user_id": "alice"})
    gone({"run_id": "trip"})
    assert remaining == {"bob likes coffee", "bob asked the bot about jazz"}


def test_add_writes_exactly_the_ids_given_and_still_needs_one(memory: Memory) -> None:
    (added,) = memory.add("alice asked the bot", user_id="alice", agent_id="bot", infer=False)["results"]
    stored = memory.get(added["id"])
    assert stored is not None and (stored["user_id"], stored["agent_id"]) == ("alice", "bot") and "run_id" not in stored
    with pytest.raises(InvalidInputError, match="at least one of 'user_id', 'agent_id' or 'run_id'"):
        memory.delete_all()
    with pytest.raises(InvalidInputError, match="at least one of"):
        memory.get_all(filters={"category": "travel"})  # metadata alone scopes nothing


def test_metadata_filters_narrow_within_the_ids(memory: Memory) -> None:
    memory.add("alice flies to Osaka", user_id="alice", run_id="r1", metadata={"category": "travel"}, infer=False)
    memory.add("alice cooks ramen", user_id="alice", agent_id="chef", metadata={"category": "food"}, infer=False)
    assert _memories(memory.get_all(filters={"user_id": "alice", "category": "travel"})) == {"alice flies to Osaka"}
    found = memory.search("what does alice do?", filters={"user_id": "alice", "category": "food"})
    assert _memories(found) == {"alice cooks ramen"}
