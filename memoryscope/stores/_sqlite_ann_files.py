"""Saved approximate indexes: a large user's HNSW graph (`_sqlite_ann`) kept beside the store file.

Building a graph takes ~30 s per 100k memories (~8 minutes at a million, on one thread), and a
new process would build it again while exact search answers (~70-90 ms a query at a million).
So a graph built on the background thread is saved, and the next process loads it (~1 s per
million memories) and catches it up with the change log instead.

Where: the store's `<file>-snapshots/` folder (only a cache, like the matrix snapshots beside
it), per user `ann-<hash of the name>.json` naming the graph file `ann-<hash>-<token>.usearch`
and saying what it holds: the change-log position (`seq`) it reflects, its rows, dimension,
settings, size and CRC-32. Why a loaded graph is right:
- the rows that may differ between a graph of position `seq` and a matrix of position `m` are
  the rows the log names between the two; they are put again from the matrix (or removed), so a
  graph is used only while the log reaches back to `seq` (`changes_pruned_through <= seq`), and
  after catching up it must hold exactly the matrix's rows, or it is built anew;
- a file cut short, of another size or CRC, of other settings or dimension, or that usearch
  refuses, is ignored (and removed): the graph is built from the rows, and saved again;
- a graph far behind the log (`far_behind`) is built anew rather than caught up.
What never lives on in a saved graph is a deleted memory's vector: usearch keeps a removed
vector's slot, so a graph that removed a row since it was built is not saved; a delete removes
its users' saved graphs (after its transaction), and a save checks, under the write lock, that
no row of the user left since its `seq` before naming the file (as `_sqlite_snapshot` does).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import zlib
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryscope.stores._sqlite_ann import AnnGraph, graph_settings
from memoryscope.stores._sqlite_schema import PRUNED_THROUGH_SQL
from memoryscope.stores._sqlite_snapshot import LEFT_SINCE_SQL, snapshot_folder

if TYPE_CHECKING:  # a type only: `_sqlite_connections` imports modules that import this one
    from memoryscope.stores._sqlite_connections import SqliteConnections

__all__ = ["GraphFiles"]

_log = logging.getLogger(__name__)
_FORMAT = "memoryscope-ann-1"
_CHANGED_BETWEEN_SQL = "SELECT DISTINCT row_id FROM memory_changes WHERE user_name = ? AND seq > ? AND seq <= ?"


def _stem(user_name: str) -> str:
    """The user's file names: a hash, so any name makes a safe, fixed-length file name."""
    return "ann-" + hashlib.sha256(user_name.encode("utf-8")).hexdigest()[:24]


def _crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as source:
        while chunk := source.read(1 << 22):
            crc = zlib.crc32(chunk, crc)
    return crc


