"""Word splitting for keyword search and keyword scoring, English and Chinese alike.

Latin words and numbers are lower-cased; runs of CJK characters are segmented with jieba
(loaded once, lazily, from the dictionary inside the jieba package).

Keyword search matches `keyword_terms` of a query against `index_terms` of the memories: the
same words, lightly stemmed (`stem`), so "hobbies" finds "hobby" and "painted" finds "painting".
Every store indexes `keyword_text(node)` and searches for `keyword_query(query)`, so they all
see the same words of a memory.

Text a model wrote goes through `clean_model_text` before it becomes part of a memory (no control
characters, escape sequences or bidi overrides; typed; capped), and stored text goes through
`terminal_safe` before it is printed, so no escape code of a memory ever reaches a terminal.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import unicodedata
from functools import lru_cache
from typing import Any

from memoryscope.memory import MemoryNode, searchable_parts, searchable_text

__all__ = [
    "clean_model_text",
    "cap_text",
    "terminal_safe",
    "tokenize",
    "content_words",
    "keyword_terms",
    "keyword_query",
    "keyword_text",
    "rank_terms",
    "rank_terms_parts",
    "index_terms",
    "stem",
    "KEYWORD_TEXT_VERSION",
    "STOPWORDS",
]

# The version of what `keyword_text` returns. Changing it (its parts, the tokenizer, `stem`)
# needs a new version; a store whose index records another one re-indexes its keywords.
# 1: plain tokens of content + key. 2: stemmed, plus a message's speaker, context and reply.
# 3: stems from the English Snowball stemmer instead of hand-made suffix rules.
KEYWORD_TEXT_VERSION = "3"

_TOKEN = re.compile(r"[0-9a-z]+(?:'[a-z]+)?|[\u3400-\u9fff\uf900-\ufaff]+", re.IGNORECASE)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_jieba_lock = threading.Lock()

# Words too common to carry meaning in a keyword match.
_STOPWORD_TEXT = """
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves 's 're 've 'd 'll 't did does
的 了 和 是 在 我 你 他 她 它 们 也 就 都 而 及 与 着 或 一个 没有 吗 呢 吧 啊 这 那 有 被 把 让 给
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


# Terminal escape sequences (ECMA-48), removed whole so no parameter bytes are left behind.
_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, clearing the screen
    r"|\x1b[\]P^_X][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC (window titles, links), DCS, PM, APC, SOS strings
    r"|\x1b[ -/]*[0-~]"  # any other escape, and an unterminated string's opening
    r"|\x9b[0-?]*[ -/]*[@-~]"  # CSI in its one-byte C1 form
)
# Characters that are invisible or steer the terminal: C0 controls but tab, line feed and carriage
# return; DEL and C1 controls; bidi marks, embeddings, overrides and isolates (U+202A-202E,
# U+2066-2069: they reorder what is shown, "Trojan Source"); zero-width space, word joiner and
# BOM; lone surrogates (not encodable). Zero-width (non-)joiners stay: emoji and scripts need them.
_INVISIBLE = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff\ud800-\udfff"
_INVISIBLE_CHARS = re.compile(f"[{_INVISIBLE}]")
_UNSAFE_FOR_TERMINAL = re.compile(f"[{_INVISIBLE}\r]")
_MAX_DEPTH = 4  # how deep nested lists and objects are read before the rest is left out
_ELLIPSIS = "…"


def clean_model_text(value: Any, max_chars: int | None = None, *, multiline: bool = False) -> str:
    """`value` as a model wrote it (in JSON), made fit to store: "" when nothing is left.

    Types: a string as it is; a number or boolean as written (`42`, `2.5`, `true`); a list as its
    items joined by ", " (`["a", ["b", 3]]` -> "a, b, 3"); an object as "key: value; key: value";
    None, NaN and anything else as "". Then escape sequences and invisible characters (see
    `_INVISIBLE`) are removed, the text is NFC-normalised, and white space is collapsed to single
    spaces: one line, or with `multiline` single line breaks between non-empty lines. Last, a
    text longer than `max_chars` is cut (see `cap_text`)."""
    text = unicodedata.normalize("NFC", _as_text(value, 0))
    if multiline:
        text = "\n".join(line for line in (" ".join(part.split()) for part in text.splitlines()) if line)
    else:
        text = " ".join(text.split())
    return cap_text(text, max_chars) if max_chars is not None else text


