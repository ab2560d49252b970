"""`POST /v1/chat/completions` and `GET /v1/models`: an OpenAI-compatible chat with long-term memory.

Any OpenAI SDK app gets memory by changing its `base_url`:

    client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key=KEY)
    reply = client.chat.completions.create(model="memoryscope", user="ann",
                                           messages=[{"role": "user", "content": "what do I play?"}])

The request's `user` (or the `X-MemoryScope-User` header; or the one user a key is scoped to)
names whose memories; the last user message is the query; earlier messages are the history and
system messages replace the persona. Memories are retrieved and put into the prompt, the
configured generation model answers, and the turn (message and reply) is stored, so
consolidation follows by its triggers. The memories used come back in the extension field
`memoryscope` (`memories`, `memory_ids`, `timings`, and `usage`: MemoryScope's own embedding and
ranking calls for the reply; under an agent chat, `steps`, `notices`, `context_window`), never
inside the message. `usage` is what the model reported for the prompt it was sent (memories,
tool schemas and calls included), counted here with cl100k only when it reports none. The
request's sampling options (`PASSED_TO_MODEL`) go with the reply's call, over the chat's
`generation_model_kwargs`.

Function calling: `tools` go to the model as given, with `tool_choice` and `parallel_tool_calls`;
the model's calls come back as OpenAI returns them (`message.tool_calls`, `finish_reason:
"tool_calls"`; streamed, `delta.tool_calls` pieces). The caller runs them and sends the
assistant message with its `tool_calls` and one `tool` message per call after the user's
message: they reach the model as they are, after the memories are retrieved again for that
user message. A reply with calls stores nothing; the user's message and the text that ends the
exchange are stored as the turn (no call or result is). A request with neither tools nor tool
results sends only the text of earlier turns (their calls and results are left out). What the
endpoint cannot honour (`n` > 1, a `tool_choice` without tools, tools for a chat or model that
cannot call functions, log probabilities, audio, any other field) is a 400
`unsupported_parameter` naming it.
"""

from __future__ import annotations

import inspect
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from memoryscope.errors import MemoryScopeError
from memoryscope.models.base import CallTally, ToolCall, ToolCallDelta, tally_calls
from memoryscope.models.token_count import count_tokens
from memoryscope.server.errors import ApiError, error_body, for_caller, library_error
from memoryscope.server.state import CallerDep, ServerState, state_of

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["chat (OpenAI-compatible)"])
USER_HEADER = "x-memoryscope-user"
WORKSPACE_HEADER = "x-memoryscope-workspace"


class FunctionCallIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1, max_length=256)
    arguments: str = Field(default="", description="The call's arguments as the model wrote them (JSON text).")


