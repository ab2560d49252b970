"""The memory node: immutable, time-stamped display, lossless dict round trip."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from memoryscope.memory import (
    MemoryNode,
    MemoryStatus,
    MemoryType,
    embedding_text,
    node_of_checked_fields,
    searchable_parts,
    searchable_text,
)
from memoryscope.stores._sqlite_schema import node_from_row, node_to_row

SHANGHAI = ZoneInfo("Asia/Shanghai")
SAID = datetime(2024, 10, 26, 13, 26, 20, tzinfo=timezone.utc)


def _every_field_set() -> MemoryNode:
    """A node with every field set, each to something other than its default."""
    moment = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    return MemoryNode(
        user_name="ann",
        content="likes tea",
        memory_type=MemoryType.CONVERSATION,
        target_name="bot",
        workspace="w",
        key="drink",
        value="tea",
        status=MemoryStatus.EXPIRED,
        superseded_by="m2",
        created_at=moment,
        updated_at=moment + timedelta(hours=1),
        event_time=moment - timedelta(days=1),
        message_time=moment,
        source_message_ids=("D1:2", "D1:3"),
        reflected=True,
        updated=True,
        access_count=3,
        last_accessed_at=moment + timedelta(days=2),
        meta={"speaker": "Ann", "context": "Bob said hi", "tags": ["x"]},
    )


def test_format_shows_the_time_in_the_configured_zone_and_language() -> None:
    node = MemoryNode(user_name="ann", content="user plays the guitar", message_time=SAID)
    assert node.format("en", SHANGHAI) == "[2024-10-26 21:26:20 Sat] user plays the guitar"
    zh = node.replace(content="用户爱好是吉他")
    assert zh.format("zh", SHANGHAI) == "[2024-10-26 21:26:20 周六] 用户爱好是吉他"


def test_event_time_wins_over_message_time_when_known() -> None:
    last_saturday = SAID - timedelta(days=7)
    node = MemoryNode(user_name="ann", content="went hiking", message_time=SAID, event_time=last_saturday)
    assert node.format("en", SHANGHAI).startswith("[2024-10-19 21:26:20 Sat]")


def test_round_trip_keeps_every_field() -> None:
    node = _every_field_set().with_score(0.5)
    assert MemoryNode.from_dict(node.to_dict()) == node


def test_strings_are_read_as_enums_and_naive_times_are_refused() -> None:
    node = MemoryNode(user_name="ann", content="x", memory_type="insight", status="expired")  # type: ignore[arg-type]  # as a store row gives them
    assert node.memory_type is MemoryType.INSIGHT
    assert node.status is MemoryStatus.EXPIRED
    with pytest.raises(ValueError, match="event_time must be timezone-aware"):
        MemoryNode(user_name="ann", content="x", event_time=datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="'not_a_type' is not a memory type; the types are: conversation"):
        MemoryNode(user_name="ann", content="x", memory_type="not_a_type")  # type: ignore[arg-type]  # the point of the test


def test_unknown_fields_are_named() -> None:
    with pytest.raises(ValueError, match=r"unknown memory fields \['colour'\]"):
        MemoryNode.from_dict({"user_name": "ann", "content": "x", "colour": "red"})


def test_a_chat_message_is_searched_with_its_speaker_context_and_reply() -> None:
    """Questions name people and ask about answers, which a message's own text rarely holds."""
    meta = {"speaker": "Jon", "context": "Any new hobby?", "reply": "Pottery, nice!"}
    said = MemoryNode(user_name="ann", content="Mostly pottery.", meta=meta)
    assert embedding_text(said) == 'Jon said, "Mostly pottery."'  # a sentence, not a transcript line
    assert searchable_text(said) == "Mostly pottery.\nJon\nAny new hobby?\nPottery, nice!"
    assert searchable_parts(said) == ("Mostly pottery.", "Jon\nAny new hobby?\nPottery, nice!")
    plain = MemoryNode(user_name="ann", content="user likes tea", key="tea", meta={"speaker": 3})
    assert embedding_text(plain) == "user likes tea"
    assert searchable_text(plain) == "user likes tea\ntea"
    key_only = MemoryNode(user_name="ann", content="", key="tea", meta={"context": "", "reply": "Tea?"})
    assert searchable_parts(key_only) == ("tea", "Tea?")
    assert searchable_parts(MemoryNode(user_name="ann", content="")) == ("", "")


def test_a_chinese_message_is_embedded_as_a_chinese_sentence() -> None:
    said = MemoryNode(user_name="ann", content="我最近在学陶艺", meta={"speaker": "小王"})
    assert embedding_text(said) == "小王说：“我最近在学陶艺”"


def test_with_score_copies_every_other_field_and_stays_frozen() -> None:
    moment = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    node = MemoryNode(user_name="ann", content="likes tea", key="drink", message_time=moment, meta={"speaker": "Ann"}, score=0.1)
    scored = node.with_score(0.75)
    assert scored == node.replace(score=0.75)
    assert type(scored) is MemoryNode and node.score == 0.1
    with pytest.raises(AttributeError):
        scored.score = 1.0  # type: ignore[misc]  # checking that the copy is frozen too


def test_a_node_of_checked_fields_equals_one_built_from_them_and_is_frozen() -> None:
    node = _every_field_set()
    made = node_of_checked_fields({item.name: getattr(node, item.name) for item in dataclasses.fields(MemoryNode)})
    assert made == node and type(made) is MemoryNode
    assert made.with_score(0.5) == node.replace(score=0.5)
    with pytest.raises(AttributeError):
        made.content = "other"  # type: ignore[misc]  # frozen like any node


def test_a_stored_row_decodes_to_the_node_it_was_made_of() -> None:
    node = _every_field_set()
    decoded = node_from_row(node_to_row(node), 0.25)
    assert decoded == node.replace(score=0.25)
    assert decoded.memory_type is MemoryType.CONVERSATION and decoded.status is MemoryStatus.EXPIRED
    assert decoded.created_at.tzinfo is not None and decoded.source_message_ids == ("D1:2", "D1:3")
