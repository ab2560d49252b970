"""Shared plumbing for remote model calls: API keys, retries with backoff, JSON over HTTP.

Every backend that talks to a server goes through here, so all of them behave alike:

- every request has a timeout (`timeout`, seconds);
- 429, 5xx, connection errors and timeouts are retried up to `max_retries` times, waiting
  `retry_backoff_s * 2**n` (with jitter, so many clients do not retry in step), or the server's
  `Retry-After` when it sends one, but never longer than `retry_max_wait_s`. Other 4xx are not
  retried: a bad request or a bad key stays bad;
- every failure is one `ModelError` naming backend, model and endpoint, with a short reason
  (status code and a snippet of the body, or the connection error). The API key is never part
  of a message, a log line or a repr: it is read from the environment variable named by
  `api_key_env` when the model is built (or taken from an inline `api_key:`, held as a
  `SecretStr`), kept only in a private attribute, and registered with `memoryscope.scrubbing`,
  which hides it in every error reason and log record (a server may echo it in its reply).
  The `ModelError` chains no exception: the client's own error (an openai `APIStatusError`,
  a requests `ConnectionError`, ...) holds the server's whole body, key and all, and a chained
  traceback would print it; the reason already says what it said, scrubbed.

`api_base` is the API's base URL. MemoryScope 0.1.x walkthroughs often give the full endpoint
instead (`.../v1/embeddings`), and call the key `base_url`: both are read, and the backend's own
endpoint path (`endpoint_path` on its Params) is cut off, so requests never go to
`.../v1/embeddings/embeddings`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar, TypeVar

from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator

from memoryscope.errors import ModelError
from memoryscope.models.base import ModelParams
from memoryscope.scrubbing import known_keys, register_key, scrub

__all__ = [
    "RemoteParams",
    "json_client",
    "RetryPolicy",
    "AttemptFailed",
    "RemoteCaller",
    "JsonHttpClient",
    "read_api_key",
    "connection_reason",
    "decode_json_response",
    "is_retryable_status",
    "parse_retry_after",
    "snippet",
    "reported_tokens",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_SNIPPET_CHARS = 200
_ERRNO_REASON = re.compile(r"\[Errno -?\d+\][^'\")]*")


class RemoteParams(ModelParams):
    """Keys shared by every backend that calls a server."""

    # An inline key must not reach an error message through the echoed input.
    model_config = ConfigDict(hide_input_in_errors=True)

    # The path the backend appends to `api_base` (`/embeddings`, `/rerank`, ...).
    endpoint_path: ClassVar[str] = ""

    api_base: str = Field(
        ...,
        description="Base URL of the API, e.g. `https://api.siliconflow.cn/v1` (also read as `base_url`; "
        "a full endpoint URL is cut back to the base).",
    )
    api_key_env: str | None = Field(
        default=None, description="Name of the environment variable holding the API key; None sends no key."
    )
    api_key: SecretStr | None = Field(
        default=None,
        description="The API key itself (MemoryScope 0.1 style; prefer `api_key_env`). Used before `api_key_env`; never shown.",
    )
    timeout: float = Field(default=60.0, gt=0, description="Seconds to wait for one request before giving up on it.")
    max_retries: int = Field(
        default=3, ge=0, description="Retries after the first attempt, on 429/5xx/connection errors/timeouts."
    )
    retry_backoff_s: float = Field(default=0.5, ge=0, description="Wait before the first retry; doubled for each further retry.")
    retry_max_wait_s: float = Field(default=20.0, ge=0, description="Longest wait between attempts, `Retry-After` included.")

    @model_validator(mode="before")
    @classmethod
    def _read_base_url(cls, values: Any) -> Any:
        if not isinstance(values, dict) or "base_url" not in values:
            return values
        values = dict(values)
        base_url = values.pop("base_url")
        if "api_base" in values and _base(values["api_base"], cls.endpoint_path) != _base(base_url, cls.endpoint_path):
            raise ValueError(
                f"api_base ({values['api_base']!r}) and base_url ({base_url!r}) are two names for one key and differ; keep one"
            )
        values["api_base"] = base_url
        return values

    @field_validator("api_base")
    @classmethod
    def _cut_endpoint_path(cls, value: str) -> str:
        return _base(value, cls.endpoint_path)

    @field_validator("api_key", mode="before")
    @classmethod
    def _blank_key_is_none(cls, value: Any) -> Any:
        # `api_key: ""` in 0.1.x configs meant "no key here": the environment variable applies.
        return None if isinstance(value, str) and not value.strip() else value

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(self.max_retries, self.retry_backoff_s, self.retry_max_wait_s)

    def endpoint(self) -> str:
        """The URL requests go to: `api_base` and the backend's endpoint path."""
        return self.api_base + self.endpoint_path


