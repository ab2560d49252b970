"""An agent's persisted state (`memoryscope.agent.state`) on a real SQLite file: saved and loaded
whole as a state record (not a memory), checkpoints with the block values, per user; blocks and
state out of retrieval and listings, gone with `delete_all`, moved by an export; a state an older
MemoryScope kept as memories moved over on first use."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryscope import MemoryScope
from memoryscope.agent.blocks import BlockSpec, CoreMemory
from memoryscope.agent.state import AgentState, AgentStateError, AgentStateStore
from memoryscope.history import ChangeSource
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores.base import MemoryFilter
from memoryscope.stores.legacy_agent import legacy_state_id
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.stores.state import StateKey, StateOwner

NOON = datetime(2024, 10, 26, 12, 0, tzinfo=timezone.utc)
QUEUE: list[dict[str, Any]] = [
    {"role": "user", "content": "I moved to Kyoto"},
    {
        "role": "assistant",
        "content": "Noting that down.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "core_memory_append", "arguments": '{"label": "human", "content": "lives in Kyoto"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "name": "core_memory_append", "content": '{"status": "OK"}'},
    {"role": "system", "content": "heartbeat: 京都 (function called)"},
]


def full_state() -> AgentState:
    return AgentState(
        summary="Ann talked about moving.",
        queue=json.loads(json.dumps(QUEUE)),
        counters={"steps": 3, "flushes": 1, "evicted_messages": 12},
        last_warning_at=NOON,
        updated_at=NOON + timedelta(minutes=5),
    )


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def store(db_path: Path, local_embedding: LocalEmbedding) -> Iterator[SqliteMemoryStore]:
    with SqliteMemoryStore(path=db_path, embedding_model=local_embedding) as opened:
        yield opened


def test_nothing_saved_loads_an_empty_state(store: SqliteMemoryStore) -> None:
    assert AgentStateStore(store, "ann").load() == AgentState()
    assert store.count(MemoryFilter("ann")) == 0  # loading writes nothing


def test_the_state_round_trips_with_tool_calls_in_the_queue(store: SqliteMemoryStore) -> None:
    states = AgentStateStore(store, "ann")
    states.save(full_state())
    assert states.load() == full_state()
    [record] = store.read_state([StateKey(StateOwner("ann"), "agent_state", "state")])
    assert (record.version, record.value["summary"]) == (1, "Ann talked about moving.")
    assert store.count(MemoryFilter("ann")) == 0  # not a memory


def test_a_save_replaces_the_state_and_changing_the_loaded_one_changes_nothing_saved(store: SqliteMemoryStore) -> None:
    states = AgentStateStore(store, "ann")
    states.save(full_state())
    loaded = states.load()
    loaded.queue[1]["tool_calls"][0]["id"] = "changed"
    loaded.counters["steps"] = 99
    assert states.load() == full_state()
    states.save(AgentState(summary="", queue=[{"role": "user", "content": "hi"}]))
    again = states.load()
    assert (again.summary, again.queue, again.counters, again.last_warning_at) == (
        "",
        [{"role": "user", "content": "hi"}],
        {},
        None,
    )
    assert again.updated_at is not None  # the save's time when the state had none
    assert [record.version for record in store.state_versions(StateKey(StateOwner("ann"), "agent_state", "state"))] == [2]


def test_the_state_survives_reopening_the_store(db_path: Path, local_embedding: LocalEmbedding) -> None:
    with SqliteMemoryStore(path=db_path, embedding_model=local_embedding) as store:
        AgentStateStore(store, "ann").save(full_state())
    with SqliteMemoryStore(path=db_path, embedding_model=local_embedding) as reopened:
        assert AgentStateStore(reopened, "ann").load() == full_state()


def test_states_are_per_user_and_workspace(store: SqliteMemoryStore) -> None:
    AgentStateStore(store, "ann").save(full_state())
    assert AgentStateStore(store, "bob").load() == AgentState()
    assert AgentStateStore(store, "ann", workspace="shop").load() == AgentState()
    AgentStateStore(store, "ann").save_checkpoint("a", full_state(), {})
    assert AgentStateStore(store, "bob").checkpoints() == []


def test_checkpoints_keep_the_state_and_the_blocks(store: SqliteMemoryStore) -> None:
    states = AgentStateStore(store, "ann")
    states.save_checkpoint("before-trip", full_state(), {"persona": "I am Sam.", "human": "Ann lives in Osaka."})
    states.save_checkpoint("after trip", AgentState(summary="later"), {"human": "Ann lives in Kyoto."})
    states.save(AgentState(summary="now"))  # the live state is not a checkpoint
    assert [name for name, _ in states.checkpoints()] == ["before-trip", "after trip"]
    assert all(when.tzinfo is not None for _, when in states.checkpoints())
    state, blocks = states.load_checkpoint("before-trip")
    assert state == full_state()
    assert blocks == {"persona": "I am Sam.", "human": "Ann lives in Osaka."}
    assert states.load_checkpoint(" after trip ")[1] == {"human": "Ann lives in Kyoto."}
    assert states.load().summary == "now"


def test_saving_a_checkpoint_again_replaces_it(store: SqliteMemoryStore) -> None:
    states = AgentStateStore(store, "ann")
    states.save_checkpoint("daily", AgentState(summary="monday"), {"human": "a"})
    states.save_checkpoint("daily", AgentState(summary="tuesday"), {"human": "b"})
    assert [name for name, _ in states.checkpoints()] == ["daily"]
    state, blocks = states.load_checkpoint("daily")
    assert (state.summary, blocks) == ("tuesday", {"human": "b"})


def test_an_unknown_checkpoint_is_an_error_listing_the_saved_ones(store: SqliteMemoryStore) -> None:
    states = AgentStateStore(store, "ann")
    with pytest.raises(AgentStateError, match=r"no checkpoint 'trip'\. Saved checkpoints: none yet"):
        states.load_checkpoint("trip")
    states.save_checkpoint("before-trip", full_state(), {})
    states.save_checkpoint("monday", full_state(), {})
    with pytest.raises(AgentStateError) as unknown:
        states.load_checkpoint("before-trp")
    assert str(unknown.value) == "no checkpoint 'before-trp'. Did you mean 'before-trip'? Saved checkpoints: before-trip, monday"
    with pytest.raises(ValueError, match="needs a name"):  # the CLI catches ValueError
        states.save_checkpoint("  ", full_state(), {})


def test_a_checkpoint_restores_blocks_and_state(store: SqliteMemoryStore) -> None:
    """What `/save` and `/load` do: the block values go back with the state."""
    specs = (BlockSpec("persona", 100, "I am Sam."), BlockSpec("human", 100))
    core, states = CoreMemory(store, "ann", specs), AgentStateStore(store, "ann")
    core.append("human", "Ann lives in Osaka.")
    states.save_checkpoint("osaka", full_state(), {name: block.value for name, block in core.blocks().items()})
    core.replace("human", "Osaka", "Kyoto")
    states.save(AgentState(summary="moved"))
    state, blocks = states.load_checkpoint("osaka")
    core.set_many(blocks)
    states.save(state)
    assert core.get("human").value == "Ann lives in Osaka."
    assert states.load() == full_state()
    assert [change.value for change in core.history("human")] == [
        "",
        "Ann lives in Osaka.",
        "Ann lives in Kyoto.",
        "Ann lives in Osaka.",
    ]


def test_from_dict_takes_missing_keys_as_defaults_and_ignores_unknown_ones() -> None:
    assert AgentState.from_dict({}) == AgentState()
    assert AgentState.from_dict({"summary": "s", "added_later": 1}) == AgentState(summary="s")
    assert AgentState.from_dict(full_state().to_dict()) == full_state()
    assert json.loads(json.dumps(full_state().to_dict())) == full_state().to_dict()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"summary": 3}, "summary must be text"),
        ({"queue": {"role": "user"}}, "queue must be a list of messages"),
        ({"queue": ["hi"]}, "queue message 0 must be an object"),
        ({"queue": [{"role": "robot", "content": "hi"}]}, "queue message 0 has role 'robot'"),
        ({"queue": [{"role": "user", "content": 5}]}, "content must be text, a list of parts or null"),
        ({"queue": [{"role": "assistant", "tool_calls": "call"}]}, "tool_calls must be a list of objects"),
        ({"queue": [{"role": "tool", "tool_call_id": 1, "content": "x"}]}, "tool_call_id must be text"),
        ({"counters": {"steps": "3"}}, "counter 'steps' must be a whole number"),
        ({"counters": {"steps": True}}, "counter 'steps' must be a whole number"),
        ({"last_warning_at": "yesterday"}, "last_warning_at 'yesterday' is not an ISO 8601 time"),
        ({"updated_at": "2024-10-26T12:00:00"}, "updated_at '2024-10-26T12:00:00' has no time zone"),
    ],
)
def test_from_dict_rejects_wrong_types_naming_them(data: dict[str, Any], problem: str) -> None:
    with pytest.raises(AgentStateError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        AgentState.from_dict(data)


def test_a_bad_queue_is_refused_before_anything_is_saved(store: SqliteMemoryStore) -> None:
    states = AgentStateStore(store, "ann")
    states.save(full_state())
    with pytest.raises(AgentStateError, match="has role 'robot'"):
        states.save(AgentState(queue=[{"role": "robot", "content": "hi"}]))
    assert states.load() == full_state()


def test_a_state_kept_as_memories_by_an_older_version_moves_over(store: SqliteMemoryStore) -> None:
    """A store written before state records: the state and each checkpoint an `agent_state` memory
    (JSON in `meta`, zero vector). The first use moves them and deletes the memories."""
    owner = StateOwner("ann")
    data = full_state().to_dict()
    summary = data.pop("summary")
    old = [
        MemoryNode(user_name="ann", memory_id=legacy_state_id(owner, "state"), memory_type=MemoryType.AGENT_STATE,
                   key="state", content=summary, meta={"state": data}),
        MemoryNode(user_name="ann", memory_id=legacy_state_id(owner, "checkpoint:osaka"), memory_type=MemoryType.AGENT_STATE,
                   key="checkpoint:osaka", content="", meta={"state": {}, "blocks": {"human": "Ann lives in Osaka."}}),
    ]  # fmt: skip
    store.upsert(old, vectors=np.zeros((2, store.dimension), dtype=np.float32), change=ChangeSource("agent_state"))
    states = AgentStateStore(store, "ann")
    assert states.load() == full_state()
    assert [name for name, _ in states.checkpoints()] == ["osaka"]
    assert states.load_checkpoint("osaka")[1] == {"human": "Ann lives in Osaka."}
    assert store.count(MemoryFilter("ann", status=None)) == 0


# -- the new types beside the others: retrieval, listing, deleting ---------------------------------


@pytest.fixture
def scope(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryScope]:
    for name in ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_STORE_PATH"):
        monkeypatch.delenv(name, raising=False)
    with MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "api.db")}) as opened:
        yield opened


def agent_memories(scope: MemoryScope) -> None:
    """A block and a saved state that both say what the user's own memory says."""
    assert scope.store is not None
    CoreMemory(scope.store, "ann", [BlockSpec("human", 200)]).append("human", "Ann plays the guitar")
    AgentStateStore(scope.store, "ann").save(
        AgentState(summary="Ann plays the guitar", queue=[{"role": "user", "content": "I play the guitar"}])
    )
    scope.add("Ann plays the guitar", user_id="ann", infer=False)


