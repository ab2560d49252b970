"""The same scenarios through every face — Python, CLI, REST, the HTTP client, MCP — with the same
outcome: sizes refused alike, another user's memory not found, every change under a run that
`undo` takes back (once), `pinned` only by pin/unpin, one profile per memory policy, export with
its history, delete-all only for a named user, and the same answer for the same error in each
face's medium (the door's one table of failures)."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest
from door_faces import FACES, ZONE, Face
from door_faces import ServedDoor as Door

from memoryscope.door import Limits, MemoryNotFoundError, failure_of
from memoryscope.errors import InvalidInputError, NotFoundError, TooLargeError
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.stores.state import StateKey, StateOwner
from memoryscope.workers._memoryos import MEMORYOS_PROFILE

pytestmark = pytest.mark.slow  # every scenario through every face, CLI and servers included; `-m "not slow"` leaves it out

NOT_FOUND = failure_of(MemoryNotFoundError("x"))
TOO_LONG = failure_of(TooLargeError("", code="query_too_long"))
INVALID = failure_of(InvalidInputError(""))


def faces_with(verb: str) -> list[str]:
    return [face.name for face in FACES if verb in face.verbs]


def seeded(door: Door, user: str, text: str) -> str:
    """One memory of `user`, stored through the Python face (the setup, not the scenario)."""
    return door.scope.add(text, user_id=user, infer=False)[0].id


def limit(door: Door) -> int:
    return Limits.of(door.scope.config.server).max_text_chars


# -- sizes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("face", faces_with("add"))
def test_a_memory_over_the_limit_is_refused_alike_and_nothing_is_stored(door: Door, face: str) -> None:
    before = len(door.scope.get_all("ann", types=["obs_customized"]))
    answer = door.face(face).add("ann", "x" * (limit(door) + 1))
    assert answer.refused_as(TOO_LONG), answer
    assert len(door.scope.get_all("ann", types=["obs_customized"])) == before


@pytest.mark.parametrize("face", faces_with("add_message"))
def test_a_message_over_the_limit_is_refused_alike(door: Door, face: str) -> None:
    before = len(door.scope.get_all("ann", types=["conversation"]))
    answer = door.face(face).add_message("ann", "y" * (limit(door) + 1))
    assert answer.refused_as(TOO_LONG), answer
    assert len(door.scope.get_all("ann", types=["conversation"])) == before


@pytest.mark.parametrize("face", faces_with("search"))
def test_a_query_over_the_limit_is_refused_alike(door: Door, face: str) -> None:
    seeded(door, "ann", "ann drinks tea")  # a known user: a search that finds nothing is no error
    assert door.face(face).search("ann", "q" * (limit(door) + 1)).refused_as(TOO_LONG)
    assert door.face(face).search("ann", "q" * limit(door)).ok  # the limit itself is allowed


# -- another user's memory -------------------------------------------------------------------------


@pytest.mark.parametrize("face", faces_with("get"))
def test_another_users_memory_is_not_found_by_get(door: Door, face: str) -> None:
    bobs = seeded(door, "bob", "bob keeps bees")
    assert door.face(face).get("ann", bobs).refused_as(NOT_FOUND)
    assert door.face(face).get("bob", bobs).ok


@pytest.mark.parametrize("face", faces_with("delete"))
def test_another_users_memory_is_not_found_by_delete_and_stays(door: Door, face: str) -> None:
    bobs = seeded(door, "bob", "bob keeps wasps")
    answer = door.face(face).delete("ann", bobs)
    assert not answer.ok and (face == "mcp" or answer.refused_as(NOT_FOUND)), answer
    assert face != "mcp" or answer.kind == NOT_FOUND.kind
    assert door.scope.get(bobs) is not None


@pytest.mark.parametrize("face", faces_with("update"))
def test_another_users_memory_is_not_found_by_update_or_pin_and_is_unchanged(door: Door, face: str) -> None:
    bobs = seeded(door, "bob", "bob keeps ants")
    assert door.face(face).update("ann", bobs, "ann wrote this").refused_as(NOT_FOUND)
    assert door.face(face).pin("ann", bobs).refused_as(NOT_FOUND)
    record = door.scope.get(bobs)
    assert record is not None and record.memory == "bob keeps ants" and not record.pinned


@pytest.mark.parametrize("face", faces_with("undo"))
def test_another_users_run_is_not_found_by_undo(door: Door, face: str) -> None:
    bobs = seeded(door, "bob", "bob keeps moths")
    [run_id] = [change.run_id for change in door.scope.history(bobs)]
    assert door.face(face).undo("ann", run_id).refused_as(failure_of(NotFoundError("", code="unknown_run")))
    assert door.scope.get(bobs) is not None


# -- runs and undo ---------------------------------------------------------------------------------


@pytest.mark.parametrize("face", faces_with("undo"))
def test_every_change_has_a_run_that_undo_takes_back_once(door: Door, face: str) -> None:
    faced = door.face(face)
    [memory_id] = faced.add("ann", f"ann grows basil ({face})").value
    assert faced.update("ann", memory_id, f"ann grows thyme ({face})").ok
    runs = faced.history_runs("ann", memory_id).value
    assert len(runs) == 2 and all(runs) and len(set(runs)) == 2  # the add's run, the update's run

    assert faced.undo("ann", runs[1]).ok  # the update, taken back
    record = door.scope.get(memory_id)
    assert record is not None and record.memory == f"ann grows basil ({face})"
    again = faced.undo("ann", runs[1])
    assert again.ok and again.value.get("already_undone") is True  # twice: nothing more
    assert faced.undo("ann", runs[0]).ok  # the add, taken back: the memory is gone
    assert door.scope.get(memory_id) is None


# -- pinned ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("face", faces_with("pin"))
def test_pinned_is_set_only_by_pin_and_unpin(door: Door, face: str) -> None:
    faced = door.face(face)
    memory_id = seeded(door, "ann", f"ann plays go ({face})")
    assert faced.update("ann", memory_id, metadata={"pinned": True}).refused_as(INVALID)
    assert not door.scope.get(memory_id).pinned  # type: ignore[union-attr]
    assert faced.pin("ann", memory_id).ok and door.scope.get(memory_id).pinned  # type: ignore[union-attr]
    assert faced.pin("ann", memory_id, pinned=False).ok and not door.scope.get(memory_id).pinned  # type: ignore[union-attr]
    runs = faced.history_runs("ann", memory_id).value
    assert len(runs) == 3 and all(runs)  # the add, the pin, the unpin: each a run of its own


# -- the profile -----------------------------------------------------------------------------------


@pytest.mark.parametrize("face", faces_with("profile"))
def test_the_profile_is_the_same_from_every_face_under_each_policy(policy_door: Door, face: str) -> None:
    store = policy_door.scope.store
    assert store is not None
    user = "ann"
    config = policy_door.config
    if config == "memoryos":
        node = MemoryNode(user_name=user, memory_type=MEMORYOS_PROFILE, content="Ann: a beekeeper in Kyoto.")
    elif config == "agent":  # the agent's `human` block: a state record, not a memory
        node = MemoryNode(user_name=user, memory_type=MemoryType.OBSERVATION, content="Name: Ann. Keeps bees.")
        store.write_state({StateKey(StateOwner(user), "core_block", "human"): {"text": node.content, "limit": 2000}})
    else:
        node = MemoryNode(user_name=user, memory_type=MemoryType.INSIGHT, key="hobby", content="ann keeps bees")
    if config != "agent":
        store.upsert([node])
    expected = policy_door.scope.profile(user)
    assert expected.policy == {"default": "insights", "memoryos": "memoryos", "agent": "agent"}[config]
    answer = policy_door.face(face).profile(user)
    assert answer.ok, answer
    if face == "mcp" and expected.policy == "insights":
        assert "ann keeps bees" in answer.value  # MCP lists the insights, each with its id
    else:
        assert answer.value == expected.text and node.content in expected.text


# -- export ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("face", faces_with("export"))
def test_export_carries_the_history(door: Door, face: str) -> None:
    memory_id = seeded(door, "ann", f"ann bakes bread ({face})")
    door.scope.update(memory_id, f"ann bakes rye bread ({face})", user_id="ann")
    actions = door.face(face).export_actions("ann").value
    assert actions.count("created") >= 1 and "updated" in actions


# -- deleting everything -----------------------------------------------------------------------------


@pytest.mark.parametrize("face", faces_with("delete_all"))
def test_deleting_all_needs_a_named_user(door: Door, face: str) -> None:
    seeded(door, "cid", "cid keeps a diary")
    assert door.face(face).delete_all(None).refused_as(INVALID)
    assert door.scope.get_all("cid")  # nothing deleted
    assert door.face(face).delete_all("cid").ok
    assert door.scope.get_all("cid") == []


# -- times without a zone ------------------------------------------------------------------------------


@pytest.mark.parametrize("face", faces_with("add"))
def test_a_time_without_a_zone_is_the_configs(door: Door, face: str) -> None:
    naive = datetime(2024, 10, 26, 21, 26, 20)
    [memory_id] = door.face(face).add("ann", f"ann moved house ({face})", time=naive).value
    record = door.scope.get(memory_id)
    assert record is not None and record.message_time is not None
    assert record.message_time == naive.replace(tzinfo=ZoneInfo(ZONE))  # not UTC, nor the machine's zone
    assert record.message_time != naive.replace(tzinfo=timezone.utc)


def test_every_face_is_exercised() -> None:
    """Twelve and more scenarios, five faces: no face is left out of the suite."""
    assert {face.name for face in FACES} == {"python", "cli", "rest", "client", "mcp"}
    assert all(isinstance(face.verbs, frozenset) and face.verbs for face in FACES)
    assert issubclass(FACES[0], Face)
