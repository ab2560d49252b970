"""`bge_rank`: any `/rerank` endpoint (SiliconFlow, Jina, Cohere-style, vLLM), e.g. bge-reranker-v2-m3.

`POST {api_base}/rerank` with `{"model", "query", "documents", "top_n"}` answers
`results[{index, relevance_score}]`. `score()` gives one score per memory in the order given;
a memory the endpoint did not return (beyond `top_n`) scores `-inf`: it ranks below every
scored one, and nobody mistakes it for a real score of 0. Code that does arithmetic on scores
should treat non-finite ones as "not ranked".

`BgeRerankPostprocessor` (a LlamaIndex `BaseNodePostprocessor`, built on first access so that
importing this module stays light) reorders `NodeWithScore`s with the same endpoint code, for
use in any LlamaIndex pipeline: `BgeRerankPostprocessor(ranker=BgeRank(params), top_n=5)`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from memoryscope.models.base import RANK_BACKENDS, RankModel
from memoryscope.models.http import RemoteParams, json_client, reported_tokens
from memoryscope.models.token_count import count_tokens

if TYPE_CHECKING:
    from memoryscope.memory import MemoryNode

__all__ = ["BgeRank", "BgeRerankPostprocessor"]  # noqa: F822  # the postprocessor comes from __getattr__, on use

NOT_RANKED = -math.inf


@RANK_BACKENDS.register("bge_rank")
class BgeRank(RankModel):
    """Scores memories with a remote cross-encoder; thread-safe."""

    backend = "bge_rank"
    results_field = "results"

    class Params(RemoteParams):
        endpoint_path: ClassVar[str] = "/rerank"

        model_name: str = Field(default="BAAI/bge-reranker-v2-m3", description="The reranker as the server knows it.")
        top_n: int = Field(default=500, gt=0, description="Most documents scored per call; the rest score -inf.")

    def __init__(self, params: Params) -> None:
        endpoint = params.endpoint()
        super().__init__(params.model_name, endpoint=endpoint)
        self.params = params
        self._client = json_client(params, self.backend, endpoint)

    def score(self, query: str, memories: Sequence[MemoryNode], query_time: datetime | None = None) -> list[float]:
        """One score per memory, in the order given; `query_time` plays no part here."""
        return _in_input_order(self.rerank(query, [memory.content for memory in memories]), len(memories))

    async def ascore(self, query: str, memories: Sequence[MemoryNode], query_time: datetime | None = None) -> list[float]:
        return _in_input_order(await self.arerank(query, [memory.content for memory in memories]), len(memories))

    def rerank(self, query: str, documents: Sequence[str], top_n: int | None = None) -> list[tuple[int, float]]:
        """(index into `documents`, relevance score) pairs, best first, at most `top_n` of them."""
        if not documents:
            return []
        with self.usage.measure() as tokens:
            payload = self._client.post(self.request_body(query, list(documents), self._top_n(top_n, len(documents))))
            return self._read(payload, query, documents, tokens)

    async def arerank(self, query: str, documents: Sequence[str], top_n: int | None = None) -> list[tuple[int, float]]:
        if not documents:
            return []
        with self.usage.measure() as tokens:
            payload = await self._client.apost(self.request_body(query, list(documents), self._top_n(top_n, len(documents))))
            return self._read(payload, query, documents, tokens)

    def as_postprocessor(self, top_n: int | None = None) -> Any:
        """This model as a LlamaIndex node postprocessor."""
        return _postprocessor_class()(ranker=self, top_n=top_n)

    def request_body(self, query: str, documents: list[str], top_n: int) -> dict[str, Any]:
        return {"model": self.params.model_name, "query": query, "documents": documents, "top_n": top_n}

    def _top_n(self, top_n: int | None, count: int) -> int:
        return min(top_n or self.params.top_n, self.params.top_n, count)

    def _read(self, payload: Any, query: str, documents: Sequence[str], tokens: dict[str, int]) -> list[tuple[int, float]]:
        results = self._client.expect(payload, self.results_field, list)
        ranked: list[tuple[int, float]] = []
        seen: set[int] = set()
        for position, item in enumerate(results):
            index = item.get("index") if isinstance(item, dict) else None
            score = item.get("relevance_score") if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < len(documents) or index in seen:
                raise self._client.error(
                    f"malformed response: {self.results_field}[{position}].index must be a distinct 0..{len(documents) - 1}"
                )
            if not isinstance(score, int | float) or isinstance(score, bool):
                where = f"{self.results_field}[{position}].relevance_score"
                raise self._client.error(f"malformed response: expected {where} to be a number")
            seen.add(index)
            ranked.append((index, float(score)))
        used = reported_tokens(payload)
        tokens["prompt"] = used if used is not None else count_tokens(query) + sum(count_tokens(doc) for doc in documents)
        return sorted(ranked, key=lambda pair: pair[1], reverse=True)


def _in_input_order(ranked: list[tuple[int, float]], count: int) -> list[float]:
    scores = [NOT_RANKED] * count
    for index, score in ranked:
        scores[index] = score
    return scores


def __getattr__(name: str) -> Any:
    # `BgeRerankPostprocessor` subclasses a LlamaIndex class; LlamaIndex takes a second to import,
    # and this module is imported whenever rank backends are listed, so the class is made on use.
    if name == "BgeRerankPostprocessor":
        return _postprocessor_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@cache
def _postprocessor_class() -> type:
    from llama_index.core.bridge.pydantic import Field as LlamaField
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

    class BgeRerankPostprocessor(BaseNodePostprocessor):
        """Reorders nodes by a rerank endpoint's scores (best first), keeping the best `top_n`."""

        top_n: int | None = LlamaField(default=None, description="Nodes to keep; None keeps what the endpoint returns.")
        _ranker: BgeRank = PrivateAttr()

        def __init__(self, ranker: BgeRank, top_n: int | None = None, **kwargs: Any) -> None:
            super().__init__(**{"top_n": top_n, **kwargs})  # its pydantic fields, as keywords
            self._ranker = ranker

        @classmethod
        def class_name(cls) -> str:
            return "BgeRerankPostprocessor"

        def _texts(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> tuple[str, list[str]]:
            if query_bundle is None:
                raise ValueError("BgeRerankPostprocessor needs the query: pass query_str or query_bundle")
            return query_bundle.query_str, [item.node.get_content(metadata_mode=MetadataMode.EMBED) for item in nodes]

        @staticmethod
        def _reordered(nodes: list[NodeWithScore], ranked: list[tuple[int, float]]) -> list[NodeWithScore]:
            return [NodeWithScore(node=nodes[index].node, score=score) for index, score in ranked]

        def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
            if not nodes:
                return []
            query, texts = self._texts(nodes, query_bundle)
            return self._reordered(nodes, self._ranker.rerank(query, texts, self.top_n))

        async def _apostprocess_nodes(
            self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
        ) -> list[NodeWithScore]:
            if not nodes:
                return []
            query, texts = self._texts(nodes, query_bundle)
            return self._reordered(nodes, await self._ranker.arerank(query, texts, self.top_n))

    return BgeRerankPostprocessor
