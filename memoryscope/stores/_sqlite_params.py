"""The YAML keys of `sqlite_memory_store` (under `memory_store:`, besides `class`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import ConfigDict, Field, field_validator

from memoryscope.stores.fusion import HybridFusionSettings

__all__ = ["SqliteStoreParams"]


class SqliteStoreParams(HybridFusionSettings):
    """The YAML keys under `memory_store:` (besides `class`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path = Field(
        default=Path("~/.memoryscope/default.db"),
        validate_default=True,  # so the default's `~` is expanded too
        description="The SQLite file (`~` expanded); created with its folder.",
    )
    embedding_model: str = Field(
        default="embedding_model", description="Key under `model:` of the embedding model that makes the vectors."
    )
    busy_timeout_s: float = Field(
        default=30.0, gt=0, description="How long a write waits for another writer (thread or process) before failing."
    )
    cache_max_users: int = Field(
        default=32, gt=0, description="How many users' vector matrices stay in memory (least recently searched go first)."
    )
    hybrid_candidates: int = Field(
        default=100, gt=0, description="How deep the dense and the keyword lists go before rank fusion (at least top_k)."
    )
    history_keep_deleted_content: bool = Field(
        default=False,
        description="Keep what a deleted memory said in its history; by default deletion means deletion: the "
        "history keeps that it was deleted, when and by what.",
    )
    keyword_in_memory_from: int = Field(
        default=200,
        gt=0,
        description="Users with at least this many memories get their keyword search ranked from posting lists "
        "in memory (the same BM25 scores as SQLite's FTS5, several times faster). From ~200 memories on the lists "
        "are never slower (0.2 MB and a few ms to build; 1,000 memories: 0.08 against 0.15 ms; a LoCoMo question "
        "on a ~600-memory user: ~1 ms less per retrieve, benchmarks README §2g).",
    )
    node_cache_size: int = Field(
        default=20_000,
        ge=0,
        description="Decoded memories kept in memory between searches (0: none); each is checked against the "
        "change log, so writes by any process are seen.",
    )
    matrix_snapshot_from: int = Field(
        default=1_000,
        gt=0,
        description="Users with at least this many memories get a packed copy of their vector matrix saved beside "
        "the file (`<path>-snapshots/`), so a new process loads it in one read instead of row by row (at 1,000 "
        "memories ~1 ms instead of ~10 ms, several warm retrieves' time). It is saved "
        "after a user's matrix is loaded row by row, and on closing a store that changed more of a user's "
        "memories than a snapshot may lag behind (an import). Deleting any of a user's memories drops their "
        "snapshot (the next load saves a new one).",
    )
    ann_min_memories: int = Field(
        default=50_000,
        ge=0,
        description="Users with at least this many memories get an approximate vector index (HNSW, `usearch`) "
        "beside their matrix: dense search asks it for candidates, applies the filter to them exactly and scores "
        "them exactly (recall of the top 50 ≥ 0.99), instead of reading every vector. Built on the "
        "user's first search (on a background thread, exact search meanwhile; ~30 s per 100k memories on one "
        "core), saved beside the file for the next process, kept current by every write. "
        "0: never (always exact); 1: every user (for benchmarks and tests).",
    )
    change_log_retain: int = Field(
        default=50_000,
        gt=0,
        description="Recent changes kept so in-memory matrices catch up row by row; older ones force a reload.",
    )

    @field_validator("path", mode="after")
    @classmethod
    def _expand_home(cls, path: Path) -> Path:
        return path.expanduser()
