"""Documents for a data source: files read to text, and text cut into passages.

    documents = read_documents(["notes/", "paper.pdf"])     # a folder is read file by file
    passages = chunk_text(documents[0].text)                 # by paragraphs, with an overlap

Which files: `.txt` and `.md` (and `.markdown`, `.rst`, `.text`) as UTF-8 text, `.pdf` through
`pypdf` (the text of each page; a scanned PDF without a text layer gives none, and says so).
Folders are read in name order, recursively when asked; files of other kinds in a folder are
skipped and named, a file of another kind named on its own is an error naming the kinds read.

Chunking (`chunk_text`): paragraphs (split at blank lines) are packed into passages of at most
`size` characters; a paragraph longer than that is cut at sentence ends, then at spaces. Each
passage after the first begins with the last `overlap` characters of the one before (from a
word boundary), so a fact cut in two is whole in one of them. 1,000 characters is about 250
tokens, the size MemGPT's loaders used: long enough to stand alone, short enough to embed well.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memoryscope.errors import InvalidInputError

__all__ = ["Document", "TEXT_SUFFIXES", "SUFFIXES", "read_documents", "read_document", "chunk_text", "text_hash"]

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst", ".text")
SUFFIXES = (*TEXT_SUFFIXES, ".pdf")
CHUNK_CHARS = 1000
OVERLAP_CHARS = 200
_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")


@dataclass(frozen=True)
class Document:
    """One file's text (or stdin's), named as the user named it."""

    name: str
    text: str


def text_hash(text: str) -> str:
    """A short fixed name for a text (what tells a passage already loaded)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def read_documents(
    paths: Iterable[str | Path], *, recursive: bool = True, suffixes: Sequence[str] = SUFFIXES
) -> tuple[list[Document], list[str]]:
    """The documents in `paths` (files, and folders' files of the kinds in `suffixes`), and the
    files of a folder that were skipped (another kind). A missing path or a file of another kind
    named on its own is an InvalidInputError naming it."""
    wanted = tuple(suffix.lower() if suffix.startswith(".") else f".{suffix.lower()}" for suffix in suffixes)
    documents: list[Document] = []
    skipped: list[str] = []
    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            pattern = "**/*" if recursive else "*"
            for file in sorted(p for p in path.glob(pattern) if p.is_file()):
                if file.suffix.lower() in wanted:
                    documents.append(read_document(file))
                else:
                    skipped.append(str(file))
        elif path.is_file():
            if path.suffix.lower() not in wanted:
                raise InvalidInputError(
                    f"{path}: cannot read {path.suffix or 'a file without a suffix'}; read are: {', '.join(wanted)}"
                )
            documents.append(read_document(path))
        else:
            raise InvalidInputError(f"{path}: no such file or folder")
    return documents, skipped


def read_document(path: Path) -> Document:
    """One file's text: PDF through pypdf, anything else as UTF-8 text."""
    if path.suffix.lower() == ".pdf":
        return Document(str(path), _pdf_text(path))
    try:
        return Document(str(path), path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise InvalidInputError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None


def _pdf_text(path: Path) -> str:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError:  # pragma: no cover - a dependency; only a broken install lacks it
        raise InvalidInputError(f"{path}: reading PDF needs pypdf (pip install pypdf)") from None
    try:
        reader = PdfReader(str(path))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, OSError, ValueError) as error:
        raise InvalidInputError(f"{path}: not a PDF that can be read ({error})") from None
    return "\n\n".join(page.strip() for page in pages if page.strip())


def chunk_text(text: str, *, size: int = CHUNK_CHARS, overlap: int = OVERLAP_CHARS) -> list[str]:
    """`text` as passages of at most `size` characters, by paragraphs, each beginning with the
    last `overlap` characters of the one before (see the module)."""
    if size < 50:
        raise InvalidInputError(f"chunk size {size}: give at least 50 characters")
    if not 0 <= overlap < size // 2:
        raise InvalidInputError(f"chunk overlap {overlap}: give 0 or more characters, under half the chunk size ({size})")
    pieces = [piece for paragraph in _PARAGRAPH.split(text) for piece in _fitted(paragraph.strip(), size - overlap - 2)]
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + 2 + len(piece) > size:
            chunks.append(current)
            current = _tail(current, overlap)
        current = f"{current}\n\n{piece}" if current else piece
    if current.strip():
        chunks.append(current)
    return chunks


def _fitted(paragraph: str, size: int) -> list[str]:
    """A paragraph as pieces of at most `size` characters: whole, else by sentences, else by words."""
    if not paragraph:
        return []
    if len(paragraph) <= size:
        return [paragraph]
    pieces: list[str] = []
    current = ""
    for part in _SENTENCE.split(paragraph):
        for word in [part] if len(part) <= size else _words(part, size):
            if current and len(current) + 1 + len(word) > size:
                pieces.append(current)
                current = ""
            current = f"{current} {word}" if current else word
    if current:
        pieces.append(current)
    return pieces


def _words(text: str, size: int) -> list[str]:
    """A sentence longer than `size` cut at spaces (a word longer than that, at `size`)."""
    out: list[str] = []
    for word in text.split():
        out.extend(word[start : start + size] for start in range(0, len(word), size))
    return out


def _tail(text: str, overlap: int) -> str:
    """The last `overlap` characters of `text`, from a word boundary."""
    if overlap <= 0:
        return ""
    tail = text[-overlap:]
    space = tail.find(" ")
    return tail[space + 1 :] if 0 <= space < len(tail) - 1 and len(text) > overlap else tail
