"""Chunked, resumable keyword re-index of `sqlite_memory_store` (`_sqlite_reindex`): a file of an
older keyword index version is re-indexed in short transactions that save their position, so a
kill loses one chunk at most, and writes and searches meanwhile stay right."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores._sqlite_connections import SqliteConnections
from memoryscope.stores._sqlite_reindex import continue_keyword_reindex, start_keyword_reindex
from memoryscope.stores._sqlite_schema import KEYWORD_INDEX_VERSION, NODE_COLUMNS, node_from_row, scoped_words
from memoryscope.stores.base import MemoryFilter, SearchMode
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.store_contract import make_node, unit_vectors
from memoryscope.text import keyword_text

_COLUMNS = ", ".join(f'm."{name}"' for name in NODE_COLUMNS)


def _fill(store: SqliteMemoryStore, count: int) -> None:
    nodes = [
        make_node(f"painting sunsets number {index}", user_name=("ann", "bob")[index % 2], memory_id=f"m{index}")
        for index in range(count)
    ]
    store.upsert(nodes, vectors=unit_vectors(count, store.dimension, seed=1))


def _make_index_old(path: Path) -> None:
    """As an older MemoryScope left it: other words (unstemmed), another version."""
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE memory_words SET words = 'stale words'")
        raw.execute("UPDATE store_meta SET value = 'old' WHERE key = 'keyword_index_version'")
    raw.close()


def _start(path: Path) -> SqliteConnections:
    """Connections to the file with a re-index recorded, as an open would leave them."""
    connections = SqliteConnections(path, busy_timeout_s=5.0)
    with connections.write_transaction() as connection:
        assert start_keyword_reindex(connection)
    return connections


def _stale_entries(path: Path) -> list[str]:
    """Memories whose keyword entry is not what the current version makes of them."""
    with sqlite3.connect(path) as raw:
        rows = raw.execute(
            f"SELECT s.slot, {_COLUMNS}, w.words FROM memories AS m JOIN keyword_scopes AS s ON s.user_name = m.user_name "
            "LEFT JOIN memory_words AS w ON w.rowid = s.slot * 4294967296 + m.row_id"
        ).fetchall()
    raw.close()
    return [row[1] for row in rows if row[-1] != scoped_words(row[0], keyword_text(node_from_row(row[1:-1])))]


def _version(path: Path) -> str | None:
    with sqlite3.connect(path) as raw:
        found = raw.execute("SELECT value FROM store_meta WHERE key = 'keyword_index_version'").fetchone()
    raw.close()
    return None if found is None else str(found[0])


def test_a_killed_reindex_resumes_from_its_position_on_the_next_open(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as store:
        _fill(store, 50)
    _make_index_old(path)
    with sqlite3.connect(path) as raw:  # an entry of no memory (another program, a lost delete)
        raw.execute("INSERT INTO memory_words (rowid, scope, words) VALUES (2 * 4294967296 + 999, 's', 'orphan')")
    raw.close()
    connections = _start(path)
    report = continue_keyword_reindex(connections, path, chunk_rows=10, stop_after_chunks=2)  # then "killed"
    connections.close()
    assert (report.rows, report.chunks, report.finished) == (20, 2, False)
    assert _version(path) == "old"
    assert len(_stale_entries(path)) == 30  # the first two chunks are done and stay done
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as reopened:
        assert _version(path) == KEYWORD_INDEX_VERSION
        assert _stale_entries(path) == []
        hits = reopened.search(MemoryFilter("ann"), query="paint sunset", mode=SearchMode.KEYWORD, top_k=100)
        assert len(hits) == 25
        assert reopened.check(full=False)["keyword index"] == []  # the orphan entry is swept too


def test_writes_during_a_reindex_end_indexed_and_searches_keep_to_the_user(
    tmp_path: Path, embedding_model: LocalEmbedding
) -> None:
    path = tmp_path / "m.db"
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as store:
        _fill(store, 40)
        _make_index_old(path)
        connections = _start(path)
        continue_keyword_reindex(connections, path, chunk_rows=10, stop_after_chunks=1)
        # written while the re-index is under way: before and after its position, and new
        store.update("m2", content="now about guitars")
        store.update("m35", content="now about violins")
        store.upsert([make_node("a new guitar", memory_id="m-new")], vectors=unit_vectors(1, store.dimension, seed=3))
        mixed = store.search(MemoryFilter("ann"), query="guitar violin paint", mode=SearchMode.KEYWORD, top_k=100)
        assert mixed and {hit.user_name for hit in mixed} == {"ann"}
        report = continue_keyword_reindex(connections, path, chunk_rows=10)
        connections.close()
        # 31 memories after the first 10 (10 + 10 + 10 + 1), then the sweep of 41 entries (4 x 10 + 1)
        assert report.finished and (report.rows, report.chunks) == (31, 4 + 5)
        assert _stale_entries(path) == []
        found = store.search(MemoryFilter("ann"), query="guitar", mode=SearchMode.KEYWORD, top_k=10)
        assert {hit.memory_id for hit in found} == {"m2", "m-new"}


def test_an_open_file_of_the_current_version_starts_no_reindex(tmp_path: Path, embedding_model: LocalEmbedding) -> None:
    path = tmp_path / "m.db"
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as store:
        _fill(store, 4)
    connections = SqliteConnections(path, busy_timeout_s=5.0)
    with connections.write_transaction() as connection:
        assert not start_keyword_reindex(connection)
        assert connection.execute("SELECT count(*) FROM store_meta WHERE key = 'keyword_reindex'").fetchone()[0] == 0
    connections.close()
