"""The SQLite layout of `sqlite_memory_store`: tables, node <-> row conversion, filters as SQL.

Tables
- `memories`: one row per node. `row_id` is an explicit INTEGER PRIMARY KEY so it survives
  VACUUM; it is the handle the other tables and the in-memory matrices use.
- `memory_vectors`: the float32 vector of each row, apart from the node so scans stay narrow.
- `memory_words`: FTS5 over pre-tokenized text (jieba for Chinese, via `memoryscope.text`), with
  a `scope` column holding one token per user. Its rowids put each user's rows in a range of
  their own (`words_rowid`, slots in `keyword_scopes`), and every word carries the user's slot
  (`scoped_words`: "guitar" is `12xguitar` for slot 12), so each user has posting lists of their
  own: a keyword search walks only that user's postings, and bm25's document frequencies are
  the user's, whatever the size of the store (see `_sqlite_keyword`).
- `memory_changes`: a change log filled by triggers (every insert, update and delete of a node,
  by any connection of any process). In-memory matrices replay it to catch up incrementally.
- `matrix_snapshot_files`: which file beside this one holds a packed copy of a large user's in-memory
  matrix, so a new process loads it in one read (`_sqlite_snapshot`); only a cache, never the truth.
- `memory_meta`: the indexed values of each memory's `meta`, for metadata filters (`_sqlite_metadata`).
- `state_records`: state records beside the memories, one row per kept version (`_sqlite_state`);
  made when a file is opened, so files written before it get it then, with nothing else changed.
- `store_meta`: schema version, embedding model name and dimension, change-log pruning point.

A row holding a value of the wrong kind (from another program) is left out of reads, named (`decoded_nodes`).

Schema versions: 1 had `memory_words` rowid = `row_id`; 2 adds the per-user rowid ranges; 3 adds
`memory_meta`; 4 adds `memories.rank_terms` (each memory's ranker terms, parsed once when written:
`memoryscope.text.rank_terms`; filled for older rows by the keyword re-index on open) and fires
`memories_updated` only when a node's own columns change. `_sqlite_connections.migrate_schema`
brings an older file up to date when it is opened.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from memoryscope.errors import StoreError
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType, node_of_checked_fields
from memoryscope.stores._sqlite_metadata import METADATA_SCRIPT, metadata_sql
from memoryscope.stores._sqlite_state import STATE_TABLE_SCRIPT
from memoryscope.stores.base import MemoryFilter, TimeRange
from memoryscope.stores.metadata import checked_conditions
from memoryscope.text import KEYWORD_TEXT_VERSION, rank_terms

__all__ = [
    "NODE_COLUMNS",
    "PRUNED_THROUGH_SQL",
    "DamagedRowError",
    "assign_keyword_slots",
    "ROWID_SPAN",
    "SCHEMA_SCRIPT",
    "SCHEMA_VERSION",
    "KEYWORD_INDEX_VERSION",
    "TIME_FIELDS",
    "UPDATABLE_FIELDS",
    "filter_sql",
    "node_from_row",
    "node_to_row",
    "decoded_nodes",
    "row_damage",
    "scope_token",
    "scoped_words",
    "validate_filter",
    "words_rowid",
]

# the change-log position up to which the log was pruned: a matrix or snapshot older than it cannot replay
PRUNED_THROUGH_SQL = "SELECT CAST(value AS INTEGER) FROM store_meta WHERE key = 'changes_pruned_through'"

SCHEMA_VERSION = "4"
# How the keyword index is built: `memoryscope.text.keyword_text` (the words every store indexes,
# versioned by KEYWORD_TEXT_VERSION), each prefixed with the user's slot (`scoped_words`). A file
# recorded with another version is re-indexed on open. Before: "1" plain tokens of content + key,
# "2" stemmed plus a message's speaker and context, "3" as now with the same words; "+rank": the
# re-index also fills `memories.rank_terms`.
KEYWORD_INDEX_VERSION = f"{KEYWORD_TEXT_VERSION}+scoped+rank"
# the slot prefix ends in a letter, so `12` + `3abc` (`12x3abc`) never equals `1` + `23abc` (`1x23abc`)
_SLOT_END = "x"


_TABLES_SCRIPT = """
CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
INSERT OR IGNORE INTO store_meta (key, value) VALUES ('changes_pruned_through', '0');