def cap_text(text: str, max_chars: int) -> str:
    """`text` in at most `max_chars` characters: cut at a word boundary when one is near, with "…"."""
    if len(text) <= max_chars:
        return text
    if max_chars <= 1:
        return text[:max_chars]
    cut = text[: max_chars - 1]
    space = cut.rfind(" ")
    if space >= max_chars * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:，；：、") + _ELLIPSIS


def terminal_safe(text: str) -> str:
    """`text` fit for a terminal: every escape, control (but line feed and tab), bidi override
    and invisible character shown as `\\uXXXX` instead of acting. JSON text stays valid JSON with
    the same value (these characters only occur inside its strings, where `\\uXXXX` is an escape)."""
    return _UNSAFE_FOR_TERMINAL.sub(lambda match: f"\\u{ord(match.group(0)):04x}", text.replace("\r\n", "\n"))


def _as_text(value: Any, depth: int) -> str:
    """`value` as text without escape sequences and invisible characters (each part cleaned on
    its own, so a list item that was only an escape code leaves no empty ", " behind)."""
    if isinstance(value, str):
        return _INVISIBLE_CHARS.sub("", _ESCAPE_SEQUENCE.sub("", value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if depth >= _MAX_DEPTH:
        return ""
    if isinstance(value, list | tuple):
        parts = (" ".join(_as_text(item, depth + 1).split()) for item in value)
        return ", ".join(part for part in parts if part)
    if isinstance(value, dict):
        pairs = ((_as_text(key, depth + 1).strip(), " ".join(_as_text(item, depth + 1).split())) for key, item in value.items())
        return "; ".join(f"{key}: {item}" if key else item for key, item in pairs if item)
    return ""  # no repr of an unexpected object ever becomes memory text


@lru_cache(maxsize=1)
def _jieba() -> Any:  # jieba ships no type hints
    with _jieba_lock:
        import jieba

        jieba.setLogLevel(logging.WARNING)
        jieba.initialize()
        return jieba


def tokenize(text: str) -> list[str]:
    """All tokens of `text`, in order, lower-cased; CJK runs split into words."""
    if text.isascii():
        return _ascii_tokens(text)
    if not _CJK.search(text):
        return _TOKEN.findall(text.lower())  # without a Python loop per token
    tokens: list[str] = []
    for match in _TOKEN.finditer(text):
        piece = match.group(0)
        if _CJK.match(piece):
            tokens.extend(word for word in _jieba().lcut(piece) if word.strip())
        else:
            tokens.append(piece.lower())
    return tokens


# ASCII text as bytes: letters lower-cased, digits and the apostrophe kept, anything else a space
_ASCII_WORD_BYTES = bytes(
    code + 32 if 65 <= code <= 90 else code if 97 <= code <= 122 or 48 <= code <= 57 or code == 39 else 32
    for code in range(256)
)
_ASCII_TOKEN = re.compile(r"[0-9a-z]+(?:'[a-z]+)?")


def _ascii_tokens(text: str) -> list[str]:
    """`_TOKEN.findall(text.lower())` for ASCII `text`, ~10x faster: no match can span a character
    outside [0-9a-z'], so those become spaces and `split` finds the words; only a piece with an
    apostrophe ("i'm", "rock'n'roll", "'quoted'") needs the pattern. Ranking and keyword indexing
    tokenize every candidate and every memory, and most text is ASCII."""
    spaced = text.encode("ascii").translate(_ASCII_WORD_BYTES).decode("ascii")
    if "'" not in spaced:
        return spaced.split()
    tokens: list[str] = []
    for piece in spaced.split():
        if "'" in piece:
            tokens.extend(_ASCII_TOKEN.findall(piece))
        else:
            tokens.append(piece)
    return tokens


def content_words(text: str) -> list[str]:
    """`tokenize` without stopwords: the words that carry meaning for keyword matching."""
    return [token for token in tokenize(text) if token not in STOPWORDS]


@lru_cache(maxsize=1)
def _snowball() -> Any:
    import Stemmer  # PyStemmer: the Snowball stemmers, compiled

    return Stemmer.Stemmer("english")


_STEMS: dict[str, str] = {}  # word -> stem, for the words seen; at most _STEMS_KEPT of them
_STEMS_KEPT = 65536


def stem(word: str) -> str:
    """`_stem` of `word`, remembered: keyword search and ranking stem every word of every
    candidate, and a dict lookup is several times cheaper than a call through `lru_cache`."""
    found = _STEMS.get(word)
    if found is None:
        if len(_STEMS) >= _STEMS_KEPT:
            _STEMS.clear()  # rare; simpler and cheaper than least-recently-used bookkeeping
        found = _STEMS[word] = _stem(word)
    return found


def _stem(word: str) -> str:
    """`word`'s English Snowball stem: "movies"/"movie" -> "movi", "hobbies" -> "hobbi",
    "painting"/"painted" -> "paint", "running" -> "run", "liked"/"likes" -> "like",
    "jon's" -> "jon", "news" stays "news". Short words, numbers and CJK are kept as they are."""
    if word.endswith("'s"):
        word = word[:-2]  # "Jon's" is about Jon
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    return str(_snowball().stemWord(word))


def keyword_terms(text: str) -> list[str]:
    """The stemmed content words of `text`: what a keyword query looks for."""
    stems = _STEMS
    return [stems.get(word) or stem(word) for word in tokenize(text) if word not in STOPWORDS]


def index_terms(text: str) -> list[str]:
    """Every token of `text`, stemmed: what the keyword index of a memory holds."""
    stems = _STEMS
    return [stems.get(token) or stem(token) for token in tokenize(text)]


def keyword_text(node: MemoryNode) -> str:
    """What a store's keyword index holds for `node`: the `index_terms` of its `searchable_text`
    (content, key, and a chat message's speaker, context and reply), joined by single spaces,
    so a whitespace tokenizer (SQLite FTS5's unicode61, Elasticsearch's `whitespace` analyzer)
    keeps jieba's words and the stems as they are."""
    return " ".join(index_terms(searchable_text(node)))


def rank_terms(node: MemoryNode) -> str:
    """What a ranker counts of `node`, parsed once when it is written: the `keyword_terms` of its
    own words, a newline, those of the words around it (`searchable_parts`), each list joined by
    single spaces (a term holds no whitespace: `tokenize` makes words of letters, digits and CJK).
    Stores keep it beside the memory and hand it back on `MemoryNode.rank_terms`; it follows
    `KEYWORD_TEXT_VERSION`, so a store re-indexing its keywords makes it again."""
    own, around = searchable_parts(node)
    return " ".join(keyword_terms(own)) + "\n" + (" ".join(keyword_terms(around)) if around else "")


def rank_terms_parts(terms: str) -> tuple[list[str], list[str]]:
    """`(own, around)` term lists of a `rank_terms` text, as `keyword_terms` gave them."""
    own, _, around = terms.partition("\n")
    return own.split(), around.split()


def keyword_query(text: str) -> str:
    """What a store's keyword search looks for: the distinct `keyword_terms` of `text` (all its
    `index_terms` when every word is a stopword), joined by single spaces; "" when it has no words."""
    return " ".join(dict.fromkeys(keyword_terms(text) or index_terms(text)))