def test_retrieval_and_listings_never_show_blocks_or_states(scope: MemoryScope) -> None:
    agent_memories(scope)
    assert scope.store is not None
    assert len(scope.store.search(MemoryFilter("ann"), query="guitar")) == 1  # not memories: the store has one
    found = scope.search("Does Ann play the guitar?", user_id="ann", top_k=10)
    assert [(record.memory_type, record.memory) for record in found] == [("obs_customized", "Ann plays the guitar")]
    assert [record.memory_type for record in scope.get_all("ann")] == ["obs_customized"]


def test_delete_all_takes_the_agent_state_too(scope: MemoryScope) -> None:
    agent_memories(scope)
    assert scope.delete_all("ann") == 1
    assert scope.store is not None and scope.store.count(MemoryFilter("ann")) == 0
    assert AgentStateStore(scope.store, "ann").load() == AgentState()
    assert CoreMemory(scope.store, "ann", [BlockSpec("human", 200)]).get("human").value == ""


def test_blocks_and_state_work_on_elasticsearch(local_embedding: LocalEmbedding) -> None:
    """On Elasticsearch the blocks and the state are documents of the `<index>-state` index."""
    pytest.importorskip("elasticsearch", reason='needs the Elasticsearch client: pip install "memoryscope[elasticsearch]"')
    from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore
    from memoryscope.testing.fake_elasticsearch import FakeElasticsearch

    with FakeElasticsearch() as server, ElasticsearchMemoryStore(hosts=[server.url], embedding_model=local_embedding) as store:
        core = CoreMemory(store, "ann", [BlockSpec("persona", 100, "I am Sam."), BlockSpec("human", 100)])
        core.append("human", "Ann plays the guitar.")
        core.replace("human", "guitar", "cello")
        states = AgentStateStore(store, "ann")
        states.save(full_state())
        states.save_checkpoint("one", full_state(), {"human": "x"})
        assert core.get("human").value == "Ann plays the cello."
        assert [change.value for change in core.history("human")] == ["", "Ann plays the guitar.", "Ann plays the cello."]
        assert states.load() == full_state()
        assert [name for name, _ in states.checkpoints()] == ["one"]