CREATE TABLE IF NOT EXISTS memories (
    row_id INTEGER PRIMARY KEY,
    memory_id TEXT NOT NULL UNIQUE,
    user_name TEXT NOT NULL,
    target_name TEXT NOT NULL,
    workspace TEXT NOT NULL,
    memory_type TEXT NOT NULL,
    content TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "value" TEXT NOT NULL,
    status TEXT NOT NULL,
    superseded_by TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    event_time REAL,
    message_time REAL,
    source_message_ids TEXT NOT NULL,
    reflected INTEGER NOT NULL,
    updated INTEGER NOT NULL,
    access_count INTEGER NOT NULL,
    last_accessed_at REAL,
    meta TEXT NOT NULL,
    rank_terms TEXT
);
CREATE INDEX IF NOT EXISTS memories_scope
    ON memories (user_name, target_name, workspace, memory_type, status, created_at);
CREATE INDEX IF NOT EXISTS memories_user_created ON memories (user_name, created_at, memory_id);

CREATE TABLE IF NOT EXISTS memory_vectors (row_id INTEGER PRIMARY KEY, vector BLOB NOT NULL);

CREATE VIRTUAL TABLE IF NOT EXISTS memory_words USING fts5 (scope, words);
-- one slot per user who ever had a memory; never reused, so a cached slot stays true
CREATE TABLE IF NOT EXISTS keyword_scopes (user_name TEXT PRIMARY KEY, slot INTEGER NOT NULL UNIQUE);

CREATE TABLE IF NOT EXISTS memory_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    user_name TEXT NOT NULL,
    row_id INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_changes_user ON memory_changes (user_name, seq);

-- the current packed copy of large users' matrices (a file beside this one), as of change-log
-- position `seq` (`_sqlite_snapshot`)
CREATE TABLE IF NOT EXISTS matrix_snapshot_files (
    user_name TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    dimension INTEGER NOT NULL,
    names TEXT NOT NULL,
    file TEXT NOT NULL
);
"""

# The node's own columns; `rank_terms` last, derived from them (`memoryscope.text.rank_terms`):
# NULL in a row an older version wrote until the keyword re-index fills it (the ranker parses
# such a memory itself meanwhile).
NODE_COLUMNS: tuple[str, ...] = (
    *("memory_id", "user_name", "target_name", "workspace", "memory_type", "content", "key", "value", "status"),
    *("superseded_by", "created_at", "updated_at", "event_time", "message_time", "source_message_ids", "reflected"),
    *("updated", "access_count", "last_accessed_at", "meta", "rank_terms"),
)
_OWN_COLUMNS = ", ".join(f'"{name}"' for name in NODE_COLUMNS[:-1])

# The rowid of a user's `memory_words` row: `slot * ROWID_SPAN + row_id` (`words_rowid`).
ROWID_SPAN = 1 << 32
_OLD_WORDS_ROWID = f"(SELECT slot FROM keyword_scopes WHERE user_name = old.user_name) * {ROWID_SPAN} + old.row_id"

# Kept apart from SCHEMA_SCRIPT so `migrate_schema` can replace the triggers of an older file.
TRIGGERS_SCRIPT = f"""
CREATE TRIGGER IF NOT EXISTS memories_inserted AFTER INSERT ON memories BEGIN
    INSERT INTO memory_changes (user_name, row_id) VALUES (new.user_name, new.row_id);
END;
CREATE TRIGGER IF NOT EXISTS memories_updated AFTER UPDATE OF {_OWN_COLUMNS} ON memories BEGIN
    INSERT INTO memory_changes (user_name, row_id) VALUES (new.user_name, new.row_id);
    INSERT INTO memory_changes (user_name, row_id)
        SELECT old.user_name, old.row_id WHERE old.user_name IS NOT new.user_name;
    -- a memory moved to another user leaves its words in the old user's range
    DELETE FROM memory_words WHERE old.user_name IS NOT new.user_name AND rowid = {_OLD_WORDS_ROWID};
END;
CREATE TRIGGER IF NOT EXISTS memories_deleted AFTER DELETE ON memories BEGIN
    DELETE FROM memory_vectors WHERE row_id = old.row_id;
    DELETE FROM memory_words WHERE rowid = {_OLD_WORDS_ROWID};
    INSERT INTO memory_changes (user_name, row_id) VALUES (old.user_name, old.row_id);
