"""A store SQLite may not write (a read-only folder or file) is reported as not writable, naming
the path and the fix, never as a damaged store to restore from a backup.

As a user, the folder or file is made read-only by its permission bits. Root ignores those, so
there it is made truly read-only with the immutable attribute (`chattr +i`, which binds root
too); where the file system has no such attribute the end-to-end tests are skipped, and the
classification is still checked with the real error of a connection SQLite opened read-only."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from memoryscope.errors import StoreError
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.stores._sqlite_connections import SqliteConnections
from memoryscope.stores.base import MemoryFilter
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.store_contract import make_node


@contextmanager
def immutable(path: Path) -> Iterator[None]:
    """`path` unchangeable for the block: by its permission bits for a user, by the immutable
    attribute for root (which ignores the bits); skips the test where neither can be done."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot make a folder read-only for root here (chattr: {made.stderr.strip() or 'missing'})")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.fixture
def store_file(tmp_path: Path, embedding_model: LocalEmbedding) -> Path:
    path = tmp_path / "store" / "m.db"
    with SqliteMemoryStore(path=path, embedding_model=embedding_model) as store:
        store.upsert([make_node("Ann keeps bees")])
    return path


def test_a_read_only_folder_is_named_as_not_writable(store_file: Path, embedding_model: LocalEmbedding) -> None:
    with immutable(store_file.parent), pytest.raises(StoreError) as caught:
        SqliteMemoryStore(path=store_file, embedding_model=embedding_model)
    message = str(caught.value)
    assert f"memory store {store_file} is not writable" in message
    assert str(store_file.parent) in message and "memory_store.path" in message
    assert "damaged" not in message and "backup" not in message


def test_a_read_only_file_is_named_as_not_writable(store_file: Path, embedding_model: LocalEmbedding) -> None:
    with immutable(store_file), pytest.raises(StoreError) as caught:
        SqliteMemoryStore(path=store_file, embedding_model=embedding_model)
    message = str(caught.value)
    assert f"memory store {store_file} is not writable" in message
    assert "damaged" not in message and "backup" not in message
    with SqliteMemoryStore(path=store_file, embedding_model=embedding_model) as store:  # writable again: all there
        assert [node.content for node in store.scan(MemoryFilter("ann"))] == ["Ann keeps bees"]


def test_sqlite_refusing_a_write_is_not_called_damage(store_file: Path) -> None:
    connections = SqliteConnections(store_file, busy_timeout_s=1.0)
    read_only = sqlite3.connect(f"file:{store_file}?mode=ro", uri=True)
    with closing(read_only), pytest.raises(StoreError) as caught, connections.errors():
        read_only.execute("DELETE FROM memories")
    message = str(caught.value)
    assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
    assert "readonly database" in str(caught.value.__cause__)  # the real error of a read-only connection
    assert f"memory store {store_file} is not writable" in message and "memory_store.path" in message
    assert "damaged" not in message
