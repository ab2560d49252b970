"""The YAML keys of `elasticsearch_memory_store` (under `memory_store:`, besides `class`)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import ConfigDict, Field, field_validator

from memoryscope.stores._es_queries import MAX_NUM_CANDIDATES
from memoryscope.stores.fusion import HybridFusionSettings

__all__ = ["ElasticsearchStoreParams"]

_INDEX_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class ElasticsearchStoreParams(HybridFusionSettings):
    """The YAML keys under `memory_store:` (besides `class`). Secrets are read from the environment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hosts: list[str] = Field(default=["http://localhost:9200"], min_length=1, description="Elasticsearch node URLs.")
    index_name: str = Field(default="memoryscope_memory", description="The index (lowercase; created on first use).")
    api_key_env: str | None = Field(default=None, description="Environment variable holding an API key (the encoded form).")
    username_env: str | None = Field(default=None, description="Environment variable holding the basic-auth user name.")
    password_env: str | None = Field(default=None, description="Environment variable holding the basic-auth password.")
    verify_certs: bool = Field(default=True, description="Verify the server's TLS certificate (https hosts).")
    ca_certs: str | None = Field(default=None, description="CA bundle to verify the server's certificate with (https hosts).")
    request_timeout: float = Field(default=10.0, gt=0, description="Seconds one request may take before it fails.")
    refresh: Literal["wait_for", "true", "false"] = Field(
        default="wait_for", description="Refresh policy of every write: `wait_for` makes it visible to the next read."
    )
    num_candidates: int = Field(
        default=100, gt=0, le=MAX_NUM_CANDIDATES, description="kNN candidates per shard (at least top_k)."
    )
    hybrid_candidates: int = Field(
        default=100, gt=0, description="Depth of the dense and keyword lists fused by hybrid search (at least top_k)."
    )
    analyzer: str = Field(
        default="standard", description="Analyzer of the `content`, `value`, `key.text` fields (not of keyword search)."
    )
    embedding_model: str = Field(
        default="embedding_model", description="Key under `model:` of the embedding model that makes the vectors."
    )
    retrieve_mode: Literal["dense", "hybrid", "keyword"] | None = Field(
        default=None, description="Search mode when a caller does not name one (MemoryScope 0.1 key); default hybrid."
    )
    history_keep_deleted_content: bool = Field(
        default=False,
        description="Keep what a deleted memory said in its history (index `<index_name>-history`); by default "
        "deletion means deletion: the history keeps that it was deleted, when and by what.",
    )

    @field_validator("index_name")
    @classmethod
    def _index_name(cls, name: str) -> str:
        if not _INDEX_NAME.match(name):
            raise ValueError("must be lowercase letters, digits, '.', '_' or '-', starting with a letter or digit")
        return name
