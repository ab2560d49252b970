"""`dashscope`: Alibaba Cloud's DashScope (Qwen models).

By default through DashScope's OpenAI-compatible mode
(`https://dashscope.aliyuncs.com/compatible-mode/v1`): no extra package, and the same request
code, retries and streaming as `openai_like`. With `native_sdk: true` it uses LlamaIndex's
DashScope LLM over the DashScope SDK instead, which needs `pip install "memoryscope[dashscope]"`.
Function calling (`chat_with_tools`) works in the compatible mode only.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from pydantic import Field

from memoryscope.errors import ModelError
from memoryscope.models.base import GENERATION_BACKENDS
from memoryscope.models.generation._llama_index_chat import LlamaIndexGeneration
from memoryscope.models.generation.openai_like import OpenAICompatibleParams, OpenAILikeGeneration
from memoryscope.models.http import read_api_key

__all__ = ["DashScopeGeneration"]

_NATIVE_ENDPOINT = "https://dashscope.aliyuncs.com/api/v1 (DashScope SDK)"
_INSTALL_HINT = 'pip install "memoryscope[dashscope]", or drop `native_sdk: true` to use the compatible mode'


@GENERATION_BACKENDS.register("dashscope")
class DashScopeGeneration(OpenAILikeGeneration):
    """Chat with a Qwen model on DashScope."""

    backend = "dashscope"

    class Params(OpenAICompatibleParams):
        model_name: str = Field(default="qwen-plus", description="A DashScope model, e.g. `qwen-plus`, `qwen-max`.")
        api_base: str = Field(
            default="https://dashscope.aliyuncs.com/compatible-mode/v1", description="DashScope's OpenAI-compatible endpoint."
        )
        api_key_env: str | None = Field(
            default="DASHSCOPE_API_KEY", description="Environment variable holding the DashScope key."
        )
        context_window: int = Field(
            default=32000, gt=0, description="The model's context window in tokens (LlamaIndex metadata)."
        )
        native_sdk: bool = Field(
            default=False,
            description='Use the DashScope SDK (llama-index-llms-dashscope); needs `pip install "memoryscope[dashscope]"`.',
        )

    def __init__(self, params: Params) -> None:
        self._native = params.native_sdk
        if not self._native:
            super().__init__(params)
            return
        self.params = params
        key = read_api_key(
            params.api_key_env, backend=self.backend, model=params.model_name, endpoint=_NATIVE_ENDPOINT, api_key=params.api_key
        )
        LlamaIndexGeneration.__init__(  # skips OpenAILikeGeneration's set-up: no OpenAI client here
            self,
            _native_llm(params, key),
            model_name=params.model_name,
            endpoint=_NATIVE_ENDPOINT,
            policy=params.retry_policy(),
            timeout_s=params.timeout,
            call_options=dict(params.extra_body),
            api_key=key,
        )

    @property
    def supports_tools(self) -> bool:
        return not self._native and super().supports_tools

    def _tools_unsupported(self) -> ModelError:
        if not self._native:
            return super()._tools_unsupported()
        reason = "function calling works in DashScope's OpenAI-compatible mode only: drop `native_sdk: true`"
        return ModelError(self.backend, self.model_name, self.endpoint, reason)

    def _open_async_llm(self) -> AbstractAsyncContextManager[Any]:
        if self._native:
            return LlamaIndexGeneration._open_async_llm(self)
        return super()._open_async_llm()


def _native_llm(params: DashScopeGeneration.Params, key: str | None) -> Any:
    try:
        from llama_index.llms.dashscope import DashScope  # the optional extra
    except ImportError:
        reason = f"llama-index-llms-dashscope is not installed: {_INSTALL_HINT}"
        raise ModelError("dashscope", params.model_name, _NATIVE_ENDPOINT, reason) from None
    return DashScope(model_name=params.model_name, api_key=key, temperature=params.temperature, max_tokens=params.max_tokens)
