"""`openai`: OpenAI's chat API.

Built on `OpenAILike` rather than LlamaIndex's `OpenAI` class: that class looks up every model
name in a table of known OpenAI models and refuses names it does not know (new models, dated
snapshots, proxies). `OpenAILike` sends any name, and the request is the same.
"""

from __future__ import annotations

from pydantic import Field

from memoryscope.models.base import GENERATION_BACKENDS
from memoryscope.models.generation.openai_like import OpenAICompatibleParams, OpenAILikeGeneration

__all__ = ["OpenAIGeneration"]


@GENERATION_BACKENDS.register("openai")
class OpenAIGeneration(OpenAILikeGeneration):
    """Chat with OpenAI (or any server at `api_base` that speaks its API)."""

    backend = "openai"

    class Params(OpenAICompatibleParams):
        model_name: str = Field(default="gpt-4o-mini", description="An OpenAI chat model, e.g. `gpt-4o-mini`.")
        api_base: str = Field(default="https://api.openai.com/v1", description="OpenAI's API, or a proxy of it.")
        api_key_env: str | None = Field(default="OPENAI_API_KEY", description="Environment variable holding the OpenAI key.")
        context_window: int = Field(
            default=128000, gt=0, description="The model's context window in tokens (LlamaIndex metadata)."
        )
