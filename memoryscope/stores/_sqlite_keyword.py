"""Keyword search of `sqlite_memory_store`: FTS5 BM25 over one user's own words.

One FTS5 table serves every user. Two things keep a search to the user's own rows:
- Each indexed word carries the user's slot (`scoped_words`: `12xguitar`), and so does each
  query word, so every posting list belongs to one user. bm25() reads a query word's whole
  posting list to count its documents: with shared words that was every user's rows (a 1k-row
  user in a 1M-row store paid for the million); now it is the user's rows only.
- The words of memory `row_id` of the user with slot `s` live at FTS rowid
  `s * ROWID_SPAN + row_id` (`words_rowid`), and a search asks for `rowid BETWEEN` the user's
  range (which scoped words make redundant, but keeps one user's search out of another's rows
  by construction).

Ranking: bm25's document frequencies are the user's own (a word common in the user's memories
weighs little, whatever other users write); its row count and average length stay those of the
whole table, which FTS5 keeps per table. Ties go to the lower `row_id`. The `scope` column
(weight 0) holds one token per user, from before words were scoped.

Filters besides the user are checked on the candidates afterwards, with the per-user arrays of
`_sqlite_cache` when the caller has them (no per-row SQL), else by one SQL join.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence

from memoryscope.stores._sqlite_schema import (
    ROWID_SPAN,
    filter_sql,
    scoped_words,
    words_rowid,
)
from memoryscope.stores.base import MemoryFilter
from memoryscope.text import keyword_query

__all__ = ["KeywordIndex", "first_kept", "match_expression"]


# `-bm25`: higher is better. Weight 0 for `scope`, 1 for `words`, as always.
_RANKED = (
    "SELECT rowid - ?, -bm25(memory_words, 0.0, 1.0) AS score FROM memory_words "
    "WHERE memory_words MATCH ? AND rowid BETWEEN ? AND ? ORDER BY score DESC, rowid"
)


def match_expression(query: str, slot: int) -> str | None:
    """The FTS5 query for `query`'s content words (all its words if it has none) among the words
    of the user with keyword `slot`, or None. Each word is a quoted phrase: "don't" is the
    scoped tokens of "don" then "t", as `scoped_words` indexed it."""
    phrases = [scoped_words(slot, term) for term in keyword_query(query).split()]
    phrases = [phrase for phrase in phrases if phrase]
    if not phrases:
        return None
    return "words : (" + " OR ".join('"' + phrase.replace('"', '""') + '"' for phrase in phrases) + ")"


class KeywordIndex:
    """Writes and ranks `memory_words` rows; remembers users' slots (they never change)."""

    def __init__(self) -> None:
        self._slots: dict[str, int] = {}
        self._lock = threading.Lock()

    def slot(self, connection: sqlite3.Connection, user_name: str) -> int | None:
        """The user's slot, or None if they never had a memory (not remembered: one may come)."""
        slot = self._slots.get(user_name)
        if slot is None:
            found = connection.execute("SELECT slot FROM keyword_scopes WHERE user_name = ?", (user_name,)).fetchone()
            if found is None:
                return None
            slot = int(found[0])
            with self._lock:
                self._slots[user_name] = slot
        return slot

    def match(self, connection: sqlite3.Connection, user_name: str, query: str) -> str | None:
        """`match_expression` of `query` for the user, or None when there is nothing to look for
        (no words, or a user who never had a memory)."""
        slot = self.slot(connection, user_name)
        return None if slot is None else match_expression(query, slot)

    def write(self, connection: sqlite3.Connection, row_id: int, user_name: str, scope: str, words: str) -> None:
        """(Re)index one memory (`words`: `keyword_text`), inside the caller's write transaction."""
        slot = self.slot(connection, user_name)
        if slot is None:
            # in the write transaction, so no other writer can take the same slot meanwhile
            connection.execute(
                "INSERT INTO keyword_scopes (user_name, slot) "
                "VALUES (?, (SELECT coalesce(max(slot), 0) + 1 FROM keyword_scopes))",
                (user_name,),
            )
            slot = self.slot(connection, user_name)
            if slot is None:  # pragma: no cover - just inserted
                raise RuntimeError("keyword slot vanished")
        rowid = words_rowid(slot, row_id)
        connection.execute("DELETE FROM memory_words WHERE rowid = ?", (rowid,))
        connection.execute(
            "INSERT INTO memory_words (rowid, scope, words) VALUES (?, ?, ?)", (rowid, scope, scoped_words(slot, words))
        )

    def ranked(self, connection: sqlite3.Connection, user_name: str, match: str, limit: int | None) -> list[tuple[int, float]]:
        """`(row_id, bm25)` of the user's memories matching `match` (from `match`), best first; at most `limit`."""
        slot = self.slot(connection, user_name)
        if slot is None:
            return []
        base = slot * ROWID_SPAN
        sql, params = _RANKED, [base, match, base, base + ROWID_SPAN - 1]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return connection.execute(sql, params).fetchall()

    def ranked_filtered(
        self, connection: sqlite3.Connection, memory_filter: MemoryFilter, match: str, limit: int
    ) -> list[tuple[int, float]]:
        """Like `ranked`, only memories `memory_filter` keeps, checked by SQL row by row: for a
        caller without the user's in-memory arrays."""
        slot = self.slot(connection, memory_filter.user_name)
        if slot is None:
            return []
        base = slot * ROWID_SPAN
        where, params = filter_sql(memory_filter, table="m")
        # CROSS JOIN keeps FTS as the outer loop: walk the user's matching postings, then check filters
        sql = (
            "SELECT m.row_id, -bm25(memory_words, 0.0, 1.0) AS score "
            "FROM memory_words CROSS JOIN memories AS m ON m.row_id = memory_words.rowid - ? "
            f"WHERE memory_words MATCH ? AND memory_words.rowid BETWEEN ? AND ? AND {where} "
            "ORDER BY score DESC, m.row_id LIMIT ?"
        )
        return connection.execute(sql, [base, match, base, base + ROWID_SPAN - 1, *params, limit]).fetchall()


def first_kept(hits: Sequence[tuple[int, float]], kept: Sequence[bool], limit: int) -> list[tuple[int, float]]:
    """The first `limit` of `hits` whose `kept` flag is set."""
    out = [hit for hit, keep in zip(hits, kept, strict=True) if keep]
    return out[:limit]
