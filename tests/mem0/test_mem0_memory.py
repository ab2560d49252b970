"""`memoryscope.mem0.Memory` offline (no LLM): mem0's verbs, keyword forms and answer shapes over
a real SQLite store (how user_id, agent_id and run_id scope them: `test_scoping`)."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memoryscope.door import MemoryNotFoundError
from memoryscope.errors import InvalidInputError
from memoryscope.mem0 import AsyncMemory, Memory

ITEM_KEYS = {"id", "memory", "hash", "metadata", "score", "created_at", "updated_at"}


def test_memory_with_no_arguments_keeps_memories_in_the_embedded_store(memory: Memory, store_path: Path) -> None:
    added = memory.add(
        [
            {"role": "system", "content": "You are a helpful AI."},
            {"role": "user", "content": "I love hiking in the Alps"},
            {"role": "assistant", "content": "That sounds wonderful!"},
        ],
        user_id="alice",
    )
    # no LLM: the messages are kept as they are (the system message is not), each an ADD
    assert [(item["memory"], item["event"], item["role"]) for item in added["results"]] == [
        ("I love hiking in the Alps", "ADD", "user"),
        ("That sounds wonderful!", "ADD", "assistant"),
    ]
    assert store_path.exists()


def test_search_takes_the_newer_and_the_older_keyword_forms_alike(memory: Memory) -> None:
    memory.add("I love hiking in the Alps", user_id="alice", infer=False, metadata={"source": "chat"})
    memory.add("My sister keeps bees", user_id="alice", infer=False)
    newer = memory.search(query="where do I go hiking?", filters={"user_id": "alice"}, top_k=1)
    older = memory.search("where do I go hiking?", user_id="alice", limit=1)
    assert newer == older
    (hit,) = newer["results"]
    assert set(hit) == ITEM_KEYS | {"user_id"}
    assert hit["memory"] == "I love hiking in the Alps" and hit["user_id"] == "alice"
    assert hit["hash"] == hashlib.md5(b"I love hiking in the Alps").hexdigest()
    assert hit["metadata"] == {"source": "chat"} and isinstance(hit["score"], float)
    # the other filters are conditions on metadata
    only_chat = memory.search("bees or hiking", filters={"user_id": "alice", "source": "chat"})
    assert [item["memory"] for item in only_chat["results"]] == ["I love hiking in the Alps"]


def test_search_threshold_keeps_scores_at_least_it_and_is_checked(memory: Memory) -> None:
    memory.add(["I love hiking in the Alps", "My sister keeps bees"], user_id="alice", infer=False)
    everything = memory.search("hiking in the Alps", filters={"user_id": "alice"})["results"]
    best = min(1.0, max(item["score"] for item in everything))  # a threshold is 0 to 1
    kept = memory.search("hiking in the Alps", filters={"user_id": "alice"}, threshold=best)["results"]
    assert [item["memory"] for item in kept] == ["I love hiking in the Alps"]
    assert len(everything) == 2 and all(item["score"] >= best for item in kept)
    with pytest.raises(InvalidInputError, match=r"threshold 1\.5 is out of range"):
        memory.search("hiking", filters={"user_id": "alice"}, threshold=1.5)


def test_search_and_get_all_need_an_id_and_refuse_two_different_ones(memory: Memory) -> None:
    with pytest.raises(InvalidInputError, match="at least one of 'user_id', 'agent_id' or 'run_id'"):
        memory.search("anything", filters={"source": "chat"})
    with pytest.raises(InvalidInputError, match="user_id is given twice"):
        memory.get_all(user_id="alice", filters={"user_id": "bob"})
    with pytest.raises(InvalidInputError, match="cannot contain whitespace"):
        memory.add("hi", user_id="alice smith")
    with pytest.raises(InvalidInputError, match="give top_k or limit"):
        memory.search("hi", user_id="alice", top_k=3, limit=5)


def test_each_memory_carries_the_ids_it_was_added_with(memory: Memory) -> None:
    memory.add("alice likes tea in this run", user_id="alice", run_id="r1", infer=False)
    memory.add("the bot prefers short answers", agent_id="bot", infer=False)
    (bot,) = memory.get_all(agent_id="bot")["results"]
    assert bot["agent_id"] == "bot" and "user_id" not in bot and "score" not in bot  # get_all answers carry no score
    (run,) = memory.get_all(user_id="alice")["results"]  # found by user_id alone, as in mem0
    assert (run["user_id"], run["run_id"]) == ("alice", "r1") and "agent_id" not in run


def test_get_update_history_delete_by_id(memory: Memory) -> None:
    (added,) = memory.add("Alice likes tea", user_id="alice", infer=False)["results"]
    memory_id = added["id"]
    got = memory.get(memory_id)
    assert got is not None and got["memory"] == "Alice likes tea" and got["user_id"] == "alice"
    assert memory.update(memory_id, "Alice likes green tea") == {"message": "Memory updated successfully!"}
    memory.update(memory_id, data="Alice likes oolong tea")  # older mem0's name for the text
    memory.update(memory_id, metadata={"rating": 5, "user_id": "mallory"})  # an id is not metadata: left out
    got = memory.get(memory_id)
    assert got is not None and got["memory"] == "Alice likes oolong tea" and got["metadata"] == {"rating": 5}
    assert got["user_id"] == "alice"
    events = memory.history(memory_id)
    assert [(row["event"], row["old_memory"], row["new_memory"]) for row in events] == [
        ("ADD", None, "Alice likes tea"),
        ("UPDATE", "Alice likes tea", "Alice likes green tea"),
        ("UPDATE", "Alice likes green tea", "Alice likes oolong tea"),
        ("UPDATE", "Alice likes oolong tea", "Alice likes oolong tea"),
    ]
    assert all(row["memory_id"] == memory_id and not row["is_deleted"] for row in events)
    assert memory.delete(memory_id) == {"message": "Memory deleted successfully!"}
    assert memory.get(memory_id) is None
    assert memory.history(memory_id)[-1]["event"] == "DELETE" and memory.history(memory_id)[-1]["is_deleted"]
    assert memory.history("no-such-id") == []
    with pytest.raises(MemoryNotFoundError):
        memory.delete(memory_id)


def test_reset_deletes_every_users_memories(memory: Memory) -> None:
    memory.add("alice likes tea", user_id="alice", infer=False)
    memory.add("the bot is terse", agent_id="bot", run_id="r9", infer=False)
    assert memory.reset() is None
    assert memory.get_all(user_id="alice")["results"] == []
    assert memory.get_all(agent_id="bot", run_id="r9")["results"] == []
    memory.add("alice is back", user_id="alice", infer=False)  # the store works on after a reset
    assert [item["memory"] for item in memory.get_all(user_id="alice")["results"]] == ["alice is back"]


def test_what_does_not_map_is_refused_by_name(memory: Memory) -> None:
    with pytest.raises(InvalidInputError, match="memory_type='procedural_memory'"):
        memory.add("step 1", agent_id="bot", memory_type="procedural_memory")
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['top'\\]"):
        memory.search("hi", user_id="alice", top=3)


def test_async_memory_runs_each_call_off_the_event_loop(store_path: Path) -> None:
    async def main() -> list[str]:
        order: list[str] = []
        async with AsyncMemory() as memory:

            async def adding() -> None:
                await memory.add("I keep bees on the roof", user_id="alice", infer=False)
                order.append("added")

            async def ticking() -> None:
                await asyncio.sleep(0)
                order.append("tick")

            await asyncio.gather(adding(), ticking())  # a blocking add would finish before the tick
            found = await memory.search("bees", filters={"user_id": "alice"}, top_k=3)
            order.append(found["results"][0]["memory"])
            order.append(str(len((await memory.get_all(user_id="alice"))["results"])))
        return order

    assert asyncio.run(main()) == ["tick", "added", "I keep bees on the roof", "1"]


def test_timestamp_says_when_the_messages_were_said(memory: Memory) -> None:
    said = datetime(2024, 10, 21, 9, 0, tzinfo=timezone.utc)
    (added,) = memory.add("I moved to Kyoto", user_id="alice", timestamp=int(said.timestamp()))["results"]
    (as_text,) = memory.add("I started a new job", user_id="alice", timestamp="2024-10-22T09:00:00+00:00")["results"]
    door = memory.door
    anyone = door.caller(None, workspace=None)
    records = [door.get(anyone, item["id"]) for item in (added, as_text)]
    assert [record.message_time if record else None for record in records] == [said, said + timedelta(days=1)]
    with pytest.raises(InvalidInputError, match="expiration_date is not supported"):
        memory.add("hi", user_id="alice", expiration_date="2030-01-01")
