"""The memory store protocol: what every backend (SQLite, Elasticsearch, ...) must do.

Stores own the vectors: `upsert` embeds passages with the store's embedding model (unless the
caller passes vectors), and a search embeds the query (unless given `vector`). A store records
which embedding model made its vectors and refuses to open with another one (unless opened with
`allow_model_change=True`, only to `reembed` them). Every search and scan is scoped by a
`MemoryFilter` whose `user_name` is required: no call can see across users. Only the maintenance
reads `iter_all` and `user_counts` walk the whole store, for export, migration and re-embedding
(`memoryscope.transfer`). The shared behaviour suite is
`memoryscope.testing.store_contract.StoreContract`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from memoryscope.errors import StoreConflict, StoreError
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.registry import Registry
from memoryscope.stores.metadata import MetadataCondition

ParamsT = TypeVar("ParamsT", bound=BaseModel)

if TYPE_CHECKING:
    from memoryscope.history import ChangeSource, MemoryChange
    from memoryscope.models.base import EmbeddingModel
    from memoryscope.progress import Progress
    from memoryscope.stores.state import StateKey, StateOwner, StateRecord

__all__ = ["MemoryFilter", "TimeRange", "SearchMode", "MemoryStore", "STORES"]


class SearchMode(str, Enum):
    DENSE = "dense"  # cosine over vectors
    KEYWORD = "keyword"  # BM25
    HYBRID = "hybrid"  # both, fused by reciprocal rank


@dataclass(frozen=True)
class TimeRange:
    """`start <= field < end` on one of the node's time fields; either end may be open."""

    field: str = "event_time"  # event_time | message_time | created_at | updated_at
    start: datetime | None = None
    end: datetime | None = None


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a call may touch. `None` means "any" for every field but `user_name`."""

    user_name: str
    target_name: str | None = None
    workspace: str | None = None
    memory_types: tuple[MemoryType, ...] | None = None
    status: MemoryStatus | None = None
    time_range: TimeRange | None = None
    reflected: bool | None = None
    updated: bool | None = None
    memory_ids: tuple[str, ...] | None = None
    metadata: tuple[MetadataCondition, ...] = ()  # on `MemoryNode.meta`, all must hold (`stores.metadata`)


class MemoryStore(ABC):
    """A durable home for memory nodes and their vectors."""

    embedding_model: EmbeddingModel  # makes the vectors of every write and search

    def reach(self) -> tuple[str, bool]:
        """Whether the store can be used as it stands, for `memoryscope doctor`: what was found
        (one line) and whether it holds anything to check further; a StoreError saying what is
        wrong and what to do otherwise. Creates nothing."""
        return f"{type(self).__name__} opened", True

    @classmethod
    def missing_packages(cls) -> list[str]:
        """What this backend needs that is not installed, each with the command that installs
        it ([] when nothing is missing); `memoryscope check-config` and `doctor` report them."""
        return []

    @property
    def dimension(self) -> int:
        """The vector size of `embedding_model`, asked of it when an operation first needs it
        (never when the store is opened: a remote model may not be reachable yet)."""
        return int(self.embedding_model.dimension)

    @abstractmethod
    def upsert(
        self,
        nodes: Sequence[MemoryNode],
        vectors: np.ndarray | None = None,
        *,
        requires: Mapping[str, Collection[str]] | None = None,
        change: ChangeSource | None = None,
        expected: Mapping[str, datetime | None] | None = None,
    ) -> list[str]:
        """Insert or replace `nodes` atomically: all land or none do. Each change is kept in the
        history (`history()`), with `change` saying which operation and run made it.

        `expected` makes the write a compare-and-set: for each id it names, the stored memory's
        `updated_at` must be that time (None: no memory has the id yet), else `StoreConflict`
        and nothing is written (see `conflicting`).

        Vectors: the given rows, else the stored vector when the content is unchanged, else
        the embedding model's passage vector.

        `requires` maps a node's id to memory ids that must still exist when the write happens
        (what a background run loaded, and what a new memory was drawn from): a node whose
        required memories are gone, deleted while the run worked, is not written, so a user's
        delete is never undone. The check is part of the write. Returns the ids of the nodes
        left out so ([] without `requires`).
        """

    @abstractmethod
    def get(self, memory_ids: Sequence[str]) -> list[MemoryNode]:
        """The nodes with these ids that exist, in the order asked."""

    @abstractmethod
    def update(self, memory_id: str, *, change: ChangeSource | None = None, **changes: Any) -> MemoryNode:
        """Change fields of one node (re-embedding if `content` changes); StoreError if absent.
        `change` says which operation and run made it (kept in the history)."""

    @abstractmethod
    def delete(self, memory_ids: Sequence[str], *, change: ChangeSource | None = None) -> int:
        """Delete by id; returns how many existed. The history keeps that each was deleted
        (when, by what), and forgets what it said (see `memoryscope.history`)."""

    @abstractmethod
    def delete_by_filter(self, memory_filter: MemoryFilter, *, change: ChangeSource | None = None) -> int:
        """Delete every node the filter matches; returns how many. History as for `delete`."""

    @abstractmethod
    def history(
        self,
        *,
        memory_id: str | None = None,
        user_name: str | None = None,
        run_id: str | None = None,
        limit: int = 1000,
        newest_first: bool = False,
    ) -> list[MemoryChange]:
        """The changes recorded for one memory, one user or one run (any mix), oldest first (the
        first `limit`), or with `newest_first` the latest `limit`, newest first."""

    @abstractmethod
    def record_history(self, changes: Sequence[MemoryChange]) -> None:
        """Add `changes` to the history as they are (times, operations, runs): what an import
        brings from another store."""

    @abstractmethod
    def scan(
        self, memory_filter: MemoryFilter, *, limit: int = 100, offset: int = 0, newest_first: bool = True
    ) -> list[MemoryNode]:
        """A page of matching nodes ordered by `created_at` (then id, for stable paging)."""

    @abstractmethod
    def count(self, memory_filter: MemoryFilter) -> int: ...

    @abstractmethod
    def search(
        self,
        memory_filter: MemoryFilter,
        *,
        query: str | None = None,
        vector: np.ndarray | None = None,
        mode: SearchMode = SearchMode.HYBRID,
        top_k: int = 10,
    ) -> list[MemoryNode]:
        """The `top_k` best matches, best first, each with `score` set."""

    # ---- the whole store: export, migration, re-embedding ------------------------------------

    @abstractmethod
    def iter_all(
        self, batch_size: int = 500, *, user_name: str | None = None, after_id: str | None = None
    ) -> Iterator[list[MemoryNode]]:
        """Every memory of every user (or only of `user_name`), in batches ordered by `memory_id`.

        Paged by id (each page starts after the last id of the one before, or after `after_id`),
        so a deep page costs what the first does. Not a snapshot: memories written while the
        iteration runs may or may not be seen.
        """

    @abstractmethod
    def user_counts(self) -> dict[str, int]:
        """How many memories each user has (users without any are absent)."""

    @abstractmethod
    def get_vectors(self, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors (unit float32 rows) of these ids; ids without one are absent.

        In a store opened with `allow_model_change=True` before `reembed`, these are still
        the vectors of the recorded model (see `recorded_embedding`)."""

    @property
    def recorded_embedding(self) -> tuple[str, int]:
        """`(model name, dimension)` of the model that made the stored vectors. Differs from
        `embedding_model` only in a store opened with `allow_model_change=True`, until `reembed`."""
        return self.embedding_model.model_name, int(self.dimension)

    def reembed(self, *, batch_size: int = 256, progress: Progress | None = None) -> int:
        """Embed every memory again with `embedding_model`, then record that model; returns how many.

        Open the store with `allow_model_change=True` to call this after a model change (the
        store refuses writes and searches until it has run). Stop other writers first: memories
        they write meanwhile with the old model may keep old vectors.
        """
        raise StoreError(f"{type(self).__name__} cannot re-embed its memories")

    @abstractmethod
    def acquire_lease(self, name: str, holder: str, ttl_s: float, *, stale: Callable[[str], bool] | None = None) -> bool:
        """Take or renew lease `name` for `holder` until `ttl_s` seconds from now (wall clock,
        shared by every process of the store); False while another holder's lease stands,
        unless `stale(that holder)` says it is gone (`memoryscope.leases.holder_gone`): then it
        is taken over at once, in the same atomic step."""

    def lease_holder(self, name: str) -> tuple[str, float] | None:
        """Who holds lease `name` and until when (wall clock, seconds since the epoch); None when
        no one does, or the store cannot tell."""
        return None

    @abstractmethod
    def release_lease(self, name: str, holder: str) -> None:
        """Give up `holder`'s lease `name`; nothing when someone else holds it."""

    # ---- state records: beside the memories, no vectors (`memoryscope.stores.state`) ------------

    @abstractmethod
    def read_state(self, keys: Sequence[StateKey]) -> list[StateRecord]:
        """The latest version of each record of `keys` that exists, in the order asked."""

    @abstractmethod
    def list_state(self, owner: StateOwner, kind: str) -> list[StateRecord]:
        """The latest version of every record of one owner and kind, by name."""

    @abstractmethod
    def write_state(
        self,
        values: Mapping[StateKey, Mapping[str, Any]],
        *,
        expected: Mapping[StateKey, int] | None = None,
        versioned: bool = False,
        change: ChangeSource | None = None,
    ) -> list[StateRecord]:
        """Write each value as the next version of its record; all land or none do. Returns the
        records written, in the order given.

        `expected` makes the write a compare-and-set: each key it names must be at that version
        (0: no such record yet), else `StoreConflict` and nothing is written. `versioned` keeps
        the versions replaced (`state_versions`); otherwise only the latest is kept. A value that
        is not a JSON object (finite numbers, text keys) is a StoreError, and nothing is written."""

    @abstractmethod
    def state_versions(self, key: StateKey, *, limit: int = 1000) -> list[StateRecord]:
        """The kept versions of one record, oldest first (the last `limit`); [] when there is none."""

    @abstractmethod
    def delete_state(self, user_name: str, *, target_name: str | None = None, workspace: str | None = None) -> int:
        """Delete every state record of a user (of one target and workspace when given), every
        version; returns how many records (not versions) there were."""

    @abstractmethod
    def iter_state(self, *, user_name: str | None = None, batch_size: int = 500) -> Iterator[list[StateRecord]]:
        """Every kept version of every state record (of one user when given), in batches, each
        record's versions oldest first: what an export writes."""

    @abstractmethod
    def import_state(self, records: Sequence[StateRecord]) -> int:
        """Keep `records` as they are (versions, times, sources), replacing versions with the same
        number: what an import brings from another store. A record's latest version is the highest
        kept. Returns how many versions were written."""

    def close(self) -> None:
        """Release connections and caches."""

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def check(self, *, full: bool = True) -> dict[str, list[str]]:
        """Every problem found in the stored memories, by what was checked (empty lists: none),
        for `memoryscope doctor`. This one reads each user's memories and compares them with the
        count: reads leave a memory that does not decode out (with a warning), or fail naming it.
        Backends add their own checks (SQLite: the file, the vectors, the keyword index)."""
        problems = []
        for user_name, counted in sorted(self.user_counts().items()):
            try:
                read = sum(len(batch) for batch in self.iter_all(user_name=user_name))
            except StoreError as error:
                problems.append(f"user {user_name!r}: {error}")
                continue
            if read != counted:
                problems.append(
                    f"user {user_name!r}: {counted} memories, {counted - read} of which do not decode (see the warnings)"
                )
        return {"memories": problems}


