"""fuse_rerank's `fuse_assistant_ratio`: a chat stores the assistant's replies too; they rank below
the user's own words, whatever rank model scored them, and 0 keeps them out."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memoryscope.app import MemoryScope
from memoryscope.context import MemoryContext, Message
from memoryscope.errors import ConfigError
from memoryscope.memory import MemoryNode, MemoryType
from memoryscope.testing.builders import build_worker, make_env

Make = Callable[..., MemoryNode]
LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL")
SAID = datetime(2024, 10, 26, 21, 0, tzinfo=timezone(timedelta(hours=8)))
WISH = "I want to read a novel set in Kyoto this winter"
ECHO = "So you want to read a novel set in Kyoto this winter"
RECOMMENDATION = "I recommend The Old Capital by Yasunari Kawabata"


def message(make_node: Make, content: str, role: str, score: float) -> MemoryNode:
    speaker = "ann" if role == "user" else "assistant"
    return make_node(content, memory_type=MemoryType.CONVERSATION, score=score, meta={"role": role, "speaker": speaker})


def fused(params: dict[str, object], *ranked: MemoryNode) -> list[tuple[str, float]]:
    worker = build_worker("fuse_rerank", params, make_env())
    ctx = MemoryContext(user_name="ann", query="a novel set in Kyoto", ranked=ranked)
    worker.run(ctx)
    return [(memory.content, memory.score or 0.0) for memory in ctx.memories]


def test_the_users_words_outrank_the_assistants_echo_of_them(make_node: Make) -> None:
    wish, echo = message(make_node, WISH, "user", 0.8), message(make_node, ECHO, "assistant", 0.9)
    assert fused({}, echo, wish) == [(WISH, pytest.approx(0.4)), (ECHO, pytest.approx(0.225))]  # 0.9 × 0.5 × 0.5


def test_the_weight_is_configured(make_node: Make) -> None:
    wish, echo = message(make_node, WISH, "user", 0.8), message(make_node, ECHO, "assistant", 0.9)
    assert [text for text, _ in fused({"fuse_assistant_ratio": 1.0}, wish, echo)] == [ECHO, WISH]


def test_a_weight_of_zero_never_returns_a_reply(make_node: Make) -> None:
    wish, echo = message(make_node, WISH, "user", 0.1), message(make_node, ECHO, "assistant", 1.0)
    observation = make_node("ann likes Japanese literature", score=0.5)
    assert [text for text, _ in fused({"fuse_assistant_ratio": 0, "fuse_rerank_top_k": 10}, echo, wish, observation)] == [
        "ann likes Japanese literature",
        WISH,
    ]


def test_only_replies_are_weighted(make_node: Make) -> None:
    """Observations, and messages stored without a role (imported, 0.1.x), keep their weight."""
    unmarked = make_node("I play the cello", memory_type=MemoryType.CONVERSATION, score=0.8)
    observation = make_node("ann plays the cello", score=0.4, meta={"role": "assistant"})
    assert fused({"fuse_assistant_ratio": 0.1}, unmarked, observation) == [
        ("I play the cello", pytest.approx(0.4)),
        ("ann plays the cello", pytest.approx(0.4)),
    ]


@pytest.mark.parametrize("weight", [-0.1, 1.5])
def test_a_weight_outside_zero_to_one_names_its_key(weight: float) -> None:
    with pytest.raises(ConfigError, match="fuse_assistant_ratio"):
        build_worker("fuse_rerank", {"fuse_assistant_ratio": weight}, make_env())


# -- the whole retrieve_memory operation, with and without the rank model ---------------------


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    yield


def retrieved(tmp_path: Path, query: str, **overrides: object) -> dict[str, MemoryNode]:
    """What the default `retrieve_memory` operation returns after one chat turn, by role."""
    config = {"memory_store.path": str(tmp_path / f"m{len(list(tmp_path.iterdir()))}.db"), **overrides}
    with MemoryScope("default", overrides=config) as scope:
        service = scope.default_service
        turn = (Message("user", WISH, SAID, name="ann"), Message("assistant", f"{ECHO}. {RECOMMENDATION}.", SAID))
        service.run_operation("read_message", "ann", messages=turn)
        found = service.run_operation("retrieve_memory", "ann", query=query, query_time=SAID + timedelta(days=1))
        return {str(memory.meta.get("role")): memory for memory in found.context.memories}


@pytest.mark.parametrize("ranker", [True, False], ids=["rank model", "retrieval scores"])
@pytest.mark.usefixtures("offline")
def test_in_the_retrieve_operation_the_weight_applies_after_any_ranker(tmp_path: Path, ranker: bool) -> None:
    """The final score of the reply is weighted whatever scored it; the user's message is not."""
    query = "which novel set in Kyoto did you recommend?"
    unweighted = retrieved(tmp_path, query, **{"global.enable_ranker": ranker, "worker.fuse_rerank.fuse_assistant_ratio": 1})
    weighted = retrieved(tmp_path, query, **{"global.enable_ranker": ranker})
    assert weighted["assistant"].score == pytest.approx(0.5 * (unweighted["assistant"].score or 0.0))
    assert weighted["user"].score == pytest.approx(unweighted["user"].score)
    assert "Kawabata" in weighted["assistant"].content  # still found
    assert weighted["assistant"].meta["speaker"] == "assistant"


@pytest.mark.usefixtures("offline")
def test_in_the_retrieve_operation_a_weight_of_zero_leaves_the_reply_out(tmp_path: Path) -> None:
    found = retrieved(tmp_path, "what did you recommend?", **{"worker.fuse_rerank.fuse_assistant_ratio": 0})
    assert [memory.content for memory in found.values()] == [WISH]