class ToolCallIn(BaseModel):
    """One call of an assistant message sent back: as the reply that made it gave it."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1, max_length=256)
    type: Literal["function"] = "function"
    function: FunctionCallIn

    def wire(self) -> dict[str, Any]:
        function = {"name": self.function.name, "arguments": self.function.arguments}
        return {"id": self.id, "type": self.type, "function": function}


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="allow")  # OpenAI clients send fields (name, refusal) this chat does not use

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[ToolCallIn] | None = Field(default=None, description="An assistant message's calls.")
    tool_call_id: str | None = Field(default=None, min_length=1, description="The call a tool message answers.")

    @model_validator(mode="after")
    def _calls_where_they_belong(self) -> ChatMessageIn:
        if self.role == "tool" and self.tool_call_id is None:
            raise ValueError("a tool message needs the `tool_call_id` of the call it answers")
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"tool_calls: only an assistant message carries calls, not a {self.role} message")
        return self

    def text(self) -> str:
        if isinstance(self.content, list):  # content parts: keep the text ones
            return "".join(str(part.get("text", "")) for part in self.content if part.get("type") == "text")
        return self.content or ""

    def wire(self) -> dict[str, Any]:
        """This message as the model gets it: its text, and its calls or the call it answers."""
        message: dict[str, Any] = {"role": self.role, "content": self.text()}
        if self.tool_calls:
            message.update(content=self.text() or None, tool_calls=[call.wire() for call in self.tool_calls])
        if self.role == "tool":
            message["tool_call_id"] = self.tool_call_id
        return message


class ToolIn(BaseModel):
    """A function the caller offers the model (OpenAI's tool schema); sent to the model as given."""

    model_config = ConfigDict(extra="allow")

    type: Literal["function"]
    function: dict[str, Any]

    @model_validator(mode="after")
    def _named(self) -> ToolIn:
        name = self.function.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError('a tool is {"type": "function", "function": {"name", "parameters"}}; this one has no name')
        return self


# OpenAI's request fields that go to the model with this reply's call, as given
PASSED_TO_MODEL = (
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed",
    "presence_penalty", "frequency_penalty", "response_format", "logit_bias",
)  # fmt: skip
# ... and those that go with it when tools are offered
PASSED_WITH_TOOLS = ("tool_choice", "parallel_tool_calls")
# fields that change nothing an answer says: accepted and left alone
_HARMLESS = frozenset({"metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier"})


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # checked by `model_options`: a field no call can honour is a 400

    model: str = Field(min_length=1)
    messages: list[ChatMessageIn] = Field(min_length=1)
    stream: bool = False
    user: str | None = Field(default=None, max_length=256, description="Whose memories (else the X-MemoryScope-User header).")
    stream_options: dict[str, Any] | None = None
    n: int = Field(default=1, ge=1, description="How many replies; this server gives one (n > 1 is refused).")
    tools: list[ToolIn] | None = Field(default=None, description="Functions the model may call; the caller runs them.")
    tool_choice: str | dict[str, Any] | None = Field(default=None, description="OpenAI's: none, auto, required, or a function.")
    parallel_tool_calls: bool | None = None

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [tool.model_dump(exclude_unset=True) for tool in self.tools or ()]

    def model_options(self) -> dict[str, Any]:
        """The fields that go to the model with this reply (`PASSED_TO_MODEL`, and with tools
        `PASSED_WITH_TOOLS`); 400 naming any other field the model would have to honour
        (several replies, log probabilities, audio, a `tool_choice` with no tools)."""
        extra = dict(self.model_extra or {})
        if self.n != 1:
            raise ApiError(400, "unsupported_parameter", f"n={self.n}: this server gives one reply per request; send n=1")
        if not self.tools and self.tool_choice not in (None, "none"):
            refusal = "tool_choice: no tools are offered; send `tools` with it, or leave it out"
            raise ApiError(400, "unsupported_parameter", refusal)
        options = {name: extra.pop(name) for name in PASSED_TO_MODEL if extra.get(name) is not None}
        for name in PASSED_TO_MODEL:
            extra.pop(name, None)
        if self.tools:
            options.update({name: getattr(self, name) for name in PASSED_WITH_TOOLS if getattr(self, name) is not None})
        unsupported = sorted(name for name in extra if name not in _HARMLESS)
        if unsupported:
            raise ApiError(
                400,
                "unsupported_parameter",
                f"{', '.join(unsupported)}: not supported by this server's chat endpoint; leave them out "
                f"(passed to the model: {', '.join(PASSED_TO_MODEL + PASSED_WITH_TOOLS)}, tools)",
            )
        return options


@router.get("/models", summary="The model this server answers as")
def models(request: Request, who: CallerDep) -> dict[str, Any]:
    model_id = state_of(request).settings.model_id
    return {"object": "list", "data": [{"id": model_id, "object": "model", "created": 0, "owned_by": "memoryscope"}]}


@router.post("/chat/completions", summary="Chat with memory (OpenAI-compatible)", response_model=None)
async def chat_completions(body: ChatCompletionRequest, request: Request, who: CallerDep) -> Any:
    state = state_of(request)
    workspace = request.headers.get(WORKSPACE_HEADER, "").strip()
    # the one rule of the HTTP faces (no default user here: an OpenAI SDK app names its user)
    user = who.for_user(state, body.user or request.headers.get(USER_HEADER), workspace).user_id
    if workspace:
        raise ApiError(
            422, "unsupported", "the chat endpoint keeps memories without a workspace; leave X-MemoryScope-Workspace out"
        )
    query, history, exchange, system = _split(body, state)
    chat = _chat(state).for_user(user)
    given: dict[str, Any] = {"model_options": options} if (options := body.model_options()) else {}
    if given and "model_options" not in inspect.signature(chat.achat_with_memory).parameters:
        refusal = f"{', '.join(options)}: this server's chat ({type(chat).__name__}) sets its own model options"
        raise ApiError(400, "unsupported_parameter", refusal)
    if body.tools or exchange:
        if not getattr(chat, "supports_tools", False):
            refusal = (
                f"tools: this server's chat ({type(chat).__name__}) or its generation model does not call the caller's "
                "functions (an openai_like model with function_calling on does); leave tools and tool messages out"
            )
            raise ApiError(400, "unsupported_parameter", refusal)
        given.update(tools=body.tool_schemas(), tool_exchange=exchange)
    with tally_calls() as tally:
        try:
            answer = await chat.achat_with_memory(query, system_prompt=system, history=history, stream=body.stream, **given)
        except MemoryScopeError as error:
            raise library_error(error) from error
    completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    prompt_tokens = sum(count_tokens(message.text()) for message in body.messages)
    if not body.stream:
        meta = answer.meta_data
        reply = answer.message.content
        calls = [_wire_call(call) for call in answer.tool_calls]
        usage = _reported_usage(tally, reply) or _usage(_sent_tokens(meta, prompt_tokens), count_tokens(_written(reply, calls)))
        message: dict[str, Any] = {"role": "assistant", "content": reply}
        if calls:  # as OpenAI answers calls: no content unless the model also wrote some
            message.update(content=reply or None, tool_calls=calls)
        return {
            "id": completion_id, "object": "chat.completion", "created": int(time.time()), "model": state.settings.model_id,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": usage,
            "memoryscope": {**_extension(user, meta), "usage": _own_costs(tally)},
        }  # fmt: skip
    try:
        # the first piece before the 200 goes out: a model that fails at once is an HTTP error, as
        # OpenAI answers it (and proxies and SDK retries see the status); later failures are events
        opening = await anext(answer, None)
    except MemoryScopeError as error:
        raise library_error(error) from error
    include_usage = bool((body.stream_options or {}).get("include_usage"))
    events = _sse(opening, answer, completion_id, state.settings.model_id, user, prompt_tokens, include_usage, request)
    return StreamingResponse(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _split(body: ChatCompletionRequest, state: ServerState) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]], str | None]:
    """(query, history before it, the tool exchange after it, system prompt): the query is the
    last user message; only the model's calls and their results (`tool` messages) may follow it."""
    users = [position for position, message in enumerate(body.messages) if message.role == "user"]
    last = users[-1] if users else len(body.messages)
    after = body.messages[last + 1 :]
    calls_only = all(message.role == "tool" or (message.role == "assistant" and message.tool_calls) for message in after)
    if not users or not body.messages[last].text().strip() or not calls_only or (after and after[-1].role != "tool"):
        raise ApiError(
            422,
            "invalid_request",
            "the last message must be the user's, with text: it is the query "
            "(or the tool messages answering the calls the model made to it)",
        )
    query = body.messages[last].text().strip()
    state.door.limits.check_text(query, "last user message")  # the limit every face keeps
    history = [message.wire() for message in body.messages[:last] if message.role not in ("system", "developer")]
    exchange = [message.wire() for message in after]
    systems = [message.text() for message in body.messages if message.role in ("system", "developer") and message.text()]
    return query, history, exchange, "\n\n".join(systems) or None


