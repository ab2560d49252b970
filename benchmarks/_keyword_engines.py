"""The keyword engines `benchmarks.keyword_engines` compares, each over one user's memories.

Every engine gets the same tokens: a memory's `keyword_text` terms (`memoryscope.text`: words
lower-cased and stemmed, stopwords kept), split at apostrophes as `scoped_words` splits them
for FTS5, and a query's `keyword_query` terms (its distinct stemmed content words, OR-ed).
So no engine's own analyzer decides anything; each only ranks. Rows are numbered 1..N.

- `fts5`: the store's SQL (`-bm25(memory_words, 0.0, 1.0)`, ties to the lower rowid) on a real
  SQLite file with the store's FTS5 table shape (`scope`, `words`).
- `userwords`: the store's `UserWords` (`stores/_sqlite_bm25_lists.py`) built from that file's rows;
  a search also reads FTS5's totals, as the store does on every search.
- `tantivy`: one index per user in a folder, a `words` text field with tantivy's `whitespace`
  tokenizer (our tokens kept as they are), frequencies without positions (BM25 needs no more),
  and `row` as a fast integer field; one segment writer thread.
- `bm25s`: `bm25s.BM25(k1=1.2, b=0.75, method="robertson")`: FTS5's idf
  log((N - n + 0.5) / (n + 0.5)) (bm25s clips it at 0 where FTS5 uses 1e-6); its sparse score
  matrix scores every row, the best k are selected here (ties to the lower row).

tantivy and bm25s are optional (`pip install -e .[bench]`); `missing()` says which are absent.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memoryscope.stores._sqlite_bm25 import _varints
from memoryscope.stores._sqlite_bm25_lists import Pacer, UserWords, _Rows
from memoryscope.text import index_terms, keyword_query

__all__ = ["ENGINES", "Engine", "document_tokens", "make_engine", "missing", "query_terms"]

ENGINES = ("fts5", "userwords", "tantivy", "bm25s")
_OPTIONAL = {"tantivy": "tantivy", "bm25s": "bm25s"}  # engine -> module to import
_SCOPE = "s"  # the store's one-token `scope` column (weight 0, counted in a row's length)


def missing(engines: Sequence[str]) -> list[str]:
    """The optional engines among `engines` whose package is not installed."""
    return [name for name in engines if name in _OPTIONAL and importlib.util.find_spec(_OPTIONAL[name]) is None]


def document_tokens(text: str) -> list[str]:
    """What every engine indexes for a memory of `text`."""
    return [piece for term in index_terms(text) for piece in term.split("'") if piece]


def query_terms(text: str) -> list[str]:
    """What every engine looks for, for a query `text` (OR-ed)."""
    return [piece for term in keyword_query(text).split() for piece in term.split("'") if piece]


class Engine(Protocol):
    name: str

    def build(self, documents: Sequence[Sequence[str]]) -> None: ...
    def search(self, terms: Sequence[str], k: int) -> list[tuple[int, float]]: ...
    def insert(self, row: int, tokens: Sequence[str]) -> float: ...
    def delete(self, row: int) -> float: ...
    def memory_mb(self) -> float: ...
    def close(self) -> None: ...


class Fts5:
    """FTS5's `bm25()` through SQL, on a real file (built, or reused when it holds the rows)."""

    name = "fts5"
    _RANKED = (
        "SELECT rowid, -bm25(memory_words, 0.0, 1.0) AS score FROM memory_words "
        "WHERE memory_words MATCH ? ORDER BY score DESC, rowid LIMIT ?"
    )

    def __init__(self, path: Path) -> None:
        self.path = path
        self.connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.connection.execute("PRAGMA journal_mode = WAL")
        self.connection.execute("CREATE VIRTUAL TABLE IF NOT EXISTS memory_words USING fts5 (scope, words)")

    def rows(self) -> int:
        return int(self.connection.execute("SELECT count(*) FROM memory_words").fetchone()[0])

    def build(self, documents: Sequence[Sequence[str]]) -> None:
        self.connection.execute("BEGIN")
        self.connection.executemany(
            "INSERT INTO memory_words (rowid, scope, words) VALUES (?, ?, ?)",
            ((row, _SCOPE, " ".join(tokens)) for row, tokens in enumerate(documents, 1)),
        )
        self.connection.execute("COMMIT")

    def search(self, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        if not terms:
            return []
        match = "words : (" + " OR ".join(f'"{term}"' for term in terms) + ")"
        return self.connection.execute(self._RANKED, (match, k)).fetchall()

    def insert(self, row: int, tokens: Sequence[str]) -> float:
        started = time.perf_counter()
        sql = "INSERT INTO memory_words (rowid, scope, words) VALUES (?, ?, ?)"
        self.connection.execute(sql, (row, _SCOPE, " ".join(tokens)))
        return time.perf_counter() - started  # autocommit: searchable once the statement returns

    def delete(self, row: int) -> float:
        started = time.perf_counter()
        self.connection.execute("DELETE FROM memory_words WHERE rowid = ?", (row,))
        return time.perf_counter() - started

    def totals(self) -> tuple[int, int]:
        """FTS5's row count and token total (every column), as the store reads them."""
        rows, *columns = _varints(self.connection.execute("SELECT block FROM memory_words_data WHERE id = 1").fetchone()[0])
        return rows, sum(columns)

    def memory_mb(self) -> float:
        return _file_mb(self.path)

    def close(self) -> None:
        self.connection.close()


class Lists:
    """The store's `UserWords` over the rows of an `Fts5` file; each search reads FTS5's totals."""

    name = "userwords"

    def __init__(self, fts5: Fts5) -> None:
        self._fts5 = fts5
        self.words: UserWords | None = None

    def build(self, documents: Sequence[Sequence[str]]) -> None:
        """From the FTS5 file's rows (what the store reads), not from `documents`, unpaced (the
        store's background build rests between slices: ~3x as long with nothing else to do)."""
        rows = _Rows()
        cursor = self._fts5.connection.execute("SELECT rowid, scope, words FROM memory_words ORDER BY rowid")
        while batch := cursor.fetchmany(4096):
            if not rows.add_plain(batch):
                raise SystemExit("a row holds a word that is not a plain token: the store would leave it to FTS5")
        self.words = UserWords.built(0, rows, 0, Pacer(slice_s=3600.0))

    def _lists(self) -> UserWords:
        if self.words is None:
            raise RuntimeError("build first")
        return self.words

    def search(self, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        rows, tokens = self._fts5.totals()
        return self._lists().ranked(list(terms), rows, tokens, k) if terms else []

    def insert(self, row: int, tokens: Sequence[str]) -> float:
        """The lists updated with one new row (`UserWords.updated`; FTS5 answers meanwhile)."""
        fresh = _Rows()
        fresh.add_plain([(row, _SCOPE, " ".join(tokens))])
        started = time.perf_counter()
        self.words = self._lists().updated(1, np.array([row], dtype=np.int64), fresh, 0, Pacer(slice_s=3600.0))
        return time.perf_counter() - started

    def delete(self, row: int) -> float:
        started = time.perf_counter()
        self.words = self._lists().updated(2, np.array([row], dtype=np.int64), _Rows(), 0, Pacer(slice_s=3600.0))
        return time.perf_counter() - started

    def memory_mb(self) -> float:
        words = self._lists()
        arrays = sum(value.nbytes for value in vars(words).values() if isinstance(value, np.ndarray))
        # a str key and an int value per word, plus the dict's slot (CPython's sizes, roughly)
        vocabulary = sum(49 + len(word) + 28 + 24 for word in words._vocabulary)
        return round((arrays + vocabulary) / 1024 / 1024, 1)

    def close(self) -> None:
        self.words = None


class Tantivy:
    """One tantivy index in `folder` (built, or reused when it holds the rows)."""

    name = "tantivy"

    def __init__(self, folder: Path) -> None:
        import tantivy

        self._tantivy = tantivy
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("row", stored=False, indexed=True, fast=True)
        builder.add_text_field("words", stored=False, tokenizer_name="whitespace", index_option="freq")
        self._schema = builder.build()
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._index = tantivy.Index(self._schema, path=str(folder))
        self._writer: Any = None
        self._searcher = self._index.searcher()

    def rows(self) -> int:
        return int(self._searcher.num_docs)

    def _write(self) -> Any:
        if self._writer is None:
            self._writer = self._index.writer(heap_size=256_000_000, num_threads=1)
        return self._writer

    def _publish(self) -> None:
        self._write().commit()
        self._index.reload()
        self._searcher = self._index.searcher()

    def build(self, documents: Sequence[Sequence[str]]) -> None:
        writer, document = self._write(), self._tantivy.Document
        for row, tokens in enumerate(documents, 1):
            writer.add_document(document(row=row, words=" ".join(tokens)))
        self._publish()
        writer.wait_merging_threads()
        self._writer = None
        self._index.reload()
        self._searcher = self._index.searcher()

    def search(self, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        if not terms:
            return []
        query_type, occur = self._tantivy.Query, self._tantivy.Occur
        query = query_type.boolean_query([(occur.Should, query_type.term_query(self._schema, "words", term)) for term in terms])
        hits = self._searcher.search(query, k, count=False).hits
        rows: list[Any] = self._searcher.fast_field_values("row", [address for _, address in hits])
        return [(int(row), float(score)) for (score, _), row in zip(hits, rows, strict=True)]

    def insert(self, row: int, tokens: Sequence[str]) -> float:
        started = time.perf_counter()
        self._write().add_document(self._tantivy.Document(row=row, words=" ".join(tokens)))
        self._publish()
        return time.perf_counter() - started

    def delete(self, row: int) -> float:
        started = time.perf_counter()
        self._write().delete_documents("row", row)
        self._publish()
        return time.perf_counter() - started

    def memory_mb(self) -> float:
        return round(sum(path.stat().st_size for path in self.folder.iterdir() if path.is_file()) / 1024 / 1024, 1)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.wait_merging_threads()
            self._writer = None


class Bm25s:
    """bm25s over the documents in memory. It has no way to add or remove one document: a
    change is a new index of every row (`insert` and `delete` time that)."""

    name = "bm25s"

    def __init__(self) -> None:
        import bm25s

        self._bm25s = bm25s
        self._documents: list[Sequence[str]] = []
        self._index: Any = None

    def build(self, documents: Sequence[Sequence[str]]) -> None:
        self._documents = list(documents)
        self._index = self._indexed(self._documents)

    def _indexed(self, documents: Sequence[Sequence[str]]) -> Any:
        index = self._bm25s.BM25(k1=1.2, b=0.75, method="robertson")
        index.index([list(tokens) for tokens in documents], show_progress=False)
        return index

    def search(self, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        known = [term for term in terms if term in self._index.vocab_dict]
        if not known:
            return []
        scores = self._index.get_scores(known)
        held = np.flatnonzero(scores > 0)
        if held.size > k:
            least = np.partition(scores[held], held.size - k)[held.size - k]
            held = held[scores[held] >= least]
        order = np.lexsort((held, -scores[held]))[:k]
        return [(int(index) + 1, float(scores[index])) for index in held[order]]

    def insert(self, row: int, tokens: Sequence[str]) -> float:
        started = time.perf_counter()
        self._documents.append(tokens)
        self._index = self._indexed(self._documents)
        return time.perf_counter() - started

    def delete(self, row: int) -> float:
        started = time.perf_counter()
        self._documents[row - 1] = []  # rows keep their numbers
        self._index = self._indexed(self._documents)
        return time.perf_counter() - started

    def memory_mb(self) -> float:
        arrays = sum(value.nbytes for value in self._index.scores.values() if isinstance(value, np.ndarray))
        vocabulary = sum(49 + len(word) + 28 + 24 for word in self._index.vocab_dict)
        return round((arrays + vocabulary) / 1024 / 1024, 1)

    def close(self) -> None:
        self._index = None


def make_engine(name: str, folder: Path, fts5: Fts5 | None = None) -> Engine:
    """The engine `name`, its files under `folder`; `userwords` reads the rows of `fts5`."""
    if name == "fts5":
        return Fts5(folder / "fts5.db")
    if name == "userwords":
        if fts5 is None:
            raise ValueError("userwords needs the fts5 engine's file")
        return Lists(fts5)
    if name == "tantivy":
        return Tantivy(folder / "tantivy")
    if name == "bm25s":
        return Bm25s()
    raise ValueError(f"unknown engine {name!r}; known: {', '.join(ENGINES)}")


def _file_mb(path: Path) -> float:
    total = sum(os.path.getsize(f"{path}{suffix}") for suffix in ("", "-wal") if os.path.exists(f"{path}{suffix}"))
    return round(total / 1024 / 1024, 1)


def remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
