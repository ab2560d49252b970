"""The `server:` section: how `memoryscope serve` listens, whom it lets in, and its limits.

    server:
      host: 127.0.0.1
      port: 8000
      api_keys_file: keys.yaml      # relative to the config file; see memoryscope.server.access
      rate_limit_per_minute: 600    # per API key; 0: no limit
      cors_origins: []              # e.g. ["https://app.example.com"]; empty: CORS off
      allowed_hosts: []             # Host names besides localhost and IP addresses (behind a proxy: its name)
      allowed_origins: []           # web pages (origins) besides the server's own that may change anything

Every key is optional; a config without the section serves on loopback with no keys.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field, field_validator

from memoryscope.config.bounds import BoundedParams

__all__ = ["ServerSettings"]


class ServerSettings(BoundedParams):
    """The `server:` section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(default="127.0.0.1", description="Address to listen on; `--host` overrides it.")
    port: int = Field(default=8000, ge=0, le=65535, description="Port to listen on (0: any free port); `--port` overrides it.")
    api_keys_file: str | None = Field(
        default=None,
        description="YAML file of API keys and their scopes (relative to the config file). Without it no key "
        "is asked for, and the server binds only to loopback unless started with --insecure.",
    )
    service: str | None = Field(default=None, description="The memory_service served (default: the first).")
    chat: str | None = Field(default=None, description="The memory_chat behind /v1/chat/completions (default: the first).")
    model_id: str = Field(default="memoryscope", description="The model id /v1/models lists and chat replies name.")
    max_body_bytes: int = Field(default=1_000_000, gt=0, le=1_000_000_000, description="Larger request bodies get 413.")
    max_messages_per_request: int = Field(default=200, gt=0, le=100_000, description="Messages one request may store.")
    max_query_chars: int = Field(default=4000, gt=0, le=1_000_000, description="Longest query or chat message accepted.")
    max_top_k: int = Field(default=100, gt=0, le=10_000, description="The most memories one search may ask for.")
    rate_limit_per_minute: int = Field(
        default=600, ge=0, le=10_000_000, description="Requests per API key a minute; 0: no limit."
    )
    playground: bool = Field(default=True, description="Serve the web playground at `/` (the API stays at /v1).")
    cors_origins: tuple[str, ...] = Field(default=(), description="Origins allowed by CORS; empty: CORS off. `*` allows any.")
    allowed_hosts: tuple[str, ...] = Field(
        default=(),
        description="Host names the server answers for besides localhost, *.localhost, IP addresses and the name it "
        "is bound to (DNS rebinding defence); `*`: any, for a deployment whose proxy checks the host.",
    )
    allowed_origins: tuple[str, ...] = Field(
        default=(),
        description="Origins (scheme://host:port) of web pages allowed to change anything here besides the server's "
        "own (the playground); `cors_origins` are allowed too. `*`: any.",
    )
    keep_alive_s: float = Field(
        default=65.0,
        gt=0,
        le=3600,
        description="How long an idle connection is kept open; longer than clients keep theirs "
        "(httpx and the OpenAI SDK: 5 s), so a client never reuses a connection the server is closing.",
    )
    shutdown_timeout_s: float = Field(
        default=10.0,
        ge=0,
        le=3600,
        description="On shutdown, how long background operations may finish before they are abandoned.",
    )

    @field_validator("host")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name an address, e.g. 127.0.0.1 or 0.0.0.0")
        return value.strip()