def _chat(state: ServerState) -> Any:
    if state.chat is None:
        raise ApiError(404, "no_chat", f"{state.scope.config.source} defines no memory_chat; add one to serve chat completions")
    return state.chat


def _sent_tokens(meta: dict[str, Any], asked: int) -> int:
    """The prompt tokens of what went to the model (system prompt and memories included), counted
    here; the request's own messages when the chat says nothing of it."""
    sent = meta.get("prompt_tokens")
    return sent if isinstance(sent, int) else asked + count_tokens(meta.get("memories") or "")


def _reported_usage(tally: CallTally, reply: str) -> dict[str, int] | None:
    """The usage the model reported for this reply's call (the request as sent: system prompt
    and memories included), when one call made it."""
    made = tally.of("generation")
    if made["calls"] != 1 or not made["prompt_tokens"]:
        return None
    return _usage(made["prompt_tokens"], made["completion_tokens"] or count_tokens(reply))


def _own_costs(tally: CallTally) -> dict[str, dict[str, int]]:
    """MemoryScope's own model calls for this reply (embedding the query, ranking), apart from the reply's."""
    return {role: entry for role, entry in tally.roles().items() if role != "generation"}


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _extension(user: str, meta: dict[str, Any]) -> dict[str, Any]:
    """The reply's `memoryscope` field; an agent chat's reply adds its `steps` (each an inner
    monologue and the calls made, with their results), `notices` (memory pressure, a flush) and
    `context_window` (tokens in use after the turn, the limit, the warning and flush fractions)."""
    out = {
        "user": user,
        "memories": list(meta.get("memory_lines") or []),
        "memory_ids": list(meta.get("memory_ids") or []),
        "timings": dict(meta.get("timings") or {}),
    }
    for name in ("steps", "notices"):
        if name in meta:
            out[name] = list(meta[name] or [])
    if meta.get("context_window"):
        out["context_window"] = dict(meta["context_window"])
    return out


