"""`dashscope_rank`: DashScope's text-rerank API (gte-rerank), over plain HTTP, no SDK needed.

`POST {api_base}/services/rerank/text-rerank/text-rerank` with
`{"model": "gte-rerank", "input": {"query", "documents"}, "parameters": {"return_documents": false, "top_n": N}}`
answers `output.results[{index, relevance_score}]`. Everything else (retries, errors, `-inf`
for memories beyond `top_n`, `as_postprocessor()`) is as in `bge_rank`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from memoryscope.models.base import RANK_BACKENDS
from memoryscope.models.rank.bge_rank import BgeRank

__all__ = ["DashScopeRank"]


@RANK_BACKENDS.register("dashscope_rank")
class DashScopeRank(BgeRank):
    """Scores memories with DashScope's gte-rerank."""

    backend = "dashscope_rank"
    results_field = "output.results"

    class Params(BgeRank.Params):
        endpoint_path: ClassVar[str] = "/services/rerank/text-rerank/text-rerank"

        model_name: str = Field(default="gte-rerank", description="A DashScope rerank model, e.g. `gte-rerank`, `gte-rerank-v2`.")
        api_base: str = Field(default="https://dashscope.aliyuncs.com/api/v1", description="DashScope's API base.")
        api_key_env: str | None = Field(default="DASHSCOPE_API_KEY", description="Environment variable with the DashScope key.")

    def request_body(self, query: str, documents: list[str], top_n: int) -> dict[str, Any]:
        return {
            "model": self.params.model_name,
            "input": {"query": query, "documents": documents},
            "parameters": {"return_documents": False, "top_n": top_n},
        }