def _base(url: Any, endpoint_path: str) -> Any:
    """`url` without trailing slashes and without `endpoint_path` at its end."""
    if not isinstance(url, str):
        return url  # the field's own type check reports it
    base = url.strip().rstrip("/")
    if endpoint_path and base.endswith(endpoint_path):
        base = base[: -len(endpoint_path)].rstrip("/")
    return base


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff_s: float = 0.5
    max_wait_s: float = 20.0
    # how the sync path waits between attempts; tests pass a recorder instead of the wall clock
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def wait_s(self, retry_number: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry `retry_number` (0-based)."""
        if retry_after_s is not None:
            return min(self.max_wait_s, max(0.0, retry_after_s))
        ceiling = min(self.max_wait_s, self.backoff_s * 2**retry_number)
        return ceiling * random.uniform(0.5, 1.0)


class AttemptFailed(Exception):
    """One attempt failed; `retryable` says whether another attempt may succeed."""

    def __init__(self, reason: str, *, retryable: bool, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.retry_after_s = retry_after_s


def is_retryable_status(status: int) -> bool:
    return status == 429 or status >= 500


def parse_retry_after(value: str | None) -> float | None:
    """`Retry-After` as seconds: a number of seconds, or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


def snippet(text: str, limit: int = _SNIPPET_CHARS) -> str:
    """`text` on one line, cut to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def connection_reason(error: BaseException) -> str:
    """The useful part of a connection error (`[Errno 111] Connection refused`), else a snippet."""
    text = str(error)
    found = _ERRNO_REASON.search(text)
    return found.group(0).strip() if found else snippet(text or type(error).__name__)


def read_api_key(
    env_name: str | None, *, backend: str, model: str, endpoint: str, api_key: SecretStr | None = None
) -> str | None:
    """The inline `api_key` when given, else the key in `os.environ[env_name]`; None when neither is named."""
    key = api_key.get_secret_value() if api_key is not None else None
    if key is None and env_name is not None:
        key = os.environ.get(env_name, "").strip()
        if not key:
            raise ModelError(
                backend,
                model,
                endpoint,
                f"environment variable {env_name} (api_key_env) is not set; export it, or change api_key_env",
            )
    register_key(key)  # every error and log record hides it from now on
    return key


_REFUSED = re.compile(r"\b(?:401|403)\b|unauthori[sz]ed|forbidden", re.IGNORECASE)


class RemoteCaller:
    """Runs attempts against one remote model under a retry policy; turns failures into ModelError."""

    def __init__(self, *, backend: str, model: str, endpoint: str, policy: RetryPolicy, api_key: str | None = None):
        self.backend = backend
        self.model = model
        self.endpoint = endpoint
        self.policy = policy
        self._api_key = api_key
        register_key(api_key)

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(backend={self.backend!r}, model={self.model!r}, endpoint={self.endpoint!r})"

    def error(self, reason: str) -> ModelError:
        """A ModelError for this model, its reason scrubbed of every known key (see `memoryscope.scrubbing`).
        A refusal (401, 403) of a call made without a key says so: the server wants one."""
        if not self._api_key and _REFUSED.search(reason):
            reason += "; no API key was sent: export the variable the model's api_key_env names"
        return ModelError(self.backend, self.model, self.endpoint, self._scrub(reason))

    def _scrub(self, text: str) -> str:
        return scrub(text, (self._api_key, *known_keys()))

    def expect(self, payload: Any, path: str, expected: type | tuple[type, ...]) -> Any:
        """`payload[a][b]` for `path` "a.b", or a ModelError saying which field was expected."""
        value = payload
        for part in path.split("."):
            if not isinstance(value, dict) or part not in value:
                raise self.error(f"malformed response: expected field {path!r}, got: {snippet(json.dumps(payload))}")
            value = value[part]
        if not isinstance(value, expected):
            names = " or ".join(t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,)))
            raise self.error(f"malformed response: expected {path!r} to be {names}, got {type(value).__name__}")
        return value

    def call(self, attempt: Callable[[], T]) -> T:
        """`attempt()`, retried while it raises a retryable AttemptFailed."""
        retry_number = 0
        while True:
            try:
                return attempt()
            except AttemptFailed as failure:
                wait = self._wait_or_error(failure, retry_number)
            if isinstance(wait, ModelError):
                raise wait  # outside the `except`: nothing chained, see the module docstring
            self.policy.sleep(wait)
            retry_number += 1

    async def acall(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Async `call`: waits with `asyncio.sleep`, so other tasks run meanwhile."""
        retry_number = 0
        while True:
            try:
                return await attempt()
            except AttemptFailed as failure:
                wait = self._wait_or_error(failure, retry_number)
            if isinstance(wait, ModelError):
                raise wait  # outside the `except`: nothing chained, see the module docstring
            await asyncio.sleep(wait)
            retry_number += 1

    def _wait_or_error(self, failure: AttemptFailed, retry_number: int) -> float | ModelError:
        """Seconds to wait before the next attempt, or the ModelError that ends the call."""
        attempts = retry_number + 1
        if not failure.retryable:
            return self.error(failure.reason)
        if retry_number >= self.policy.max_retries:
            tried = f" (gave up after {attempts} attempts)" if attempts > 1 else ""
            return self.error(failure.reason + tried)
        wait = self.policy.wait_s(retry_number, failure.retry_after_s)
        logger.warning(
            "%s model %r at %s: %s; retry %d/%d in %.2fs",
            self.backend, self.model, self.endpoint, self._scrub(failure.reason), attempts, self.policy.max_retries, wait,
        )  # fmt: skip
        return wait


def decode_json_response(status: int, body: bytes, retry_after: str | None) -> Any:
    """The JSON of a response, or AttemptFailed saying what went wrong."""
    text = body.decode("utf-8", errors="replace")
    if status >= 400:
        raise AttemptFailed(
            f"HTTP {status}: {snippet(text) or '(empty body)'}",
            retryable=is_retryable_status(status),
            retry_after_s=parse_retry_after(retry_after),
        )
    try:
        return json.loads(text)
    except ValueError:
        raise AttemptFailed(f"expected a JSON body, got: {snippet(text) or '(empty body)'}", retryable=False) from None


def reported_tokens(payload: Any) -> int | None:
    """Input tokens a reply says it used (`usage.prompt_tokens`, else `usage.total_tokens`), if any."""
    usage = payload.get("usage") if isinstance(payload, dict) else None
    if not isinstance(usage, dict):
        return None
    for name in ("prompt_tokens", "total_tokens", "input_tokens"):
        if isinstance(usage.get(name), int):
            return int(usage[name])
    return None


class JsonHttpClient(RemoteCaller):
    """POSTs JSON to one URL and returns the decoded reply; sync via requests, async via aiohttp.

    The sync side keeps one `requests.Session` (connection reuse). The async side opens an
    `aiohttp.ClientSession` per call and closes it before returning: an aiohttp session is
    bound to the event loop that made it, and a model may be used from several loops.
    """

    def __init__(
        self,
        *,
        backend: str,
        model: str,
        url: str,
        policy: RetryPolicy,
        timeout_s: float,
        api_key: str | None = None,
    ) -> None:
        import requests  # imported here: only remote backends need it

        super().__init__(backend=backend, model=model, endpoint=url, policy=policy, api_key=api_key)
        self.timeout_s = timeout_s
        self._session = requests.Session()

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def post(self, body: dict[str, Any]) -> Any:
        import requests

        def attempt() -> Any:
            try:
                response = self._session.post(self.endpoint, json=body, headers=self._headers(), timeout=self.timeout_s)
            except requests.Timeout as error:
                raise AttemptFailed(f"timed out after {self.timeout_s:g}s", retryable=True) from error
            except requests.ConnectionError as error:
                raise AttemptFailed(f"cannot connect: {connection_reason(error)}", retryable=True) from error
            except requests.RequestException as error:
                raise AttemptFailed(f"request failed: {snippet(str(error))}", retryable=False) from error
            return decode_json_response(response.status_code, response.content, response.headers.get("Retry-After"))

        return self.call(attempt)

    async def apost(self, body: dict[str, Any]) -> Any:
        import aiohttp  # imported here: only remote backends need it

        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        async with aiohttp.ClientSession(timeout=timeout) as session:

            async def attempt() -> Any:
                try:
                    async with session.post(self.endpoint, json=body, headers=self._headers()) as response:
                        content = await response.read()
                        return decode_json_response(response.status, content, response.headers.get("Retry-After"))
                except (asyncio.TimeoutError, TimeoutError) as error:  # distinct classes before Python 3.11
                    raise AttemptFailed(f"timed out after {self.timeout_s:g}s", retryable=True) from error
                except aiohttp.ClientConnectionError as error:
                    raise AttemptFailed(f"cannot connect: {connection_reason(error)}", retryable=True) from error
                except aiohttp.ClientError as error:
                    raise AttemptFailed(f"request failed: {snippet(str(error))}", retryable=False) from error

            return await self.acall(attempt)

    def close(self) -> None:
        self._session.close()


def json_client(params: RemoteParams, backend: str, endpoint: str) -> JsonHttpClient:
    """The HTTP client of one remote model: its key (`api_key`, else `api_key_env`), its retry policy and timeout."""
    key = read_api_key(params.api_key_env, backend=backend, model=params.model_name, endpoint=endpoint, api_key=params.api_key)
    return JsonHttpClient(
        backend=backend,
        model=params.model_name,
        url=endpoint,
        policy=params.retry_policy(),
        timeout_s=params.timeout,
        api_key=key,
    )
