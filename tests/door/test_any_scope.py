"""A caller whose target or workspace is None (any): `search`, `get_all` and `delete_all` cover the
user's memories of every target or workspace, never another user's; writes need both given. On a
real SQLite file; MemoryOS's policy through the fake OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryscope.app import MemoryScope
from memoryscope.door import Door
from memoryscope.errors import InvalidInputError
from memoryscope.testing.fake_openai import FakeOpenAIServer

ENVIRONMENT = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL", "MEMORYSCOPE_STORE_PATH")
# (user, target, workspace) -> what it remembers
KEPT = {
    ("ann", "", ""): "ann keeps bees on the roof",
    ("ann", "bot", ""): "ann asked the bot about bees",
    ("ann", "", "w1"): "ann sells honey at the market",
    ("ann", "bot", "w1"): "ann asked the bot to price the honey",
    ("bob", "bot", "w1"): "bob keeps bees as well",
}


def _build(config: str, store: Path, base_url: str | None = None) -> MemoryScope:
    with pytest.MonkeyPatch.context() as patch:  # the environment only while the scope is built (it is read then)
        for name in ENVIRONMENT:
            patch.delenv(name, raising=False)
        if base_url is not None:
            patch.setenv("MEMORYSCOPE_LLM_API_BASE", base_url)
            patch.setenv("MEMORYSCOPE_LLM_API_KEY", "sk-test")
        return MemoryScope(config, overrides={"memory_store.path": str(store)})


def _fill(door: Door, *, infer: bool) -> None:
    for (user, target, workspace), text in KEPT.items():
        door.add(door.caller(user, target=target, workspace=workspace), [{"role": "user", "content": text}], infer=infer)


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    """KEPT in one store, shared by the tests that only read."""
    with _build("default", tmp_path_factory.mktemp("any") / "any.db") as scope:
        _fill(scope.door, infer=False)
        yield scope.door


@pytest.fixture
def door(tmp_path: Path) -> Iterator[Door]:
    with _build("default", tmp_path / "any.db") as scope:
        _fill(scope.door, infer=False)
        yield scope.door


def _kept(user: str, target: str | None, workspace: str | None) -> set[str]:
    return {text for (u, t, w), text in KEPT.items() if u == user and target in (None, t) and workspace in (None, w)}


SCOPES = [("", ""), ("bot", ""), ("", "w1"), (None, ""), ("", None), ("bot", None), (None, "w1"), (None, None)]


@pytest.mark.parametrize(("target", "workspace"), SCOPES)
def test_get_all_and_search_read_the_users_memories_of_every_target_or_workspace_given_none(
    filled: Door, target: str | None, workspace: str | None
) -> None:
    door = filled
    caller = door.caller("ann", target=target, workspace=workspace)
    expected = _kept("ann", target, workspace)
    assert {record.memory for record in door.get_all(caller)} == expected
    found = door.search(caller, "who keeps bees or sells honey?", top_k=10)
    assert {record.memory for record in found} == expected  # never bob's, whatever the scope
    assert all(record.user_id == "ann" for record in found)


def test_writes_need_one_target_and_one_workspace(door: Door) -> None:
    with pytest.raises(InvalidInputError, match="add writes the memories of one target and one workspace: give the target"):
        door.add(door.caller("ann", target=None), ["ann likes rain"], infer=False)
    with pytest.raises(InvalidInputError, match="give the target and workspace"):
        door.add(door.caller("ann", target=None, workspace=None), ["ann likes rain"], infer=False)
    with pytest.raises(InvalidInputError, match=r"consolidate_memory writes .* give the workspace"):
        door.run(door.caller("ann", workspace=None), "consolidate_memory")
    assert "ann likes rain" not in {record.memory for record in door.get_all(door.caller("ann", target=None, workspace=None))}


def _texts(door: Door, user: str, target: str | None, workspace: str | None) -> set[str]:
    return {record.memory for record in door.get_all(door.caller(user, target=target, workspace=workspace))}


def test_delete_all_of_any_target_deletes_each_owner_in_its_own_run(door: Door) -> None:
    outcome = door.delete_all(door.caller("ann", target=None, workspace="w1"))
    assert outcome.deleted_count == 2 and outcome.run_id == ""  # two owners: two runs
    assert _texts(door, "ann", None, None) == _kept("ann", None, "")
    assert _texts(door, "bob", "bot", "w1") == _kept("bob", None, None)  # never another user's
    everywhere = door.caller("ann", target=None, workspace=None)
    deleted = [change for change in door.changes(everywhere) if change.action == "deleted"]
    assert sorted((change.target_name, change.workspace) for change in deleted) == [("", "w1"), ("bot", "w1")]
    assert len({change.run_id for change in deleted}) == 2  # one run per target, each in the history
    one = door.delete_all(door.caller("ann", target="bot", workspace=None))  # one owner left there: its own outcome
    assert one.deleted_count == 1 and one.run_id and _texts(door, "ann", None, None) == {KEPT[("ann", "", "")]}
    assert door.delete_all(door.caller("carol", target=None, workspace=None)).deleted_count == 0


def test_memoryos_searches_each_owner_and_merges_by_score(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    with _build("memoryos", tmp_path / "memoryos.db", fake_openai.base_url) as scope:
        door = scope.door
        _fill(door, infer=True)  # MemoryOS's pages (its recall reads one target and workspace)
        everywhere = door.caller("ann", target=None, workspace=None)
        found = door.search(everywhere, "who sells honey at the market?", top_k=3)
        assert len(found) == 3 and all("ann" in record.memory for record in found)
        assert "market" in found[0].memory
        scores = [record.score or 0.0 for record in found]
        assert scores == sorted(scores, reverse=True)
        exact = {record.memory for record in door.search(door.caller("ann"), "honey", top_k=5)}
        assert exact and all("bees on the roof" in text for text in exact)  # an exact caller: its one owner
