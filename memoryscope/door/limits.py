"""The sizes every face accepts alike: a text's characters, items in one call, `top_k` (the
config's `server:` section sets them, for every face, not only the server)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memoryscope.config.server_settings import ServerSettings
from memoryscope.errors import InvalidInputError, TooLargeError, TooManyError

__all__ = ["Limits"]


@dataclass(frozen=True)
class Limits:
    """The sizes every face accepts alike (the config's `server:` section sets them)."""

    max_text_chars: int = 4000  # a query, a message, a memory's text
    max_items: int = 200  # messages, texts or ids in one call
    max_top_k: int = 100

    @classmethod
    def of(cls, settings: ServerSettings) -> Limits:
        return cls(settings.max_query_chars, settings.max_messages_per_request, settings.max_top_k)

    def check_text(self, text: str, what: str) -> None:
        check_unicode(text, f"the {what}")
        if len(text) > self.max_text_chars:
            raise TooLargeError(
                f"the {what} has {len(text)} characters; at most {self.max_text_chars} (server.max_query_chars)",
                code="query_too_long",
            )

    def check_count(self, count: int, what: str) -> None:
        if count > self.max_items:
            message = f"{count} {what} in one call; at most {self.max_items} (server.max_messages_per_request)"
            raise TooManyError(message, code="too_many_messages")

    def check_top_k(self, top_k: Any) -> int:
        if isinstance(top_k, bool) or not isinstance(top_k, int):
            raise InvalidInputError(f"top_k must be a whole number, got {top_k!r}")
        if top_k < 1:
            raise InvalidInputError(f"top_k must be 1 or more, got {top_k}")
        if top_k > self.max_top_k:
            raise TooLargeError(f"top_k {top_k} is over {self.max_top_k} (server.max_top_k)", code="top_k_too_large")
        return top_k


def check_unicode(text: str, what: str) -> None:
    """InvalidInputError when `text` holds an unpaired surrogate (half of a UTF-16 pair, as a JSON
    escape like "\\ud800" can carry): no store can keep it, and no answer could carry it back."""
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidInputError(
            f"{what} is not valid Unicode: an unpaired surrogate {text[error.start]!r} at character {error.start}; "
            "send the text as UTF-8 (a JSON \\ud83d escape must be followed by its pair)",
            code="invalid_unicode",
        ) from None