STORES: Registry[type[MemoryStore]] = Registry("memory store", MemoryStore, ("memoryscope.stores",))


def conflicting(expected: Mapping[str, datetime | None], stored: Mapping[str, MemoryNode]) -> list[str]:
    """The ids whose stored memory is not as `expected` says (its `updated_at`, or absent for None)."""
    wrong = []
    for memory_id, updated_at in expected.items():
        node = stored.get(memory_id)
        if (None if node is None else node.updated_at) != updated_at:
            wrong.append(memory_id)
    return wrong


def conflict_error(memory_ids: Sequence[str], where: str) -> StoreConflict:
    shown = ", ".join(memory_ids[:5]) + (" ..." if len(memory_ids) > 5 else "")
    message = f"{where}: memories {shown} changed since they were read; nothing was written, read them again"
    return StoreConflict(message, memory_ids)


def unmet_requirements(requires: Mapping[str, Collection[str]], present: Collection[str]) -> set[str]:
    """The node ids of `requires` some of whose required memories are not `present`."""
    return {node_id for node_id, needed in requires.items() if any(memory_id not in present for memory_id in needed)}


def required_ids(requires: Mapping[str, Collection[str]]) -> list[str]:
    """Every memory id `requires` names, once."""
    return list(dict.fromkeys(memory_id for needed in requires.values() for memory_id in needed))


def unit_rows(vectors: Any, count: int, dimension: int, model_name: str, what: str) -> np.ndarray:
    """`vectors` as a (count, dimension) float32 matrix of unit rows (zero rows stay zero).

    Every store checks vectors it is given or gets from its model the same way; `what` and
    `model_name` make the error say which vectors were wrong and what was expected.
    """
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim == 1 and count == 1:
        matrix = matrix.reshape(1, -1)
    if matrix.shape != (count, dimension):
        raise StoreError(
            f"{what}: expected shape ({count}, {dimension}) for {count} memories and embedding model "
            f"{model_name!r}, got {matrix.shape}"
        )
    if not np.isfinite(matrix).all():
        raise StoreError(f"{what}: vectors contain NaN or infinite values")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def validated_params(params_model: type[ParamsT], store_name: str, **values: Any) -> ParamsT:
    """A store's constructor arguments checked by its `Params` model; a bad one is one `StoreError` line."""
    try:
        return params_model(**values)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise StoreError(f"{store_name}: {problems}") from None
