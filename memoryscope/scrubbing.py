"""Hiding API keys from every text MemoryScope shows: error messages, tracebacks, log records.

A server may echo the key it was sent ("Incorrect API key provided: sk-..."), and MemoryScope
puts snippets of server replies into its errors and logs. So every such text goes through
`scrub`, with the keys of every model built in this process (`register_key` is called when a
model reads its key, from `api_key_env` or an inline `api_key`).

The rule `scrub` follows:

- A key of `MIN_SECRET_CHARS` (8) characters or more is a secret. It becomes `***` wherever it
  appears, even inside a longer word; so does any start of it of 4 or more characters that was
  cut off: followed by `…` or `...`, as a snippet cut at 200 characters leaves it (`sk-abc…` →
  `***…`), or standing as a word at the very end of the text.
- A shorter key is not a secret: local servers take any word (`e`, `x`, `none`), and hiding it
  as a substring would mangle every message (`malform***d r***spons***`). It is hidden only
  where it stands whole right after a key marker: `Bearer e`, `Authorization: e`,
  `api_key: e`, `"key": "e"`, `token=e`, `API key provided: e`.

Log records: once a key is known, every log record made in this process has its message, its
arguments, its traceback (`exc_info`, `exc_text`) and its `stack_info` scrubbed before any
handler sees it: MemoryScope's (`memoryscope.*`, `workers.*`) at every level, and third-party
ones alike (openai, httpx, urllib3 at DEBUG), since a key is a secret whoever logs it. This is
done by wrapping the log record factory, not by a filter on the `memoryscope` logger: Python
applies a logger's filters only to records logged on that very logger, never to those that
propagate up from its children (`memoryscope.scheduler`). A record whose traceback held a key
keeps the scrubbed text in `exc_text` and loses `exc_info`, so handlers that format exceptions
themselves (error trackers, JSON formatters) cannot read the key back from the exception. An
application that installs its own record factory later without calling the previous one
turns this off; `KeyScrubbingFilter` does the same work as a filter for such a handler.
"""

from __future__ import annotations

import logging
import re
import threading
import traceback
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

__all__ = ["MIN_SECRET_CHARS", "KeyScrubbingFilter", "known_keys", "register_key", "scrub", "scrub_record"]

MIN_SECRET_CHARS = 8
_MIN_CUT_CHARS = 4  # a cut-off start shorter than this says too little to hide
_HIDDEN = "***"
# Where a short key stands as a key: `Bearer e`, `api_key: e`, `"key": "e"`, `key provided: e`.
_MARKER = (
    r"(?i:\bbearer\s+|\b(?:api[ _-]?key|key|token|secret|password|authorization)"
    r"(?:\s+provided)?[\"']?\s*[:=]\s*(?:bearer\s+)?[\"']?)"
)

# The keys of the models built in this process. Process-wide on purpose: log records are
# process-wide too, and a key known to any model must be hidden from all of them.
_keys: frozenset[str] = frozenset()
_keys_lock = threading.Lock()


def register_key(key: str | None) -> None:
    """Hide `key` from every error and log record from now on (no-op for None or blanks)."""
    global _keys
    if not key or not key.strip():
        return
    with _keys_lock:
        if key not in _keys:
            _keys = _keys | {key}
    _install_record_factory()


def known_keys() -> frozenset[str]:
    return _keys


def scrub(text: str, keys: Iterable[str | None] | None = None) -> str:
    """`text` with `keys` (default: every registered key) hidden, by the rule in the module docstring."""
    chosen = _keys if keys is None else {key for key in keys if key}
    for key in sorted(chosen, key=len, reverse=True):  # a key that contains another goes first
        if key[:_MIN_CUT_CHARS] not in text:  # every match, whole or cut off, holds this
            continue
        if len(key) >= MIN_SECRET_CHARS:
            text = _secret_pattern(key).sub(_HIDDEN, text)
        else:
            text = _short_key_pattern(key).sub(r"\g<1>" + _HIDDEN, text)
    return text


@lru_cache(maxsize=64)
def _secret_pattern(key: str) -> re.Pattern[str]:
    starts = "|".join(re.escape(key[:length]) for length in range(len(key) - 1, _MIN_CUT_CHARS - 1, -1))
    # cut off by a snippet (`…`, `...`), even when glued to the text before; or ending the text as a word
    return re.compile(rf"{re.escape(key)}|(?:{starts})(?=…|\.\.\.)|(?<![\w-])(?:{starts})\Z")


@lru_cache(maxsize=64)
def _short_key_pattern(key: str) -> re.Pattern[str]:
    return re.compile(rf"({_MARKER}){re.escape(key)}(?![\w-])")


# -- log records -------------------------------------------------------------------------------


def scrub_record(record: logging.LogRecord) -> None:
    """Hide every registered key in `record`, in place. Records that hold none are left untouched."""
    if not _keys:
        return
    try:
        message = record.getMessage()
    except Exception:  # a bad format string is the handler's to report, as it would be without us
        message = None
    if message is not None:
        hidden = scrub(message)
        if hidden != message:
            record.msg, record.args = hidden, None
    if record.exc_info and record.exc_info[1] is not None:
        text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")  # as Formatter.formatException
        hidden = scrub(text)
        if hidden != text:
            record.exc_info, record.exc_text = None, hidden
    if record.exc_text:
        record.exc_text = scrub(record.exc_text)
    if record.stack_info:
        record.stack_info = scrub(record.stack_info)


class KeyScrubbingFilter(logging.Filter):
    """`scrub_record` as a filter, for a handler that receives records made before the first
    key was registered, or made by a record factory that skips ours. Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        scrub_record(record)
        return True


class _ScrubbingRecordFactory:
    """Makes records with the factory it replaced, then scrubs them."""

    def __init__(self, previous: Callable[..., logging.LogRecord]) -> None:
        self.previous = previous

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self.previous(*args, **kwargs)
        scrub_record(record)
        return record


_factory_lock = threading.Lock()
_factory_installed = False


def _install_record_factory() -> None:
    global _factory_installed
    with _factory_lock:
        if not _factory_installed:
            logging.setLogRecordFactory(_ScrubbingRecordFactory(logging.getLogRecordFactory()))
            _factory_installed = True