def _wire_call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def _wire_call_delta(delta: ToolCallDelta) -> dict[str, Any]:
    """A piece of a call as OpenAI streams it: id, type and name on the call's first piece only."""
    if delta.name:
        return {"index": delta.index, "id": delta.id, "type": "function",
                "function": {"name": delta.name, "arguments": delta.arguments}}  # fmt: skip
    return {"index": delta.index, "function": {"arguments": delta.arguments}}


def _written(reply: str, calls: list[dict[str, Any]]) -> str:
    """What the model wrote, its calls included, for a token count."""
    return "\n".join([reply, *(f"{call['function']['name']} {call['function']['arguments']}" for call in calls)])


async def _sse(
    opening: Any, answer: Any, completion_id: str, model_id: str, user: str, prompt_tokens: int, include_usage: bool,
    request: Request,
) -> AsyncIterator[str]:  # fmt: skip
    """The reply as OpenAI's `chat.completion.chunk` events, from its `opening` piece (None: the
    reply was empty) and the rest of `answer`; a failure mid-stream is an error event. The
    model's calls come as `delta.tool_calls` pieces, and then `finish_reason` is "tool_calls"."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        event = {
            "id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model_id,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra,
        }  # fmt: skip
        return f"data: {json.dumps(event, ensure_ascii=False)}\n\n"

    reply, meta = "", {}
    calls: tuple[ToolCall, ...] = ()
    first = True
    piece = opening
    # the model counts the stream's usage when it ends, inside this loop (this task's context)
    with tally_calls() as tally:
        try:
            while piece is not None:
                meta, calls = piece.meta_data, piece.tool_calls
                if first:
                    yield chunk({"role": "assistant", "content": ""}, memoryscope=_extension(user, meta))
                    first = False
                if piece.delta:
                    reply += piece.delta
                    yield chunk({"content": piece.delta})
                if piece.tool_call_deltas:
                    yield chunk({"tool_calls": [_wire_call_delta(delta) for delta in piece.tool_call_deltas]})
                piece = await anext(answer, None)
        except MemoryScopeError as error:
            api_error = for_caller(request, library_error(error))
            yield f"data: {json.dumps(error_body(api_error.status, api_error.code, api_error.message))}\n\n"
            return
    if first:
        yield chunk({"role": "assistant", "content": ""}, memoryscope=_extension(user, meta))
    yield chunk({}, "tool_calls" if calls else "stop")
    if include_usage:
        written = _written(reply, [_wire_call(call) for call in calls])
        usage = _reported_usage(tally, reply) or _usage(_sent_tokens(meta, prompt_tokens), count_tokens(written))
        event = {
            "id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model_id,
            "choices": [], "usage": usage,
        }  # fmt: skip
        yield f"data: {json.dumps(event)}\n\n"
    yield "data: [DONE]\n\n"
