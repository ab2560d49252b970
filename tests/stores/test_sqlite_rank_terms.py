"""Ranker terms parsed once, when a memory is written: `memories.rank_terms` in SQLite, handed
back on `MemoryNode.rank_terms`, used by `fusion_rank` instead of parsing, and filled for the
rows of a file an older MemoryScope wrote when it is opened."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryscope.memory import MemoryNode
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.models.rank.fusion_rank import FusionRank
from memoryscope.stores._sqlite_schema import SCHEMA_VERSION, decoded_nodes, node_to_row, row_damage
from memoryscope.stores.base import MemoryFilter, SearchMode
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.store_contract import make_node, unit_vectors
from memoryscope.text import rank_terms, rank_terms_parts


@pytest.fixture
def store(tmp_path: Path, embedding_model: LocalEmbedding) -> Iterator[SqliteMemoryStore]:
    with SqliteMemoryStore(path=tmp_path / "m.db", embedding_model=embedding_model) as opened:
        yield opened


def _message(memory_id: str, content: str, **meta: str) -> MemoryNode:
    return make_node(content, user_name="ann", memory_id=memory_id, meta=dict(meta))


def _fill(store: SqliteMemoryStore) -> list[MemoryNode]:
    nodes = [
        _message("m1", "I painted the old barn red", speaker="Ann", reply="Painting barns is hard work"),
        _message("m2", "We went hiking near Kyoto", speaker="Bob", context="Where did you travel?"),
        _message("m3", "我喜欢喝绿茶"),
        _message("m4", "the and of"),  # stopwords only: no terms of its own
    ]
    store.upsert(nodes, vectors=unit_vectors(len(nodes), store.dimension, seed=4))
    return nodes


def _stored_terms(path: Path) -> dict[str, str | None]:
    with sqlite3.connect(path) as raw:
        found = dict(raw.execute("SELECT memory_id, rank_terms FROM memories").fetchall())
    raw.close()
    return found


def test_a_memory_keeps_its_parsed_terms_and_reads_them_back(store: SqliteMemoryStore) -> None:
    nodes = _fill(store)
    assert _stored_terms(store.path) == {node.memory_id: rank_terms(node) for node in nodes}
    assert rank_terms_parts(rank_terms(nodes[0])) == (["paint", "old", "barn", "red"], ["ann", "paint", "barn", "hard", "work"])
    assert rank_terms_parts(rank_terms(nodes[3])) == ([], [])
    read = {node.memory_id: node for node in store.get(["m1", "m2", "m3", "m4"])}
    assert {key: node.rank_terms for key, node in read.items()} == _stored_terms(store.path)
    hit = store.search(MemoryFilter("ann"), query="barn", mode=SearchMode.KEYWORD, top_k=1)[0]
    assert hit.rank_terms == rank_terms(nodes[0])
    assert hit.with_score(0.5).rank_terms == hit.rank_terms  # the same memory
    assert hit.replace(content="something else").rank_terms is None  # maybe not the same words
    assert "rank_terms" not in hit.to_dict() and hit == hit.replace()  # not a field


def test_an_update_parses_the_new_words(store: SqliteMemoryStore) -> None:
    _fill(store)
    updated = store.update("m2", content="We went sailing near Osaka")
    assert rank_terms_parts(_stored_terms(store.path)["m2"] or "")[0] == ["went", "sail", "near", "osaka"]
    assert store.get(["m2"])[0].rank_terms == rank_terms(updated)


def test_fusion_rank_scores_stored_terms_as_it_scores_parsed_ones(store: SqliteMemoryStore) -> None:
    _fill(store)
    ranker = FusionRank()
    read = store.get(["m1", "m2", "m3", "m4"])
    parsed = [node.replace() for node in read]  # the same memories without stored terms
    assert all(node.rank_terms for node in read[:3]) and all(node.rank_terms is None for node in parsed)
    for query in ("who painted a barn?", "hiking in Kyoto", "绿茶", "Ann's hard work"):
        assert ranker.score(query, read) == ranker.score(query, parsed)


def test_fusion_rank_reads_the_stored_terms_not_the_text() -> None:
    """A memory's stored terms are what the ranker counts: it does not parse the memory again."""
    plain = make_node("coffee every morning", user_name="ann")
    other = make_node("a walk in the park", user_name="ann")
    carrying = MemoryNode.__new__(MemoryNode)
    object.__setattr__(carrying, "__dict__", {**plain.__dict__, "rank_terms": "tea\n"})
    ranker = FusionRank(FusionRank.Params(vector_weight=0, recency_weight=0, keyword_weight=1))
    assert ranker.score("tea", [plain, other]) == [0.0, 0.0]
    assert ranker.score("tea", [carrying, other]) == [1.0, 0.0]


def _as_schema_3(path: Path) -> None:
    """Rewrite the file as a MemoryScope with schema version 3 left it: no `rank_terms`, the
    trigger firing on every update, keywords indexed under the version before."""
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TRIGGER memories_updated")
        raw.execute("ALTER TABLE memories DROP COLUMN rank_terms")
        raw.executescript(
            "BEGIN; CREATE TRIGGER memories_updated AFTER UPDATE ON memories BEGIN "
            "INSERT INTO memory_changes (user_name, row_id) VALUES (new.user_name, new.row_id); END; COMMIT;"
        )
        raw.execute("UPDATE store_meta SET value = '3' WHERE key = 'schema_version'")
        raw.execute("UPDATE store_meta SET value = '3+scoped' WHERE key = 'keyword_index_version'")
    raw.close()


def test_a_schema_3_file_gets_the_terms_of_every_memory_on_open(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "old.db"
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as first:
        nodes = _fill(first)
        vector = unit_vectors(1, first.dimension, seed=9)[0]
        before = [(hit.memory_id, hit.score) for hit in first.search(MemoryFilter("ann"), query="barn kyoto", vector=vector)]
    _as_schema_3(path)
    with sqlite3.connect(path) as raw:
        changes_before = raw.execute("SELECT count(*) FROM memory_changes").fetchone()
    raw.close()
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as second:
        hits = second.search(MemoryFilter("ann"), query="barn kyoto", vector=vector)
        assert [(hit.memory_id, hit.score) for hit in hits] == before
        assert [node.rank_terms for node in second.get(["m1"])] == [rank_terms(nodes[0])]
    assert _stored_terms(path) == {node.memory_id: rank_terms(node) for node in nodes}
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone() == (SCHEMA_VERSION,) == ("4",)
        # filling the terms is no change of a memory: no matrix replays it
        assert raw.execute("SELECT count(*) FROM memory_changes").fetchone() == changes_before
    raw.close()


def test_a_row_whose_terms_are_not_text_is_named_and_left_out() -> None:
    good = make_node("green tea", user_name="ann", memory_id="good")
    bad_row = (*node_to_row(make_node("black tea", user_name="ann", memory_id="bad"))[:-1], 42)
    assert row_damage(bad_row) == ("rank_terms", "column rank_terms holds 42, not text or NULL")
    assert [node.memory_id for node in decoded_nodes([(node_to_row(good), None), (bad_row, None)])] == ["good"]
