"""`openai_like`: any OpenAI-compatible chat API, through LlamaIndex's `OpenAILike`.

For SiliconFlow, vLLM, Ollama, llama.cpp servers, DashScope's compatible mode, and OpenAI
itself. The LLM runs with its own retries off (ours apply, see `_llama_index_chat`) and with
OpenAI clients made here, so the API key lives in the client and never in the LlamaIndex object
(whose repr would show it). Nothing downloads at run time: `OpenAILike` has no tokenizer unless
given one, and the chat endpoint needs none; usage estimates use the offline cl100k_base table.

Function calling (`chat_with_tools`) is on unless `function_calling: false`: most such servers
take OpenAI's `tools`, and one that does not answers the request with an error (or ignores the
tools), so turn it off for those and the agent that needs it refuses the model when it is built.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import lru_cache
from typing import Any, ClassVar

from pydantic import Field

from memoryscope.errors import ModelError
from memoryscope.models.base import GENERATION_BACKENDS
from memoryscope.models.generation._llama_index_chat import LlamaIndexGeneration
from memoryscope.models.http import RemoteParams, read_api_key

__all__ = ["OpenAILikeGeneration", "OpenAICompatibleParams"]

# The openai client insists on a key; servers that take none (Ollama, vLLM) ignore this one.
_NO_KEY = "no-key"


class OpenAICompatibleParams(RemoteParams):
    """Keys of every OpenAI-compatible generation backend."""

    endpoint_path: ClassVar[str] = "/chat/completions"

    model_name: str = Field(..., description="The model's name as the server knows it, e.g. `Qwen/Qwen2.5-7B-Instruct`.")
    api_base: str = Field(
        ..., description="Base URL of the API, e.g. `https://api.siliconflow.cn/v1`, `http://localhost:11434/v1`."
    )
    max_tokens: int | None = Field(default=2000, gt=0, description="Most tokens per reply; None leaves it to the server.")
    temperature: float = Field(default=0.1, ge=0, le=2, description="Sampling temperature; low keeps memory extraction steady.")
    context_window: int = Field(default=3900, gt=0, description="The model's context window in tokens (LlamaIndex metadata).")
    stream_usage: bool = Field(
        default=True,
        description="Ask for token usage in the last stream chunk (`stream_options`); turn off if the server rejects it.",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="More request-body fields the server understands, e.g. `{top_k: 20}`."
    )
    function_calling: bool = Field(
        default=True,
        description="The server takes OpenAI's `tools` (function calling, which the agent memory chat needs); "
        "false when it does not.",
    )


@GENERATION_BACKENDS.register("openai_like")
class OpenAILikeGeneration(LlamaIndexGeneration):
    """Chat with an OpenAI-compatible server; sync, async and streaming."""

    backend = "openai_like"

    class Params(OpenAICompatibleParams):
        pass

    def __init__(self, params: OpenAICompatibleParams) -> None:
        import openai  # imported here: modules are imported at discovery, clients only when built

        self.params = params
        endpoint = params.endpoint()
        key = read_api_key(
            params.api_key_env, backend=self.backend, model=params.model_name, endpoint=endpoint, api_key=params.api_key
        )
        self._api_key_for_client = key or _NO_KEY
        call_options: dict[str, Any] = {}
        if params.max_tokens is not None:  # per call, so a call's own `max_tokens=` can override it
            call_options["max_tokens"] = params.max_tokens
        if params.extra_body:
            call_options["extra_body"] = dict(params.extra_body)
        super().__init__(
            self._build_llm(sync_client=openai.OpenAI(**self._client_options())),
            model_name=params.model_name,
            endpoint=endpoint,
            policy=params.retry_policy(),
            timeout_s=params.timeout,
            call_options=call_options,
            stream_options={"stream_options": {"include_usage": True}} if params.stream_usage else {},
            api_key=key,
        )

    @property
    def supports_tools(self) -> bool:
        return self.params.function_calling

    def _tools_unsupported(self) -> ModelError:
        reason = (
            "function calling is turned off for this model (`function_calling: false`); turn it on if the server takes `tools`"
        )
        return ModelError(self.backend, self.model_name, self.endpoint, reason)

    def _build_llm(self, *, sync_client: Any = None, async_client: Any = None) -> Any:
        from llama_index.llms.openai_like import OpenAILike  # imported here: heavy

        params = self.params
        return OpenAILike(
            model=params.model_name,
            api_base=params.api_base,
            api_key=_NO_KEY,  # the real key is in the clients below
            is_chat_model=True,
            is_function_calling_model=False,
            context_window=params.context_window,
            temperature=params.temperature,
            max_tokens=None,  # sent per call instead, see __init__
            timeout=params.timeout,
            max_retries=0,
            openai_client=sync_client,
            async_openai_client=async_client,
        )

    def _client_options(self) -> dict[str, Any]:
        params = self.params
        return {"api_key": self._api_key_for_client, "base_url": params.api_base, "max_retries": 0, "timeout": params.timeout}

    def _open_async_llm(self) -> AbstractAsyncContextManager[Any]:
        return self._fresh_async_llm()

    @asynccontextmanager
    async def _fresh_async_llm(self) -> AsyncIterator[Any]:
        # An async client's connections belong to the event loop that opened them, and a model
        # may be used from several loops: one client per async call, closed when it ends. Its
        # TLS context is shared: building one loads the CA bundle (~60 ms of CPU, per call).
        import openai

        http_client = openai.DefaultAsyncHttpxClient(verify=shared_tls_context())
        async with http_client, openai.AsyncOpenAI(**self._client_options(), http_client=http_client) as client:
            yield self._build_llm(async_client=client)


@lru_cache(maxsize=1)
def shared_tls_context() -> ssl.SSLContext:
    """One TLS context for every async client: the CA bundle httpx would load (certifi's), read once."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())
