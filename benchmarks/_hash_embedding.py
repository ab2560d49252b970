"""A near-zero-cost embedding model, to time the ingest path with the model's time taken out.

Each text gets a pseudo-random unit vector seeded by a hash of the text: deterministic, distinct
per text, and microseconds per text. Meaningless for retrieval quality; only for throughput.
Used from a config as `model.embedding_model: {class: benchmarks._hash_embedding.HashEmbedding,
dimension: 384}`.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
from pydantic import Field

from memoryscope.models.base import EmbeddingModel, ModelParams

__all__ = ["HashEmbedding"]


class HashEmbedding(EmbeddingModel):
    backend = "hash_embedding"

    class Params(ModelParams):
        model_name: str = Field(default="hash-embedding", description="Informational.")
        dimension: int = Field(default=384, gt=0, description="Vector length (match the real model's).")

    def __init__(self, params: Params | None = None) -> None:
        params = params or self.Params()
        super().__init__(params.model_name, endpoint="local")
        self.params = params

    @property
    def dimension(self) -> int:
        return self.params.dimension

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._vectors(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._vectors(texts)

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        with self.usage.measure():
            out = np.empty((len(texts), self.dimension), dtype=np.float32)
            for row, text in enumerate(texts):
                out[row] = np.random.default_rng(zlib.crc32(text.encode("utf-8"))).standard_normal(self.dimension)
            out /= np.linalg.norm(out, axis=1, keepdims=True)
            return out