class GraphFiles:
    """Saves and loads the graphs of one store file's users (any thread: each uses its own connection)."""

    def __init__(self, connections: SqliteConnections) -> None:
        self._connections = connections

    @property
    def folder(self) -> Path:
        return snapshot_folder(self._connections.path)

    def _description(self, user_name: str) -> Path:
        return self.folder / f"{_stem(user_name)}.json"

    # ---- loading --------------------------------------------------------------------------

    def load(self, user_name: str, dimension: int) -> tuple[AnnGraph, int] | None:
        """The user's saved graph and the change-log position it reflects, or None when there is
        none usable (a damaged or outdated one is removed, and the caller builds a new one)."""
        description = self._description(user_name)
        try:
            saved = json.loads(description.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            self._unusable(user_name, f"its description cannot be read ({error})")
            return None
        problem = self._problem(saved, user_name, dimension)
        if problem:
            self._unusable(user_name, problem)
            return None
        pruned_through = self._connections.connection().execute(PRUNED_THROUGH_SQL).fetchone()[0]
        if saved["seq"] < pruned_through:
            self._unusable(user_name, "the change log no longer reaches back to it", quiet=True)
            return None
        graph = AnnGraph(dimension)
        try:
            graph.load(self.folder / Path(str(saved["file"])).name)
        except Exception as error:  # usearch refused the file: built anew
            self._unusable(user_name, f"usearch cannot load it ({type(error).__name__}: {error})")
            return None
        if len(graph) != saved["rows"]:
            self._unusable(user_name, f"it holds {len(graph)} vectors, not the {saved['rows']} it says")
            return None
        return graph, int(saved["seq"])

    def _problem(self, saved: Any, user_name: str, dimension: int | None) -> str | None:
        """What is wrong with the saved graph `saved` describes, or None (its file read whole for the CRC)."""
        keys = ("format", "user_name", "seq", "rows", "dimension", "settings", "file", "bytes", "crc32")
        if not isinstance(saved, dict) or any(key not in saved for key in keys) or saved["format"] != _FORMAT:
            return "its description is not one this version writes"
        if saved["user_name"] != user_name:
            return f"its description names user {saved['user_name']!r}"
        if dimension is not None and saved["dimension"] != dimension:
            return f"its vectors have {saved['dimension']} dimensions, the store's {dimension}"
        if saved["settings"] != graph_settings():
            return "it was built with other graph settings"
        path = self.folder / Path(str(saved["file"])).name
        try:
            if path.stat().st_size != saved["bytes"]:
                return f"its file {path.name} is {path.stat().st_size} bytes, not {saved['bytes']}"
            if _crc32(path) != saved["crc32"]:
                return f"its file {path.name} does not match its CRC-32 (damaged)"
        except OSError as error:
            return f"its file {path.name} cannot be read ({error.strerror or error})"
        return None

    def _unusable(self, user_name: str, why: str, quiet: bool = False) -> None:
        (_log.debug if quiet else _log.warning)(
            "the saved approximate index of user %r is not usable: %s; it is built again from the store", user_name, why
        )
        self.forget([user_name])

    def changed_between(self, user_name: str, first: int, second: int) -> list[int] | None:
        """The user's row ids the change log names between positions `first` and `second` (either
        order), or None when it no longer reaches back that far."""
        low, high = sorted((first, second))
        connection = self._connections.connection()
        connection.execute("BEGIN")
        try:
            if connection.execute(PRUNED_THROUGH_SQL).fetchone()[0] > low:
                return None
            return [row_id for (row_id,) in connection.execute(_CHANGED_BETWEEN_SQL, (user_name, low, high))]
        finally:
            connection.execute("COMMIT")

    # ---- saving ---------------------------------------------------------------------------

    def save(self, user_name: str, graph: AnnGraph, seq: int, dimension: int) -> bool:
        """Save `graph`, which holds exactly the user's rows at change-log position `seq`; True
        when saved. Not when a row of the user left since `seq` (its vector would live on in
        the file): checked under the write lock, so a later delete finds the file and removes it."""
        self.folder.mkdir(exist_ok=True)
        stem = _stem(user_name)
        name = f"{stem}-{secrets.token_hex(6)}.usearch"
        temporary = self.folder / (name + ".part")
        try:
            graph.save(temporary)
            with open(temporary, "rb+") as written:
                os.fsync(written.fileno())  # on disk before a description names it
            saved = {
                "format": _FORMAT,
                "user_name": user_name,
                "seq": seq,
                "rows": len(graph),
                "dimension": dimension,
                "settings": graph_settings(),
                "file": name,
                "bytes": temporary.stat().st_size,
                "crc32": _crc32(temporary),
            }
            return self._name(user_name, temporary, name, saved)
        finally:
            temporary.unlink(missing_ok=True)

    def _name(self, user_name: str, temporary: Path, name: str, saved: dict[str, Any]) -> bool:
        description = self._description(user_name)
        described = description.with_name(description.name + f".{secrets.token_hex(4)}.part")
        described.write_text(json.dumps(saved), encoding="utf-8")
        try:
            # under the write lock: a delete committed before is seen here, one after finds the file
            with self._connections.write_transaction() as connection:
                pruned_through = connection.execute(PRUNED_THROUGH_SQL).fetchone()[0]
                if pruned_through > saved["seq"] or connection.execute(LEFT_SINCE_SQL, (user_name, saved["seq"])).fetchone():
                    return False  # a row left since (or the log cannot say): the file would keep its vector
                before = self._named_file(user_name)
                os.replace(temporary, self.folder / name)
                os.replace(described, description)
        finally:
            described.unlink(missing_ok=True)
        if before is not None and before != name:
            (self.folder / before).unlink(missing_ok=True)
        return True

    def _named_file(self, user_name: str) -> str | None:
        try:
            return Path(str(json.loads(self._description(user_name).read_text(encoding="utf-8"))["file"])).name
        except (OSError, ValueError, KeyError, TypeError):
            return None

    # ---- removing and checking ------------------------------------------------------------

    def forget(self, user_names: Collection[str]) -> None:
        """Remove the saved graphs of `user_names` (a delete calls it once its transaction has committed)."""
        for user_name in user_names:
            stem = _stem(user_name)
            _remove([self._description(user_name), *self.folder.glob(f"{stem}-*.usearch")])

    def forget_all(self) -> None:
        """Remove every saved graph (after a re-embedding: they hold the former vectors)."""
        _remove([*self.folder.glob("ann-*.json"), *self.folder.glob("ann-*.usearch")])

    def problems(self, dimension: int | None) -> list[str]:
        """What is wrong with the saved graphs (each is checked whole against its CRC-32): [] when
        none is damaged. A damaged one costs only time: the next search of its user builds anew."""
        found: list[str] = []
        for description in sorted(self.folder.glob("ann-*.json")) if self.folder.is_dir() else ():
            try:
                saved = json.loads(description.read_text(encoding="utf-8"))
                user_name = saved["user_name"] if isinstance(saved, dict) else None
            except (OSError, ValueError, KeyError) as error:
                found.append(f"{description.name}: cannot be read ({error}); it is removed at the next search of its user")
                continue
            problem = self._problem(saved, str(user_name), dimension)
            if problem:
                found.append(
                    f"the saved approximate index of user {user_name!r} is not usable: {problem}; "
                    "the next search of the user builds it again from the store (nothing is lost)"
                )
        return found


def _remove(files: list[Path]) -> None:
    """Delete `files`; one that cannot be (a read-only folder) is said once, not raised: the
    caller's delete or re-embedding has committed, and a description that stays is checked
    against the log before use."""
    for file in files:
        try:
            file.unlink(missing_ok=True)
        except OSError as error:
            _log.warning("could not remove %s (%s); remove it by hand, or let the next save replace it", file, error)
