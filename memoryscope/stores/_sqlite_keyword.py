"""Keyword search of `sqlite_memory_store`: FTS5 BM25 inside one user's rowid range.

One FTS5 table serves every user, so a word's posting list holds the rows of all of them.
Scoping a search with the user's `scope` token (`scope : "s..." AND words : (...)`) made FTS5
walk each query word's whole list, every user's rows included, and made `bm25()` walk the scope
token's list (every row of the user) once per query to weigh a phrase whose weight is 0.
Instead the words of memory `row_id` of the user with slot `s` live at FTS rowid
`s * ROWID_SPAN + row_id` (`words_rowid`), and a search asks for `rowid BETWEEN` the user's
range, which FTS5 answers by seeking inside each posting list.

Ranking is exactly as before: the `scope` column still holds the user's token, so every row
has the same tokens and lengths, and bm25's statistics (row count, average length, document
frequencies over the whole table) and its scores are unchanged; ties still go to the lower
`row_id`.

Filters besides the user are checked on the candidates afterwards, with the per-user arrays of
`_sqlite_cache` when the caller has them (no per-row SQL), else by one SQL join.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence

from memoryscope.stores._sqlite_schema import ROWID_SPAN, filter_sql, words_rowid
from memoryscope.stores.base import MemoryFilter
from memoryscope.text import index_terms, keyword_terms

__all__ = ["KeywordIndex", "match_expression"]

# `-bm25`: higher is better. Weight 0 for `scope`, 1 for `words`, as always.
_RANKED = (
    "SELECT rowid - ?, -bm25(memory_words, 0.0, 1.0) AS score FROM memory_words "
    "WHERE memory_words MATCH ? AND rowid BETWEEN ? AND ? ORDER BY score DESC, rowid"
)


def match_expression(query: str) -> str | None:
    """The FTS5 query for `query`'s content words (all its words if it has none), or None."""
    terms = list(dict.fromkeys(keyword_terms(query) or index_terms(query)))
    if not terms:
        return None
    return "words : (" + " OR ".join('"' + term.replace('"', '""') + '"' for term in terms) + ")"


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

    def write(self, connection: sqlite3.Connection, row_id: int, user_name: str, scope: str, words: str) -> None:
        """(Re)index one memory, inside the caller's write transaction."""
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
        connection.execute("INSERT INTO memory_words (rowid, scope, words) VALUES (?, ?, ?)", (rowid, scope, words))

    def ranked(
        self, connection: sqlite3.Connection, user_name: str, match: str, limit: int | None
    ) -> list[tuple[int, float]]:
        """`(row_id, bm25)` of the user's memories matching `match`, best first; at most `limit`."""
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
