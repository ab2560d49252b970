"""`bge_embedding`: any OpenAI-compatible `/embeddings` endpoint (SiliconFlow, vLLM, TEI, OpenAI, ...).

Each batch of at most `batch_size` texts is one request, `POST {api_base}/embeddings` with the
body `{"model": ..., "input": [...], "encoding_format": "float"}` and a bearer key. Rows come
back ordered by their `index` (servers may answer out of order), L2-normalised, as float32. The
vector size is `dimensions` when given (sent to the server only with `send_dimensions`), else
learned from the first reply; asking for `dimension` before any call makes one small probe call
(`known_dimension` never calls: a store opens without reaching the server, and checks its vectors'
size when the model first answers). Sync calls use requests, async ones aiohttp.

Each text (with its prefix) is cut to its first `max_input_tokens` tokens before it is sent, as
counted by cl100k_base (the server's tokenizer is not known here, so the count is an estimate);
the memory keeps the whole text. `embed_queries_and_passages` sends queries and passages in one
request (a chat turn's query and the message it stores).

`as_llama_index()` wraps the model as a LlamaIndex `BaseEmbedding` for LlamaIndex pipelines.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cache
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from memoryscope.models.base import EMBEDDING_BACKENDS, EmbeddingModel
from memoryscope.models.http import RemoteParams, json_client, reported_tokens
from memoryscope.models.token_count import count_tokens, truncate_tokens

__all__ = ["BgeEmbedding"]

_PROBE_TEXT = "dimension probe"


@EMBEDDING_BACKENDS.register("bge_embedding")
class BgeEmbedding(EmbeddingModel):
    """Remote embeddings over the OpenAI `/embeddings` API; thread-safe."""

    backend = "bge_embedding"

    class Params(RemoteParams):
        endpoint_path: ClassVar[str] = "/embeddings"

        model_name: str = Field(default="BAAI/bge-m3", description="The embedding model as the server knows it.")
        batch_size: int = Field(default=32, gt=0, description="Texts per request.")
        dimensions: int | None = Field(
            default=None,
            gt=0,
            description="Vector size, when known; else learned from the first reply (nothing is asked before an "
            "operation needs it). Checked against every reply and the store's vectors. Sent only with `send_dimensions`.",
        )
        query_prefix: str = Field(
            default="", description="Put before each query, for models that want an instruction (bge v1.5: `Represent ...: `)."
        )
        passage_prefix: str = Field(default="", description="Put before each passage (memory) text.")
        max_input_tokens: int = Field(
            default=8192,
            gt=0,
            description="Each text (prefix included) is sent cut to its first this many tokens, estimated with "
            "cl100k_base; the memory still keeps the whole text. 8192 is bge-m3's limit; set the model's own.",
        )
        send_dimensions: bool = Field(
            default=False,
            description="Send `dimensions` in each request, for models that shorten their vectors to it "
            "(OpenAI text-embedding-3; MemoryScope 0.1's `openai_embedding` did).",
        )

    def __init__(self, params: Params) -> None:
        endpoint = params.endpoint()
        super().__init__(params.model_name, endpoint=endpoint)
        self.params = params
        self._client = json_client(params, self.backend, endpoint)
        self._dimension = params.dimensions
        self._lock = threading.Lock()

    @property
    def known_dimension(self) -> int | None:
        return self._dimension

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._embed_batch([_PROBE_TEXT])  # the server tells the size; reading the reply sets it
        if self._dimension is None:
            raise self._client.error("could not learn the vector size from a probe call; set `dimensions`")
        return self._dimension

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(self._inputs(self.params.query_prefix, texts))

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(self._inputs(self.params.passage_prefix, texts))

    def embed_queries_and_passages(self, queries: Sequence[str], passages: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        matrix = self._embed(self._inputs(self.params.query_prefix, queries) + self._inputs(self.params.passage_prefix, passages))
        return matrix[: len(queries)], matrix[len(queries) :]

    async def aembed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return await self._aembed(self._inputs(self.params.query_prefix, texts))

    async def aembed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return await self._aembed(self._inputs(self.params.passage_prefix, texts))

    def as_llama_index(self) -> Any:
        """This model as a LlamaIndex `BaseEmbedding` (queries and passages kept apart)."""
        return _llama_index_adapter_class()(self)

    # -- requests --------------------------------------------------------------------------

    def _inputs(self, prefix: str, texts: Sequence[str]) -> list[str]:
        return [truncate_tokens(prefix + text, self.params.max_input_tokens) for text in texts]

    def _batches(self, texts: list[str]) -> list[list[str]]:
        size = self.params.batch_size
        return [texts[start : start + size] for start in range(0, len(texts), size)]

    def _embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        return np.vstack([self._embed_batch(batch) for batch in self._batches(texts)])

    async def _aembed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        # one batch after the other, as the sync side does: a burst of parallel requests is
        # what rate limits punish
        return np.vstack([await self._aembed_batch(batch) for batch in self._batches(texts)])

    def _body(self, batch: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.params.model_name, "input": batch, "encoding_format": "float"}
        if self.params.send_dimensions and self.params.dimensions is not None:
            body["dimensions"] = self.params.dimensions
        return body

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        with self.usage.measure() as tokens:
            payload = self._client.post(self._body(batch))
            return self._read(payload, batch, tokens)

    async def _aembed_batch(self, batch: list[str]) -> np.ndarray:
        with self.usage.measure() as tokens:
            payload = await self._client.apost(self._body(batch))
            return self._read(payload, batch, tokens)

    def _read(self, payload: Any, batch: list[str], tokens: dict[str, int]) -> np.ndarray:
        """The reply's vectors as rows in input order, normalised; checks every field it uses."""
        data = self._client.expect(payload, "data", list)
        if len(data) != len(batch):
            raise self._client.error(f"malformed response: expected {len(batch)} embeddings, got {len(data)}")
        rows: list[Any] = [None] * len(batch)
        for position, item in enumerate(data):
            index = item.get("index", position) if isinstance(item, dict) else None
            vector = item.get("embedding") if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < len(batch) or rows[index] is not None:
                raise self._client.error(f"malformed response: data[{position}].index must be a distinct 0..{len(batch) - 1}")
            if not isinstance(vector, list) or not vector:
                raise self._client.error(f"malformed response: expected data[{position}].embedding to be a list of floats")
            rows[index] = vector
        matrix = self._matrix(rows)
        used = reported_tokens(payload)
        tokens["prompt"] = used if used is not None else sum(count_tokens(text) for text in batch)
        return matrix

    def _matrix(self, rows: list[Any]) -> np.ndarray:
        try:
            matrix = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError):
            raise self._client.error("malformed response: embeddings must be lists of numbers of one length") from None
        if matrix.ndim != 2:
            raise self._client.error("malformed response: embeddings must be lists of numbers of one length")
        with self._lock:
            if self._dimension is None:
                self._dimension = matrix.shape[1]
        if matrix.shape[1] != self._dimension:
            told = "`dimensions` in its config" if self.params.dimensions is not None else "its first reply"
            raise self._client.error(
                f"expected vectors of size {self._dimension} ({told}), got {matrix.shape[1]}; "
                f"set `dimensions: {matrix.shape[1]}` under the embedding model's config, or check `model_name`"
            )
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms == 0.0, 1.0, norms)


@cache  # one adapter class, made on first use: LlamaIndex is slow to import
def _llama_index_adapter_class() -> type:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.bridge.pydantic import PrivateAttr

    class BgeLlamaIndexEmbedding(BaseEmbedding):
        """A `BgeEmbedding` seen as a LlamaIndex embedding model."""

        _model: BgeEmbedding = PrivateAttr()

        def __init__(self, model: BgeEmbedding, **kwargs: Any) -> None:
            super().__init__(model_name=model.model_name, embed_batch_size=model.params.batch_size, **kwargs)
            self._model = model

        @classmethod
        def class_name(cls) -> str:
            return "BgeLlamaIndexEmbedding"

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._model.embed_queries([query])[0].tolist()

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return (await self._model.aembed_queries([query]))[0].tolist()

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._model.embed_passages([text])[0].tolist()

        async def _aget_text_embedding(self, text: str) -> list[float]:
            return (await self._model.aembed_passages([text]))[0].tolist()

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._model.embed_passages(texts).tolist()

        async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return (await self._model.aembed_passages(texts)).tolist()

    return BgeLlamaIndexEmbedding
