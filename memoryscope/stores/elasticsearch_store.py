"""`elasticsearch_memory_store`: memories in one Elasticsearch 8.x index, for production.

- One index with an explicit, strict mapping (`_es_queries.index_body`), created on first use.
  Its `_meta` records the embedding model and dimension; opening it with another model fails.
- Dense search: the `knn` search option (HNSW, cosine) with the memory filter as a pre-filter,
  so only the user's memories compete for the `k` places. Scores are cosines.
- Keyword search: BM25 `match` on `keywords`, the words the SQLite store indexes too
  (`memoryscope.text.keyword_text`), inside a bool query carrying the same filter. Scores are
  BM25. An index made before that field gets it when opened (`_es_keywords`).
- Metadata filters: `nested` queries on `meta_index`, the values of `meta` (`_es_metadata`).
- Hybrid search: both requests, fused in the client by reciprocal rank fusion (no license-gated
  server-side RRF retriever).
- Writes go through `_bulk` (`index` actions, `_id` = memory_id) with the configured `refresh`
  policy on every write, so with the default `wait_for` a write is visible to the next read.

Unlike SQLite, Elasticsearch writes are not atomic across documents: when some items of a bulk
request fail, the others are written. `upsert` and `delete` then raise `BulkWriteError` (a
StoreError) listing the failed ids and reasons and the ids that were written, so the caller
knows and can retry just those. `delete_by_filter` (`_delete_by_query`) can likewise stop part
way; it raises saying how many it had deleted. `update` touches one document.

Times keep their microseconds in `_source`; `created_at`/`updated_at` are indexed to the
nanosecond, the other times to the millisecond (see `_es_queries`).

Every search, scan, count and delete-by-filter carries a `term` on `user_name` (plus the other
filter fields set); no request this store sends can match another user's memories. Only the
whole-index reads behind export, migration and re-embedding (`iter_all`, `user_counts`) span
users.

State records (`memoryscope.stores.state`: core memory blocks, agent state, checkpoints) live in
the companion index `<index_name>-state`, made on the first write of one (`_es_state`); a write
of several records is guarded record by record and put back as it was when one fails.

Re-embedding (`allow_model_change=True`, then `reembed`) copies the memories into a new index
with the new model's vectors and swaps it in behind `index_name` as an alias (`_es_reembed`).
The write paths live in `_es_writes`, search and scan in `_es_reads`. Those helper modules reach
the server through the store's `EsIndex` (`_es_index`: the client, index names, refresh policy
and request helpers), never through the store's private members.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from memoryscope.errors import StoreError
from memoryscope.history import ChangeSource, MemoryChange
from memoryscope.memory import MemoryNode
from memoryscope.models.base import EmbeddingModel
from memoryscope.stores import _es_connection as connection
from memoryscope.stores import _es_history as es_history
from memoryscope.stores import _es_keywords as keywords
from memoryscope.stores import _es_leases as es_leases
from memoryscope.stores import _es_queries as queries
from memoryscope.stores import _es_reads as reads
from memoryscope.stores import _es_state as es_state
from memoryscope.stores import _es_writes as writes
from memoryscope.stores._es_index import EsIndex
from memoryscope.stores._es_metadata import META_INDEX_FIELD
from memoryscope.stores._es_params import ElasticsearchStoreParams
from memoryscope.stores._es_writes import BulkWriteError
from memoryscope.stores.base import STORES, MemoryFilter, MemoryStore, SearchMode, validated_params
from memoryscope.stores.fusion import Fusion
from memoryscope.stores.state import StateKey, StateOwner, StateRecord

if TYPE_CHECKING:
    from memoryscope.progress import Progress

__all__ = ["ElasticsearchMemoryStore", "BulkWriteError"]

_USER_PAGE = 1000  # users per page of the composite aggregation in user_counts
_INSTALL = 'pip install "memoryscope[elasticsearch]"'


@STORES.register("elasticsearch_memory_store")
class ElasticsearchMemoryStore(MemoryStore):
    """Memories and their vectors in one Elasticsearch index; thread-safe (the client is)."""

    Params = ElasticsearchStoreParams

    def __init__(
        self,
        *,
        embedding_model: EmbeddingModel,
        hosts: Sequence[str] | str = ("http://localhost:9200",),
        index_name: str = "memoryscope_memory",
        api_key_env: str | None = None,
        username_env: str | None = None,
        password_env: str | None = None,
        verify_certs: bool = True,
        ca_certs: str | None = None,
        request_timeout: float = 10.0,
        refresh: Literal["wait_for", "true", "false"] = "wait_for",
        num_candidates: int = 100,
        hybrid_candidates: int = 100,
        hybrid_fusion: Fusion = "rrf",
        hybrid_keyword_weight: float = 1.0,
        analyzer: str = "standard",
        retrieve_mode: Literal["dense", "hybrid", "keyword"] | None = None,
        history_keep_deleted_content: bool = False,
        client: Any = None,
        allow_model_change: bool = False,
    ) -> None:
        """`client`: an `elasticsearch.Elasticsearch` to use instead of building one from `hosts`
        and the credential settings; the store then leaves closing it to the caller.

        `allow_model_change` (not a YAML key): open an index whose vectors another embedding model
        made, to `reembed` it; until then writes and searches are refused.

        Building the store sends no request, to Elasticsearch or to the embedding model (but to
        re-embed, which needs the model at once): the index is opened by the first operation, and
        a remote model's vector size learned when first needed (`dimension`)."""
        params = validated_params(
            self.Params,
            "elasticsearch_memory_store",
            hosts=[hosts] if isinstance(hosts, str) else list(hosts),
            index_name=index_name,
            api_key_env=api_key_env,
            username_env=username_env,
            password_env=password_env,
            verify_certs=verify_certs,
            ca_certs=ca_certs,
            request_timeout=request_timeout,
            refresh=refresh,
            num_candidates=num_candidates,
            history_keep_deleted_content=history_keep_deleted_content,
            hybrid_candidates=hybrid_candidates,
            hybrid_fusion=hybrid_fusion,
            hybrid_keyword_weight=hybrid_keyword_weight,
            analyzer=analyzer,
            retrieve_mode=retrieve_mode,
        )
        try:
            import elasticsearch  # imported here: an optional extra, and discovery imports this module
        except ImportError:
            raise StoreError(f"elasticsearch_memory_store needs the Elasticsearch client: {_INSTALL}") from None
        self.params = params
        self.index_name = params.index_name
        self.embedding_model = embedding_model
        # re-embedding needs the model at once; else the size is learned when first needed
        known = int(embedding_model.dimension) if allow_model_change else embedding_model.known_dimension
        self._dimension: int | None = None if known is None else int(known)
        self._owns_client = client is None
        connection.quiet_client_logs()  # each failed attempt at DEBUG: the StoreError says what failed
        client = client if client is not None else connection.build_client(elasticsearch, params)
        self.hosts = connection.safe_hosts(params.hosts) if self._owns_client else connection.client_hosts(client)
        self._index = EsIndex(
            client,
            self.index_name,
            hosts=self.hosts,
            refresh=params.refresh,
            request_timeout=params.request_timeout,
            embedding_name=embedding_model.model_name,
            dimension=lambda: self.dimension,
            known_dimension=lambda: self._dimension,
            api_error=elasticsearch.ApiError,
            transport_error=elasticsearch.TransportError,
        )
        self._index_ready = False
        self._index_lock = threading.Lock()
        self._allow_model_change = allow_model_change

    @classmethod
    def missing_packages(cls) -> list[str]:
        try:
            import elasticsearch  # noqa: F401  # imported to see that it can be: a broken install fails here too
        except ImportError as error:
            return [f"the Elasticsearch client (the `elasticsearch` package) cannot be imported ({error}): {_INSTALL}"]
        return []

    @property
    def dimension(self) -> int:
        """The embedding model's vector size. Asked of the model when first needed (a remote
        model not told its `dimensions` learns it from its first reply, or one probe call), then
        matched against the opened index's: another size is a StoreError naming both and the fix."""
        if self._dimension is None:
            learned = int(self.embedding_model.dimension)  # outside the lock: it may call the model
            with self._index_lock:
                if self._dimension is None:
                    recorded = self._index.recorded
                    if recorded is not None and not self._allow_model_change:
                        connection.check_dimension(recorded, self.embedding_model.model_name, learned, self._index.where)
                    self._dimension = learned
        return self._dimension

    @property
    def client(self) -> Any:
        """The `elasticsearch.Elasticsearch` client the store uses (for administration; same connection settings)."""
        return self._index.client

    def __repr__(self) -> str:
        return (
            f"ElasticsearchMemoryStore(hosts={self.hosts!r}, index_name={self.index_name!r}, "
            f"embedding_model={self.embedding_model.model_name!r})"
        )

    # ---- connecting ---------------------------------------------------------------------------

    def ensure_index(self) -> None:
        """Create the index if it is missing, else check it was made for this embedding model.

        Every operation calls this first (the first one to create the index also asks the
        embedding model its vector size, for the mapping); call it yourself to check the cluster
        at startup (`memoryscope doctor` does)."""
        if self._index_ready:
            return
        with self._index_lock:
            if self._index_ready:
                return
            index = self._index
            with index.calling("opening the index"):
                exists = bool(index.client.indices.exists(index=index.name))
                if not exists:
                    body = queries.index_body(
                        embedding_model=self.embedding_model.model_name, dimension=self._learned(), analyzer=self.params.analyzer
                    )
                    exists = not index.create(index.name, body=body)  # False: another process created it first
                if exists:
                    mappings = index.client.indices.get_mapping(index=index.name).body
                    index.recorded = connection.recorded_model(
                        mappings, self.embedding_model.model_name, self._dimension, self._allow_model_change, index.where
                    )
                    index.metadata_filled = META_INDEX_FIELD not in keywords.upgrade_index(index, mappings)
            self._index_ready = True

    def _learned(self) -> int:
        """`dimension`, inside `ensure_index` (which holds the lock `dimension` takes to learn it)."""
        if self._dimension is None:
            self._dimension = int(self.embedding_model.dimension)  # no index opened yet: nothing to match
        return self._dimension

    def reach(self) -> tuple[str, bool]:
        """The cluster answers (`GET /`), and whether the index exists (not created here)."""
        index = self._index
        with index.calling("reaching the cluster"):
            version = index.client.info().body.get("version", {}).get("number", "?")
        with index.calling("looking for the index"):
            exists = bool(index.client.indices.exists(index=index.name))
        found = f"Elasticsearch {version} at {', '.join(self.hosts)} answers"
        if not exists:
            return f"{found}; index {index.name!r} does not exist yet (the first write creates it)", False
        return f"{found}; index {index.name!r} exists", True

    @property
    def recorded_embedding(self) -> tuple[str, int]:
        """The model named in the index's `_meta` (the index is opened, or created, to read it)."""
        self.ensure_index()
        return self._index.recorded or self._index.embedding

    def acquire_lease(self, name: str, holder: str, ttl_s: float, *, stale: Callable[[str], bool] | None = None) -> bool:
        return es_leases.acquire(self._index, name, holder, ttl_s, stale)

    def lease_holder(self, name: str) -> tuple[str, float] | None:
        return es_leases.holder(self._index, name)

    def release_lease(self, name: str, holder: str) -> None:
        es_leases.release(self._index, name, holder)

    # ---- state records (`_es_state`: the index `<index_name>-state`) -----------------------------

    def read_state(self, keys: Sequence[StateKey]) -> list[StateRecord]:
        """One `_mget` of the current documents (realtime: every write is seen)."""
        return es_state.read(self._index, keys)

    def list_state(self, owner: StateOwner, kind: str) -> list[StateRecord]:
        return es_state.list_kind(self._index, owner, kind)

    def write_state(
        self,
        values: Mapping[StateKey, Mapping[str, Any]],
        *,
        expected: Mapping[StateKey, int] | None = None,
        versioned: bool = False,
        change: ChangeSource | None = None,
    ) -> list[StateRecord]:
        """Each record guarded by the version read; when one item fails, the records that landed are
        put back as they were (see `_es_state`)."""
        return es_state.write(self._index, values, expected, versioned, change)

    def state_versions(self, key: StateKey, *, limit: int = 1000) -> list[StateRecord]:
        return es_state.versions(self._index, key, limit)

    def delete_state(self, user_name: str, *, target_name: str | None = None, workspace: str | None = None) -> int:
        """`_delete_by_query`, refreshed unless `refresh` is "false"."""
        return es_state.delete(self._index, user_name, target_name, workspace)

    def iter_state(self, *, user_name: str | None = None, batch_size: int = 500) -> Iterator[list[StateRecord]]:
        """Pages sorted by record and version with `search_after` (no point-in-time snapshot)."""
        return es_state.iterate(self._index, user_name, batch_size)

    def import_state(self, records: Sequence[StateRecord]) -> int:
        return es_state.import_records(self._index, records)

    def close(self) -> None:
        """Close the client the store built (an injected client is left to its owner)."""
        if self._owns_client:
            self._index.client.close()

    def __enter__(self) -> ElasticsearchMemoryStore:
        return self

    # ---- writing ------------------------------------------------------------------------------

    def upsert(
        self,
        nodes: Sequence[MemoryNode],
        vectors: np.ndarray | None = None,
        *,
        requires: Mapping[str, Collection[str]] | None = None,
        change: ChangeSource | None = None,
        expected: Mapping[str, datetime | None] | None = None,
    ) -> list[str]:
        """Index the nodes (create or replace). Not atomic: see `BulkWriteError`; `requires` and
        `expected`: see `MemoryStore.upsert` and `_es_writes.upsert`."""
        return writes.upsert(self, self._index, nodes, vectors, requires, change, expected)

    def update(self, memory_id: str, *, change: ChangeSource | None = None, **changes: Any) -> MemoryNode:
        """Change fields of one node; `updated_at` becomes now unless given.

        Only the changed fields are sent (the `update` API with `doc`), guarded by the version
        read, so a concurrent change makes this fail instead of being overwritten. A change to
        `meta` rewrites the whole document instead: `update` merges objects key by key and could
        not drop a key.
        """
        return writes.update(self, self._index, memory_id, changes, change)

    def delete(self, memory_ids: Sequence[str], *, change: ChangeSource | None = None) -> int:
        return writes.delete(self, self._index, memory_ids, change)

    def record_history(self, changes: Sequence[MemoryChange]) -> None:
        es_history.record(self._index, changes)

    def history(
        self,
        *,
        memory_id: str | None = None,
        user_name: str | None = None,
        run_id: str | None = None,
        limit: int = 1000,
        newest_first: bool = False,
    ) -> list[MemoryChange]:
        return es_history.query(
            self._index, memory_id=memory_id, user_name=user_name, run_id=run_id, limit=limit, newest_first=newest_first
        )

    def delete_by_filter(self, memory_filter: MemoryFilter, *, change: ChangeSource | None = None) -> int:
        """`_delete_by_query`, refreshed unless `refresh` is "false" (it takes no `wait_for`).

        It deletes what a search would find at the time, so writes made with refresh "false"
        and not yet refreshed may survive it."""
        return writes.delete_by_filter(self, self._index, memory_filter, change)

    # ---- reading ------------------------------------------------------------------------------

    def get(self, memory_ids: Sequence[str]) -> list[MemoryNode]:
        ids = list(memory_ids)
        if not ids:
            return []
        self.ensure_index()
        docs = self._index.mget(list(dict.fromkeys(ids)), "get", source_excludes=queries.SOURCE_SHOWN["excludes"])
        found = {node.memory_id: node for node, _ in reads.decoded([doc for doc in docs if doc.get("found")])}
        return [found[memory_id] for memory_id in ids if memory_id in found]

    def scan(
        self, memory_filter: MemoryFilter, *, limit: int = 100, offset: int = 0, newest_first: bool = True
    ) -> list[MemoryNode]:
        """A page by `from`/`size` while `offset + limit` stays within 10,000 (the default
        `index.max_result_window`); deeper pages walk there with `search_after`, page by page
        (not a point-in-time snapshot: writes meanwhile may shift them)."""
        return reads.scan(self, self._index, memory_filter, limit, offset, newest_first)

    def count(self, memory_filter: MemoryFilter) -> int:
        return reads.count(self, self._index, memory_filter)

    # ---- the whole index ----------------------------------------------------------------------

    def iter_all(
        self, batch_size: int = 500, *, user_name: str | None = None, after_id: str | None = None
    ) -> Iterator[list[MemoryNode]]:
        """Pages sorted by `memory_id` with `search_after` (no point-in-time snapshot)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 0 < batch_size <= queries.MAX_RESULT_WINDOW:
            raise StoreError(f"iter_all: batch_size must be an integer from 1 to {queries.MAX_RESULT_WINDOW}, got {batch_size!r}")
        self.ensure_index()
        after = after_id
        while True:
            body = queries.iter_body(size=batch_size, user_name=user_name, after_id=after)
            hits = self._index.search(body, "reading all memories")
            if hits:
                yield [node for node, _ in reads.decoded(hits)]
            if len(hits) < batch_size:
                return
            after = hits[-1]["_source"]["memory_id"]

    def user_counts(self) -> dict[str, int]:
        """A `composite` aggregation on `user_name`, page by page (any number of users).

        With `refresh: "false"` the index is refreshed first, so the counts include every write."""
        self.ensure_index()
        if self.params.refresh == "false":
            with self._index.calling("refreshing the index"):
                self._index.client.indices.refresh(index=self.index_name)
        counts: dict[str, int] = {}
        after: str | None = None
        page = _USER_PAGE
        while True:
            body = queries.user_counts_body(size=page, after_user=after)
            with self._index.calling("counting memories per user"):
                response = self._index.client.search(index=self.index_name, body=body)
            buckets = response["aggregations"]["users"]["buckets"]
            counts.update((str(bucket["key"]["user_name"]), int(bucket["doc_count"])) for bucket in buckets)
            if len(buckets) < page:
                return counts
            after = str(buckets[-1]["key"]["user_name"])

    def get_vectors(self, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
        return reads.stored_vectors(self, self._index, memory_ids)

    def reembed(self, *, batch_size: int = 256, progress: Progress | None = None) -> int:
        """Copy every memory, with new vectors, into a new index `<index_name>-reembed-<UTC time>`,
        then in one atomic `_aliases` call delete the old index and make `index_name` an alias of
        the new one (see `_es_reembed`). `index_name` in the config stays as it is."""
        from memoryscope.progress import Progress
        from memoryscope.stores._es_reembed import reembed_index

        count = reembed_index(self, self._index, batch_size, progress or Progress())
        with self._index_lock:
            self._index_ready = False  # the next call reads the new index's _meta
            self._index.recorded = None
        return count

    def fill_keywords(self, *, batch_size: int = 500, progress: Progress | None = None) -> int:
        """Give memories written before the `keywords` field (or with an older `keyword_text`) the
        current one, in place; how many were set. `memoryscope reembed` runs it (`_es_keywords`)."""
        return keywords.fill_keywords(self, self._index, batch_size, progress)

    def search(
        self,
        memory_filter: MemoryFilter,
        *,
        query: str | None = None,
        vector: np.ndarray | None = None,
        mode: SearchMode | str | None = None,
        top_k: int = 10,
    ) -> list[MemoryNode]:
        """Dense scores are cosines, keyword scores BM25 (higher is better), hybrid scores fused (`hybrid_fusion`).

        `mode` None: the `retrieve_mode` setting, else hybrid. Hybrid without a query (only
        `vector`) is dense ranking with fused scores.
        """
        return reads.search(self, self._index, memory_filter, query, vector, mode, top_k)
