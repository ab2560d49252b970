"""Core memory blocks (`memoryscope.agent.blocks`) on a real SQLite file: created from their specs,
edited within their limits, persisted as state records (not memories), isolated per user, with
every version kept; blocks an older MemoryScope kept as memories move over on first use."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryscope.agent.blocks import BlockError, BlockSpec, CoreMemory, block_key
from memoryscope.history import ChangeSource
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores.base import MemoryFilter
from memoryscope.stores.legacy_agent import legacy_block_id
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.stores.state import StateKey, StateOwner, StateRecord

SPECS = (BlockSpec("persona", 60, "I am Sam, a helpful assistant."), BlockSpec("human", 40))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "core.db"


@pytest.fixture
def store(db_path: Path, local_embedding: LocalEmbedding) -> Iterator[SqliteMemoryStore]:
    with SqliteMemoryStore(path=db_path, embedding_model=local_embedding) as opened:
        yield opened


@pytest.fixture
def core(store: SqliteMemoryStore) -> CoreMemory:
    return CoreMemory(store, "ann", SPECS)


def stored_blocks(store: SqliteMemoryStore, user: str = "ann") -> dict[str, str]:
    return {record.key.name: record.value["text"] for record in store.list_state(StateOwner(user), "core_block")}


def test_blocks_are_created_from_their_specs_once(core: CoreMemory, store: SqliteMemoryStore) -> None:
    """The first read stores each block with its initial text and limit; the next finds them."""
    blocks = core.blocks()
    assert [(b.name, b.value, b.limit) for b in blocks.values()] == [
        ("persona", "I am Sam, a helpful assistant.", 60),
        ("human", "", 40),
    ]
    assert stored_blocks(store) == {"persona": "I am Sam, a helpful assistant.", "human": ""}
    [record] = store.read_state([block_key("ann", "", "", "human")])
    assert (record.version, record.value) == (1, {"text": "", "limit": 40})
    assert core.blocks() == blocks  # nothing made twice
    assert store.read_state([block_key("ann", "", "", "human")]) == [record]
    assert store.count(MemoryFilter("ann")) == 0  # blocks are not memories


def test_edits_persist_and_survive_reopening_the_store(db_path: Path, local_embedding: LocalEmbedding) -> None:
    with SqliteMemoryStore(path=db_path, embedding_model=local_embedding) as store:
        core = CoreMemory(store, "ann", SPECS)
        core.append("human", "Ann plays the guitar.")
        core.append("human", "Lives in Kyoto.")
        assert core.replace("human", "guitar", "cello").value == "Ann plays the cello.\nLives in Kyoto."
        core.set("persona", "I am Sam.")
    with SqliteMemoryStore(path=db_path, embedding_model=local_embedding) as reopened:
        again = CoreMemory(reopened, "ann", SPECS)
        assert {name: block.value for name, block in again.blocks().items()} == {
            "persona": "I am Sam.",
            "human": "Ann plays the cello.\nLives in Kyoto.",
        }


def test_an_append_over_the_limit_is_refused_and_nothing_is_written(core: CoreMemory, store: SqliteMemoryStore) -> None:
    core.append("human", "Ann plays the guitar.")  # 21 of 40
    before = store.state_versions(block_key("ann", "", "", "human"))
    with pytest.raises(BlockError) as refused:
        core.append("human", "She also keeps bees and goats.")  # 21 + 1 + 30 = 52
    assert str(refused.value) == (
        'core memory block "human" would hold 52 characters, over its limit of 40: replace or shorten something first'
    )
    assert core.get("human").value == "Ann plays the guitar."
    assert store.state_versions(block_key("ann", "", "", "human")) == before


def test_a_replace_over_the_limit_is_refused(core: CoreMemory) -> None:
    core.append("human", "Ann plays the guitar.")
    with pytest.raises(BlockError, match=r'block "human" would hold 58 characters, over its limit of 40'):
        core.replace("human", "guitar", "guitar, the cello and the bassoon in a band")
    assert core.get("human").value == "Ann plays the guitar."


def test_the_limit_error_shows_thousands_separators(store: SqliteMemoryStore) -> None:
    core = CoreMemory(store, "ann", [BlockSpec("human", 2000, "x" * 2000)])
    with pytest.raises(BlockError, match="would hold 2,140 characters, over its limit of 2,000"):
        core.set("human", "y" * 2140)


def test_replace_needs_text_that_is_there(core: CoreMemory) -> None:
    core.append("human", "Ann plays the guitar.")
    with pytest.raises(BlockError, match=r'block "human" does not contain "violin": copy the text'):
        core.replace("human", "violin", "cello")
    with pytest.raises(BlockError, match="old_content is empty"):
        core.replace("human", "", "cello")
    assert core.get("human").value == "Ann plays the guitar."


def test_replace_with_nothing_deletes_the_text_and_its_line(store: SqliteMemoryStore) -> None:
    core = CoreMemory(store, "ann", [BlockSpec("human", 100)])
    core.append("human", "Ann plays the guitar.")
    core.append("human", "Lives in Kyoto.")
    core.append("human", "Likes tea.")
    assert core.replace("human", "Lives in Kyoto.", "").value == "Ann plays the guitar.\nLikes tea."
    assert core.replace("human", " the guitar", "").value == "Ann plays.\nLikes tea."


def test_an_unknown_block_is_refused_naming_the_known_ones(core: CoreMemory) -> None:
    with pytest.raises(BlockError) as refused:
        core.append("humna", "plays the guitar")
    assert str(refused.value) == 'there is no core memory block "humna". Did you mean "human"? The blocks are: "persona", "human"'
    for call in (lambda: core.get("notes"), lambda: core.history("notes"), lambda: core.set_many({"notes": "x"})):
        with pytest.raises(BlockError, match='no core memory block "notes"'):
            call()


def test_an_empty_append_is_refused(core: CoreMemory) -> None:
    with pytest.raises(BlockError, match="nothing to append"):
        core.append("human", "  ")


def test_history_lists_every_version_oldest_first(core: CoreMemory) -> None:
    core.append("human", "Ann plays the guitar.")
    core.replace("human", "guitar", "cello")
    core.set("human", "Ann plays the cello.")  # the same text: no new version
    core.set("human", "")
    changes = core.history("human")
    assert [change.value for change in changes] == ["", "Ann plays the guitar.", "Ann plays the cello.", ""]
    times = [change.time for change in changes]
    assert times == sorted(times) and all(time.tzinfo is not None for time in times)


def test_two_users_blocks_are_isolated(store: SqliteMemoryStore) -> None:
    ann, bob = CoreMemory(store, "ann", SPECS), CoreMemory(store, "bob", SPECS)
    ann.append("human", "Ann plays the guitar.")
    bob.append("human", "Bob keeps bees.")
    in_a_workspace = CoreMemory(store, "ann", SPECS, workspace="shop")
    assert ann.get("human").value == "Ann plays the guitar."
    assert bob.get("human").value == "Bob keeps bees."
    assert in_a_workspace.get("human").value == ""
    assert [c.value for c in bob.history("human")] == ["", "Bob keeps bees."]
    assert stored_blocks(store, "bob") == {"persona": "I am Sam, a helpful assistant.", "human": "Bob keeps bees."}


def test_render_shows_each_block_with_its_size_in_spec_order(core: CoreMemory) -> None:
    core.append("human", "Ann plays the guitar.")
    assert core.render() == (
        '<persona characters="30/60">\nI am Sam, a helpful assistant.\n</persona>\n'
        '<human characters="21/40">\nAnn plays the guitar.\n</human>'
    )


def test_set_many_writes_all_or_nothing(core: CoreMemory) -> None:
    with pytest.raises(BlockError, match='block "human" would hold 41 characters'):
        core.set_many({"persona": "I am Kim.", "human": "z" * 41})
    assert core.get("persona").value == "I am Sam, a helpful assistant."
    blocks = core.set_many({"persona": "I am Kim.", "human": "Ann."})
    assert {name: block.value for name, block in blocks.items()} == {"persona": "I am Kim.", "human": "Ann."}
    assert core.get("human").value == "Ann."


def test_a_block_over_a_lowered_limit_may_only_shrink(store: SqliteMemoryStore) -> None:
    CoreMemory(store, "ann", [BlockSpec("human", 40)]).set("human", "Ann plays the guitar and the cello.")  # 35
    smaller = CoreMemory(store, "ann", [BlockSpec("human", 20)])
    assert smaller.get("human").limit == 20
    assert 'characters="35/20"' in smaller.render()
    with pytest.raises(BlockError, match="over its limit of 20"):
        smaller.append("human", "Bees.")
    assert smaller.replace("human", " and the cello", "").value == "Ann plays the guitar."


def test_blocks_are_stored_without_embedding_them(store: SqliteMemoryStore, local_embedding: LocalEmbedding) -> None:
    """An edit costs no embedding call; an empty block would be no input for a remote model."""
    calls: list[int] = []
    embed = local_embedding.embed_passages
    local_embedding.embed_passages = lambda texts: calls.append(len(texts)) or embed(texts)  # type: ignore[method-assign]
    try:
        CoreMemory(store, "ann", SPECS).append("human", "Ann plays the guitar.")
    finally:
        del local_embedding.embed_passages
    assert calls == [] and store.get_vectors([]) == {}


def test_blocks_kept_as_memories_by_an_older_version_move_over_with_their_history(store: SqliteMemoryStore) -> None:
    """A store written before state records: each block a `core_memory` memory (zero vector), its
    versions in the memory history. The first use moves it, every version with its time, and
    deletes the memory."""
    owner = StateOwner("ann")
    memory_id = legacy_block_id(owner, "human")
    old = MemoryNode(
        user_name="ann", memory_id=memory_id, memory_type=MemoryType.CORE_MEMORY, key="human", content="", meta={"limit": 40}
    )
    zeros = np.zeros((1, store.dimension), dtype=np.float32)
    store.upsert([old], vectors=zeros, change=ChangeSource("core_memory_create"))
    for text in ("Ann plays the guitar.", "Ann plays the cello."):
        [node] = store.get([memory_id])
        store.upsert([node.replace(content=text)], vectors=zeros, change=ChangeSource("core_memory_append", "run-1"))
    core = CoreMemory(store, "ann", SPECS)
    assert core.get("human").value == "Ann plays the cello."
    assert [change.value for change in core.history("human")] == ["", "Ann plays the guitar.", "Ann plays the cello."]
    assert store.get([memory_id]) == [] and store.count(MemoryFilter("ann", status=None)) == 0
    [versioned] = store.state_versions(block_key("ann", "", "", "human"), limit=1)
    assert (versioned.version, versioned.operation, versioned.run_id) == (3, "core_memory_append", "run-1")
    core.append("human", "Keeps bees.")  # and edits go on from the moved versions
    assert store.read_state([block_key("ann", "", "", "human")])[0].version == 4


def test_specs_are_checked() -> None:
    with pytest.raises(ValueError, match="use a letter"):
        BlockSpec("my block", 100)
    with pytest.raises(ValueError, match="1 or more"):
        BlockSpec("human", 0)
    with pytest.raises(ValueError, match="over the limit of 5"):
        BlockSpec("human", 5, "too long")


class _WritesBetween:
    """A store through which one `CoreMemory` reads: right after its first read of the blocks,
    `meanwhile` runs (another process editing the same block), then its own write follows."""

    def __init__(self, store: SqliteMemoryStore, meanwhile: Callable[[], object]) -> None:
        self._store = store
        self._meanwhile: Callable[[], object] | None = meanwhile

    def read_state(self, keys: list[StateKey]) -> list[StateRecord]:
        found = self._store.read_state(keys)
        run, self._meanwhile = self._meanwhile, None
        if run is not None and found:
            run()
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_an_edit_made_meanwhile_by_another_process_is_not_lost(db_path: Path, local_embedding: LocalEmbedding) -> None:
    specs = (BlockSpec("human", 400),)
    with (
        SqliteMemoryStore(path=db_path, embedding_model=local_embedding) as first,
        SqliteMemoryStore(path=db_path, embedding_model=local_embedding) as second,
    ):
        CoreMemory(first, "ann", specs).append("human", "Ann plays the guitar.")
        other = CoreMemory(second, "ann", specs)
        racing = CoreMemory(_WritesBetween(first, lambda: other.append("human", "Ann keeps bees.")), "ann", specs)  # type: ignore[arg-type]
        racing.append("human", "Ann lives in Kyoto.")
        value = CoreMemory(first, "ann", specs).get("human").value
    assert value.split("\n") == ["Ann plays the guitar.", "Ann keeps bees.", "Ann lives in Kyoto."]


def test_a_replace_whose_text_went_meanwhile_is_refused_and_writes_nothing(
    db_path: Path, local_embedding: LocalEmbedding
) -> None:
    specs = (BlockSpec("human", 400),)
    with (
        SqliteMemoryStore(path=db_path, embedding_model=local_embedding) as first,
        SqliteMemoryStore(path=db_path, embedding_model=local_embedding) as second,
    ):
        CoreMemory(first, "ann", specs).append("human", "Ann plays the guitar.")
        other = CoreMemory(second, "ann", specs)
        racing = CoreMemory(
            _WritesBetween(first, lambda: other.replace("human", "guitar", "cello")), "ann", specs  # type: ignore[arg-type]
        )
        with pytest.raises(BlockError, match="does not contain"):
            racing.replace("human", "guitar", "drums")
        assert CoreMemory(first, "ann", specs).get("human").value == "Ann plays the cello."


def test_agents_appending_to_one_block_at_once_keep_every_line(db_path: Path, local_embedding: LocalEmbedding) -> None:
    specs = (BlockSpec("human", 4000),)
    with SqliteMemoryStore(path=db_path, embedding_model=local_embedding) as opened:
        CoreMemory(opened, "ann", specs).get("human")  # the block exists before the race
    stores = [SqliteMemoryStore(path=db_path, embedding_model=local_embedding) for _ in range(4)]
    try:
        def agent(number: int) -> None:
            core = CoreMemory(stores[number], "ann", specs)
            for line in range(5):
                core.append("human", f"agent {number} line {line}")

        workers = [threading.Thread(target=agent, args=(number,)) for number in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        value = CoreMemory(stores[0], "ann", specs).get("human").value
    finally:
        for store in stores:
            store.close()
    assert sorted(value.split("\n")) == sorted(f"agent {n} line {i}" for n in range(4) for i in range(5))