def test_blocks_and_state_move_with_an_export(store: SqliteMemoryStore, tmp_path: Path, local_embedding: LocalEmbedding) -> None:
    """`memoryscope export` / `import` carry an agent's memories, empty ones included, with the block history."""
    from memoryscope.transfer.jsonl import export_memories, import_memories

    specs = (BlockSpec("persona", 100, "I am Sam."), BlockSpec("human", 100))
    core = CoreMemory(store, "ann", specs)
    core.append("human", "Ann plays the guitar.")
    AgentStateStore(store, "ann").save(full_state())
    AgentStateStore(store, "ann").save_checkpoint("one", AgentState(), {"human": ""})
    export_memories(store, tmp_path / "ann.jsonl", user_name="ann")
    with SqliteMemoryStore(path=tmp_path / "other.db", embedding_model=local_embedding) as other:
        assert import_memories(other, tmp_path / "ann.jsonl") == 0  # no memories: state records
        moved = CoreMemory(other, "ann", specs)
        assert {name: block.value for name, block in moved.blocks().items()} == {
            "persona": "I am Sam.",
            "human": "Ann plays the guitar.",
        }
        assert [change.value for change in moved.history("human")] == ["", "Ann plays the guitar."]
        assert AgentStateStore(other, "ann").load() == full_state()
        state, blocks = AgentStateStore(other, "ann").load_checkpoint("one")
        assert (state.summary, state.queue, blocks) == ("", [], {"human": ""})
