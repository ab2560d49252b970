"""read_message: messages become conversation memories, once."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo

from memoryscope.context import MemoryContext, Message
from memoryscope.memory import MemoryType
from memoryscope.stores.base import MemoryFilter
from memoryscope.testing.builders import build_worker, make_env
from memoryscope.worker import Worker
from memoryscope.workers.read_message import message_memory_id

SAID = datetime(2024, 10, 26, 13, 26, 20, tzinfo=timezone.utc)
MESSAGES = (
    Message("system", "You are a helpful assistant.", SAID, message_id="m0"),
    Message("user", "I play the guitar every evening", SAID, message_id="m1"),
    Message("assistant", "That sounds fun!", SAID, name="AI", message_id="m2"),
    Message("user", "   ", SAID, message_id="m3"),
)


def reader(store: Any) -> Worker:
    return build_worker("read_message", {}, make_env(store=store, timezone="Asia/Shanghai"))


def test_stores_user_and_assistant_messages_as_conversation_memories(store: Any) -> None:
    ctx = MemoryContext(user_name="ann", target_name="ann", messages=MESSAGES)
    reader(store).run(ctx)
    stored = sorted(store.scan(MemoryFilter(user_name="ann")), key=lambda node: node.meta["role"], reverse=True)
    assert [(n.content, n.meta) for n in stored] == [
        ("I play the guitar every evening", {"role": "user", "speaker": "ann", "reply": "That sounds fun!"}),
        ("That sounds fun!", {"role": "assistant", "speaker": "AI", "context": "I play the guitar every evening"}),
    ]
    assert all(n.memory_type is MemoryType.CONVERSATION and not n.reflected for n in stored)
    assert all(n.message_time == SAID and n.target_name == "ann" for n in stored)
    assert [n.source_message_ids for n in stored] == [("m1",), ("m2",)]
    assert ctx.stored_message_ids == tuple(node.memory_id for node in stored)
    assert ctx.result == "stored 2 new messages (0 already stored)"


def test_reading_the_same_messages_again_adds_nothing_and_keeps_consolidation_marks(store: Any) -> None:
    worker = reader(store)
    worker.run(MemoryContext(user_name="ann", messages=MESSAGES))
    first = store.scan(MemoryFilter(user_name="ann"))
    store.update(first[0].memory_id, reflected=True)  # consolidation used it
    again = MemoryContext(user_name="ann", messages=MESSAGES)
    worker.run(again)
    assert again.stored_message_ids == ()
    assert again.result == "stored 0 new messages (2 already stored)"
    assert store.count(MemoryFilter(user_name="ann")) == 2
    assert store.get([first[0].memory_id])[0].reflected is True


def test_same_message_id_for_another_user_is_another_memory(store: Any) -> None:
    worker = reader(store)
    worker.run(MemoryContext(user_name="ann", messages=MESSAGES))
    worker.run(MemoryContext(user_name="bob", messages=MESSAGES))
    assert store.count(MemoryFilter(user_name="ann")) == 2
    assert store.count(MemoryFilter(user_name="bob")) == 2


def test_messages_without_ids_are_idempotent_too_and_naive_times_get_the_zone(store: Any) -> None:
    naive = (Message("user", "I like green tea", datetime(2024, 10, 26, 21, 26, 20)),)
    worker = reader(store)
    worker.run(MemoryContext(user_name="ann", messages=naive))
    worker.run(MemoryContext(user_name="ann", messages=naive))
    [node] = store.scan(MemoryFilter(user_name="ann"))
    assert node.message_time == SAID  # 21:26:20 in Asia/Shanghai


def test_keeps_the_previous_messages_as_context(store: Any) -> None:
    """Each message remembers what it answered (system and empty messages skipped), so keyword
    search finds "Paris" in the reply to a question about Paris."""
    messages = (
        Message("user", "Where did you go in May?", SAID, message_id="q"),
        Message("system", "ignored", SAID, message_id="s"),
        Message("assistant", "To Paris, with my sister.", SAID, name="Jon", message_id="a"),
        Message("user", "Nice!", SAID, message_id="n"),
    )
    ctx = MemoryContext(user_name="ann", target_name="ann", messages=messages)
    build_worker("read_message", {"context_messages": 2}, make_env(store=store)).run(ctx)
    context = {n.content: n.meta.get("context") for n in store.scan(MemoryFilter(user_name="ann"))}
    assert context == {
        "Where did you go in May?": None,
        "To Paris, with my sister.": "Where did you go in May?",
        "Nice!": "Where did you go in May?\nTo Paris, with my sister.",
    }
    hits = store.search(MemoryFilter(user_name="ann"), query="Jon May", mode="keyword", top_k=1)
    assert [hit.content for hit in hits] == ["To Paris, with my sister."]


def test_context_can_be_turned_off(store: Any) -> None:
    ctx = MemoryContext(user_name="ann", target_name="ann", messages=MESSAGES)
    build_worker("read_message", {"context_messages": 0}, make_env(store=store)).run(ctx)
    assert all("context" not in n.meta for n in store.scan(MemoryFilter(user_name="ann")))


def test_context_and_reply_cross_calls_that_bring_one_message_at_a_time(store: Any) -> None:
    worker = reader(store)
    said = ["Hi Jon, how was your week?", "I lost my job as a banker", "Oh no, what now?", "I'll open a dance studio"]
    for index, text in enumerate(said):
        worker.run(MemoryContext(user_name="ann", messages=(Message("user", text, SAID, message_id=f"t{index}"),)))
    worker.run(MemoryContext(user_name="bob", messages=(Message("user", "Unrelated", SAID, message_id="b0"),)))
    stored = {
        node.content: (node.meta.get("context"), node.meta.get("reply")) for node in store.scan(MemoryFilter(user_name="ann"))
    }
    assert stored == {
        said[0]: (None, said[1]),
        said[1]: (said[0], said[2]),
        said[2]: (f"{said[0]}\n{said[1]}", said[3]),
        said[3]: (f"{said[1]}\n{said[2]}", None),
    }
    assert [node.meta for node in store.scan(MemoryFilter(user_name="bob"))] == [{"role": "user", "speaker": "bob"}]


def test_context_joins_stored_messages_and_the_batch_in_order_within_the_conversation_gap(store: Any) -> None:
    worker = reader(store)
    earlier = tuple(Message("user", f"message {i}", SAID, message_id=f"e{i}") for i in range(3))
    worker.run(MemoryContext(user_name="ann", messages=earlier))
    later = Message("user", "said the next day", SAID.replace(day=27), message_id="later")
    worker.run(MemoryContext(user_name="ann", messages=(later,)))
    # A message from before "later" arrives afterwards: its context is what came before it in time.
    batch = (
        earlier[2],
        Message("user", "a late reply", SAID, message_id="n0"),
        Message("user", "and more", SAID, message_id="n1"),
    )
    worker.run(MemoryContext(user_name="ann", messages=batch))
    stored = {node.content: node.meta.get("context") for node in store.scan(MemoryFilter(user_name="ann"))}
    assert stored["a late reply"] == "message 1\nmessage 2"  # stored before it in time, then the batch's first
    assert stored["and more"] == "message 2\na late reply"
    assert stored["said the next day"] is None  # more than context_gap_minutes later: another conversation
    replies = {node.content: node.meta.get("reply") for node in store.scan(MemoryFilter(user_name="ann"))}
    assert replies["message 1"] == "message 2"  # the stored order, not the late batch, decides what answered it
    assert replies["message 2"] == "a late reply"  # it came again with what followed it
    assert replies["said the next day"] is None
    worker.run(MemoryContext(user_name="ann", messages=(earlier[0], batch[1])))  # an odd re-send never rewrites a reply
    assert store.get([message_memory_id(MemoryContext(user_name="ann"), earlier[0])])[0].meta["reply"] == "message 1"


def test_a_message_gets_the_time_it_mentions_as_event_time_but_shows_when_it_was_said(store: Any) -> None:
    friday = datetime(2023, 3, 17, 14, 0, tzinfo=timezone.utc)
    messages = (
        Message("user", "Yesterday I went bowling and got 2 strikes!", friday, message_id="b1"),
        Message("user", "Nice, I stayed home", friday, message_id="b2"),
    )
    reader(store).run(MemoryContext(user_name="ann", messages=messages))
    bowling, home = sorted(store.scan(MemoryFilter(user_name="ann")), key=lambda node: node.source_message_ids)
    shanghai = ZoneInfo("Asia/Shanghai")  # the worker's configured zone: "yesterday" is a day there
    assert bowling.event_time == datetime(2023, 3, 16, tzinfo=shanghai)
    assert bowling.format(tz=shanghai).startswith("[2023-03-17 22:00:00 Fri]")
    assert home.event_time is None
    off = build_worker("read_message", {"event_time_from_text": False}, make_env(store=store))
    off.run(MemoryContext(user_name="bob", messages=messages[:1]))
    assert store.scan(MemoryFilter(user_name="bob"))[0].event_time is None