END;
"""

SCHEMA_SCRIPT = _TABLES_SCRIPT + TRIGGERS_SCRIPT + METADATA_SCRIPT + STATE_TABLE_SCRIPT


TIME_FIELDS = ("event_time", "message_time", "created_at", "updated_at")

UPDATABLE_FIELDS = frozenset(item.name for item in dataclasses.fields(MemoryNode)) - {"memory_id", "score"}

_STATUSES = {status.value: status for status in MemoryStatus}
_from_epoch = datetime.fromtimestamp
_UTC = timezone.utc
_log = logging.getLogger(__name__)


def _epoch(moment: datetime | None) -> float | None:
    # float64 epochs keep sub-microsecond resolution until the year 2242, so round trips are exact
    return None if moment is None else moment.timestamp()


def node_to_row(node: MemoryNode) -> tuple[Any, ...]:
    """The `NODE_COLUMNS` values of `node`: times as UTC epoch seconds, lists and meta as JSON,
    and its `rank_terms` parsed now, once."""
    try:
        meta = json.dumps(node.meta, ensure_ascii=False, allow_nan=False)
        source_ids = json.dumps(list(node.source_message_ids), ensure_ascii=False)
        for text in (node.content, node.key, node.value, meta):  # what SQLite could not store as UTF-8
            if not text.isascii():
                text.encode("utf-8")
    except (TypeError, ValueError) as error:  # UnicodeEncodeError is a ValueError
        raise StoreError(
            f"memory {node.memory_id!r} cannot be stored so that it reads back: {error} "
            "(meta must be JSON with finite numbers; texts valid Unicode)"
        ) from None
    return (
        node.memory_id,
        node.user_name,
        node.target_name,
        node.workspace,
        str(node.memory_type),
        node.content,
        node.key,
        node.value,
        MemoryStatus(node.status).value,
        node.superseded_by,
        _epoch(node.created_at),
        _epoch(node.updated_at),
        _epoch(node.event_time),
        _epoch(node.message_time),
        source_ids,
        int(node.reflected),
        int(node.updated),
        node.access_count,
        _epoch(node.last_accessed_at),
        meta,
        rank_terms(node),
    )


def node_from_row(row: Sequence[Any], score: float | None = None) -> MemoryNode:
    """Inverse of `node_to_row` (times come back as aware UTC datetimes), with a search `score`.

    On every search path (120 nodes a retrieve), so unpacked by position and with the common
    empty JSON values short-cut: half the cost of a generic column loop. A row holding a value
    of the wrong kind (another program wrote it) is a `DamagedRowError` naming it."""
    try:
        return _node_from_row(row, score)
    except (TypeError, ValueError, KeyError, OverflowError, OSError) as error:
        raise DamagedRowError(row, error) from None


def _no_constant(name: str) -> Any:
    """NaN and Infinity in a stored meta (written by an older version): the row is damaged, not read."""
    raise ValueError(f"meta holds {name}, which JSON has not")


def _memory_type(name: Any) -> MemoryType:
    """A stored type: registered here or not (a capability not loaded in this process)."""
    if type(name) is not str or not name:
        raise TypeError("a value of the wrong kind")
    return MemoryType.stored(name)


def _node_from_row(row: Sequence[Any], score: float | None) -> MemoryNode:
    memory_id, user_name, target_name, workspace, memory_type, content, key, value, status, superseded_by = row[:10]
    created_at, updated_at, event_time, message_time, source_message_ids = row[10:15]
    reflected, updated, access_count, last_accessed_at, meta, terms = row[15:]
    # what would pass silently below (times, JSON and enums fail loudly on a value of the wrong kind)
    texts_sound = type(memory_id) is type(user_name) is type(target_name) is type(workspace) is type(content) is str
    if not (texts_sound and type(key) is type(value) is type(superseded_by) is str and type(access_count) is int):
        raise TypeError("a value of the wrong kind")
    if not (reflected in (0, 1) and updated in (0, 1) and type(reflected) is type(updated) is int):
        raise TypeError("a value of the wrong kind")
    fields = dict(
        user_name=user_name,
        content=content,
        memory_type=_memory_type(memory_type),
        target_name=target_name,
        workspace=workspace,
        memory_id=memory_id,
        key=key,
        value=value,
        status=_STATUSES[status],
        superseded_by=superseded_by,
        created_at=_from_epoch(created_at, timezone.utc),
        updated_at=_from_epoch(updated_at, timezone.utc),
        event_time=None if event_time is None else _from_epoch(event_time, timezone.utc),
        message_time=None if message_time is None else _from_epoch(message_time, timezone.utc),
        source_message_ids=() if source_message_ids == "[]" else tuple(json.loads(source_message_ids)),
        reflected=bool(reflected),
        updated=bool(updated),
        access_count=access_count,
        last_accessed_at=None if last_accessed_at is None else _from_epoch(last_accessed_at, timezone.utc),
        meta={} if meta == "{}" else json.loads(meta, parse_constant=_no_constant),
        score=score,
    )
    if terms is not None:
        if type(terms) is not str:
            raise TypeError("a value of the wrong kind")
        fields["rank_terms"] = terms  # not a field: the class default (None) when absent
    return node_of_checked_fields(fields)


class DamagedRowError(StoreError):
    """A `memories` row that does not decode: `memory_id`, `column` and `problem` say why."""

    def __init__(self, row: Sequence[Any], error: Exception) -> None:
        self.memory_id = str(row[0])
        self.column, self.problem = row_damage(row) or ("?", f"{type(error).__name__}: {error}")
        advice = "`memoryscope doctor --config ...` lists every damaged memory"
        super().__init__(f"memory {self.memory_id!r} is damaged: {self.problem} (written by another program?); {advice}")


def decoded_nodes(rows: Iterable[tuple[Sequence[Any], float | None]]) -> list[MemoryNode]:
    """The nodes of `(row, score)` pairs; a damaged row is left out with a warning naming it."""
    nodes = []
    for row, score in rows:
        try:
            nodes.append(node_from_row(row, score))
        except DamagedRowError as error:
            _log.warning("%s; it is left out of what is read", error)
    return nodes


# the kind of each column not holding text, and how to say it
_KINDS: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("created_at", "updated_at"), ("time", "a time (seconds since 1970)")),
    **dict.fromkeys(("event_time", "message_time", "last_accessed_at"), ("optional time", "a time (seconds since 1970) or NULL")),
    **dict.fromkeys(("reflected", "updated"), ("flag", "0 or 1")),
    "access_count": ("count", "a whole number"),
    "source_message_ids": ("id list", "a JSON list of ids"),
    "meta": ("object", "a JSON object"),
    "rank_terms": ("optional text", "text or NULL"),
    "memory_type": ("type", "a memory type's name"),
    "status": ("choice", f"one of {', '.join(_STATUSES)}"),
}
_CHOICES: dict[str, dict[str, Any]] = {"status": _STATUSES}


def row_damage(row: Sequence[Any]) -> tuple[str, str] | None:
    """`(column, problem)` for the first column of a `NODE_COLUMNS` row holding a value of the
    wrong kind, or None when every value is sound."""
    for column, value in zip(NODE_COLUMNS, row, strict=True):
        kind, expected = _KINDS.get(column, ("text", "text"))
        if not _sound(kind, value, _CHOICES.get(column)):
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            return column, f"column {column} holds {shown}, not {expected}"
    return None


def _sound(kind: str, value: Any, choices: dict[str, Any] | None) -> bool:
    if kind in ("time", "optional time"):
        try:
            return kind == "optional time" if value is None else type(value) in (int, float) and bool(_from_epoch(value, _UTC))
        except (ValueError, OverflowError, OSError):  # beyond the years a datetime holds
            return False
    if kind in ("flag", "count"):
        return type(value) is int and (kind == "count" or value in (0, 1))
    if kind == "type":
        return type(value) is str and bool(value)
    if choices is not None:
        return value in choices
    if kind == "optional text":
        return value is None or type(value) is str
    if type(value) is not str or kind == "text":
        return type(value) is str
    try:
        loaded = json.loads(value, parse_constant=_no_constant)
    except ValueError:
        return False
    return isinstance(loaded, dict) if kind == "object" else isinstance(loaded, list) and all(type(i) is str for i in loaded)


def scope_token(user_name: str) -> str:
    """One FTS token per user (hex, so no tokenizer can split it) for the `scope` column."""
    return "s" + hashlib.blake2b(user_name.encode("utf-8"), digest_size=12).hexdigest()


def scoped_words(slot: int, words: str) -> str:
    """`words` (space-separated, as `keyword_text` makes them) with each FTS token prefixed by the
    user's `slot`. An apostrophe splits a word in FTS5's tokenizer ("don't" is "don" and "t"),
    so each side gets the prefix; index terms hold no other separator (see `memoryscope.text`)."""
    prefix = f"{slot}{_SLOT_END}"
    return " ".join(prefix + piece for word in words.split() for piece in word.split("'") if piece)


def validate_filter(memory_filter: MemoryFilter) -> None:
    """StoreError for a filter no backend could honour (wrong type, unknown time field, naive times)."""
    if not isinstance(memory_filter, MemoryFilter):
        raise StoreError(f"expected a MemoryFilter, got {type(memory_filter).__name__}")
    if not isinstance(memory_filter.user_name, str):
        raise StoreError(f"MemoryFilter.user_name must be a string, got {memory_filter.user_name!r}")
    checked_conditions(memory_filter.metadata or ())
    time_range = memory_filter.time_range
    if time_range is None:
        return
    if not isinstance(time_range, TimeRange):
        raise StoreError(f"MemoryFilter.time_range must be a TimeRange, got {type(time_range).__name__}")
    if time_range.field not in TIME_FIELDS:
        raise StoreError(f"TimeRange.field {time_range.field!r} is not a time field; use one of {', '.join(TIME_FIELDS)}")
    for end_name in ("start", "end"):
        moment = getattr(time_range, end_name)
        if moment is not None and moment.tzinfo is None:
            raise StoreError(f"TimeRange.{end_name} must be timezone-aware, got naive {moment!r}")


def time_bounds(time_range: TimeRange) -> tuple[float, float]:
    """The range as epoch seconds, open ends as infinities (start <= t < end)."""
    start = time_range.start.timestamp() if time_range.start is not None else -math.inf
    end = time_range.end.timestamp() if time_range.end is not None else math.inf
    return start, end


def filter_sql(memory_filter: MemoryFilter, table: str = "memories") -> tuple[str, list[Any]]:
    """A WHERE clause (without the keyword) and its parameters for `memory_filter` on `table`."""
    clauses = [f"{table}.user_name = ?"]
    params: list[Any] = [memory_filter.user_name]
    if memory_filter.target_name is not None:
        clauses.append(f"{table}.target_name = ?")
        params.append(memory_filter.target_name)
    if memory_filter.workspace is not None:
        clauses.append(f"{table}.workspace = ?")
        params.append(memory_filter.workspace)
    if memory_filter.memory_types is not None:
        # json_each takes the whole list as one parameter: no limit on its length
        clauses.append(f"{table}.memory_type IN (SELECT j.value FROM json_each(?) AS j)")
        params.append(json.dumps([MemoryType(kind).value for kind in memory_filter.memory_types]))
    if memory_filter.status is not None:
        clauses.append(f"{table}.status = ?")
        params.append(MemoryStatus(memory_filter.status).value)
    if memory_filter.time_range is not None:
        time_range = memory_filter.time_range
        column = f"{table}.{time_range.field}"
        # a node without this time never matches a range, even an open one
        clauses.append(f"{column} IS NOT NULL")
        if time_range.start is not None:
            clauses.append(f"{column} >= ?")
            params.append(time_range.start.timestamp())
        if time_range.end is not None:
            clauses.append(f"{column} < ?")
            params.append(time_range.end.timestamp())
    if memory_filter.reflected is not None:
        clauses.append(f"{table}.reflected = ?")
        params.append(int(memory_filter.reflected))
    if memory_filter.updated is not None:
        clauses.append(f"{table}.updated = ?")
        params.append(int(memory_filter.updated))
    if memory_filter.memory_ids is not None:
        clauses.append(f"{table}.memory_id IN (SELECT j.value FROM json_each(?) AS j)")
        params.append(json.dumps(list(memory_filter.memory_ids)))
    if memory_filter.metadata:  # only then: a filter without conditions never reads `memory_meta`
        metadata_clauses, metadata_params = metadata_sql(memory_filter.user_name, memory_filter.metadata, table)
        clauses, params = clauses + metadata_clauses, params + metadata_params
    return " AND ".join(clauses), params


def words_rowid(slot: int, row_id: int) -> int:
    """The `memory_words` rowid of memory `row_id` of the user with keyword slot `slot`."""
    if not 0 <= row_id < ROWID_SPAN:
        raise StoreError(f"memory row {row_id} is beyond the keyword index's range of {ROWID_SPAN} rows")
    return slot * ROWID_SPAN + row_id


def assign_keyword_slots(connection: sqlite3.Connection) -> None:
    """Give every user with memories but no keyword slot the next free ones."""
    connection.execute(
        "INSERT INTO keyword_scopes (user_name, slot) "
        "SELECT user_name, (SELECT coalesce(max(slot), 0) FROM keyword_scopes) + row_number() OVER (ORDER BY user_name) "
        "FROM (SELECT DISTINCT user_name FROM memories WHERE user_name NOT IN (SELECT user_name FROM keyword_scopes))"
    )
