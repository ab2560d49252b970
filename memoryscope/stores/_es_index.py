"""`EsIndex`: what the helper modules of `elasticsearch_memory_store` reach Elasticsearch through.

`ElasticsearchMemoryStore` builds one and passes it to `_es_reads`, `_es_writes`, `_es_keywords`,
`_es_metadata`, `_es_history`, `_es_leases`, `_es_state` and `_es_reembed`; besides it they use
only the store's public API (`ensure_index`, `get`, `scan`, `iter_all`, `params`, `embedding_model`).

It holds the client, the index name and its companions' (`<name>-history`, `<name>-leases`,
`<name>-state`), the refresh policy of writes, the embedding model the vectors must fit, what
opening the index found (`recorded`, `metadata_filled`; the store fills them in), and the
request helpers (`search`, `count`, `mget`, `bulk`, `bulk_results` with per-id `failures`; on
the memory index unless `target` names another; `search`, `pages` and `count` answer nothing
for a missing index when told `missing_ok`). Every helper turns a client error into a one-line
StoreError naming the hosts and index, never a credential (`calling`, `where`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from memoryscope.errors import StoreError
from memoryscope.stores import _es_connection as connection
from memoryscope.stores import _es_queries as queries
from memoryscope.stores.base import unit_rows

__all__ = ["EsIndex", "index_missing", "version_guard"]


def version_guard(doc: Mapping[str, Any]) -> dict[str, Any]:
    """`if_seq_no` and `if_primary_term` of a document as read: a write carrying them fails (409)
    if the document changed since. Empty when the read did not give them."""
    if "_seq_no" not in doc:
        return {}
    return {"if_seq_no": doc["_seq_no"], "if_primary_term": doc["_primary_term"]}


def index_missing(error: Any) -> bool:
    """Whether a client error (or an `error` object of an answer's item) says the index does not exist."""
    kind = error.get("type") if isinstance(error, Mapping) else getattr(error, "error", None)
    return kind == "index_not_found_exception"


class EsIndex:
    """One store's index on one cluster; thread-safe (the client is; the state is set while opening)."""

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        hosts: Sequence[str],
        refresh: str,
        request_timeout: float,
        embedding_name: str,
        dimension: Callable[[], int],
        known_dimension: Callable[[], int | None],
        api_error: type[Exception],
        transport_error: type[Exception],
    ) -> None:
        self.client = client
        self.name = name
        self.hosts = list(hosts)
        self.refresh = refresh  # the `refresh` parameter of every write, unless one says otherwise
        self.embedding_name = embedding_name  # the model the store writes and searches with
        self._dimension = dimension  # its vector size (asks the model when first needed)
        self._known_dimension = known_dimension  # the size if known already, else None
        self.api_error = api_error  # `elasticsearch.ApiError`, for a caller that answers one status itself
        self.recorded: tuple[str, int] | None = None  # the model the opened index's _meta records
        self.metadata_filled = True  # every document has its `meta_index` objects (`_es_metadata`)
        self._transport_error = transport_error
        self._request_timeout = request_timeout
        self._companions: set[str] = set()  # companion indices known to exist

    @property
    def history_name(self) -> str:
        return f"{self.name}-history"

    @property
    def leases_name(self) -> str:
        return f"{self.name}-leases"

    @property
    def state_name(self) -> str:
        return f"{self.name}-state"

    # ---- errors ---------------------------------------------------------------------------------

    def where(self, message: str) -> str:
        """`message` prefixed with the hosts and the index."""
        return f"Elasticsearch at {', '.join(self.hosts)} (index {self.name!r}): {message}"

    @contextmanager
    def calling(self, action: str) -> Iterator[None]:
        """Client errors inside become one-line StoreErrors: "<where>: <action> failed: <reason>"."""
        try:
            yield
        except self.api_error as error:
            raise StoreError(self.where(f"{action} failed: {connection.api_reason(error)}")) from None
        except self._transport_error as error:
            reason = connection.transport_reason(error, self._request_timeout)
            raise StoreError(self.where(f"{action} failed: {reason}")) from None

    # ---- the embedding model --------------------------------------------------------------------

    @property
    def embedding(self) -> tuple[str, int]:
        """(model name, dimension) the store writes and searches with (the size asked if not known)."""
        return self.embedding_name, self._dimension()

    def unit_rows(self, vectors: Any, count: int, what: str) -> np.ndarray:
        """`count` unit rows of the index's dimension, or a StoreError naming `what` was wrong."""
        return unit_rows(vectors, count, self.embedding[1], self.embedding[0], what)

    def require_current_model(self, action: str) -> None:
        """Refuse `action` while the index holds another model's vectors (opened to re-embed them)."""
        recorded = self.recorded
        known = self._known_dimension()  # not known yet: the name was matched when opened, the size is when learned
        if recorded is not None and (recorded[0] != self.embedding_name or known not in (None, recorded[1])):
            raise StoreError(self.where(
                f"the index holds vectors made by embedding model {recorded[0]!r} (dimension {recorded[1]}) and was "
                f"opened to re-embed them with {self.embedding_name!r}: {action} waits until reembed() has run"
            ))  # fmt: skip

    # ---- requests -------------------------------------------------------------------------------

    def search(
        self, body: dict[str, Any], action: str, *, target: str | None = None, missing_ok: bool = False
    ) -> list[dict[str, Any]]:
        """The hits of `POST /<index>/_search`: the memory index, or `target` (a companion, a re-embed
        copy); none when the index does not exist and `missing_ok`."""
        with self.calling(action), self._unless_missing(missing_ok):
            return list(self.client.search(index=target or self.name, body=body)["hits"]["hits"])
        return []

    def pages(
        self,
        body_of: Callable[[int, list[Any] | None], dict[str, Any]],
        limit: int | None,
        action: str,
        *,
        target: str | None = None,
        after: list[Any] | None = None,
        missing_ok: bool = False,
    ) -> Iterator[list[dict[str, Any]]]:
        """The hits of sorted searches a page at a time, at most `limit` in all (None: every one):
        one request returns at most `max_result_window` hits, so each page's body (`body_of(size,
        search_after)`) goes on from the last hit's sort values; `after` is where the first starts."""
        taken = 0
        while limit is None or taken < limit:
            size = queries.MAX_RESULT_WINDOW if limit is None else min(limit - taken, queries.MAX_RESULT_WINDOW)
            hits = self.search(body_of(size, after), action, target=target, missing_ok=missing_ok)
            if hits:
                yield hits
            if len(hits) < size:
                return
            taken += len(hits)
            after = list(hits[-1]["sort"])

    def count(
        self, action: str, body: dict[str, Any] | None = None, *, target: str | None = None, missing_ok: bool = False
    ) -> int:
        """`POST /<index>/_count`: every document, or those `body`'s query matches (0 when the index
        does not exist and `missing_ok`)."""
        with self.calling(action), self._unless_missing(missing_ok):
            return int(self.client.count(index=target or self.name, body=body)["count"])
        return 0

    @contextmanager
    def _unless_missing(self, missing_ok: bool) -> Iterator[None]:
        """Inside `calling`: a missing index ends the block quietly when `missing_ok` (the caller
        answers "nothing there" after it)."""
        try:
            yield
        except self.api_error as error:
            if not (missing_ok and index_missing(error)):
                raise

    def mget(self, ids: Sequence[str], action: str, *, target: str | None = None, **options: Any) -> list[dict[str, Any]]:
        """The `docs` of `POST /<index>/_mget` (each with `found`), in the order of `ids`."""
        with self.calling(action):
            response = self.client.mget(index=target or self.name, ids=list(ids), **options)
        return list(response["docs"])

    def bulk(
        self, operations: list[dict[str, Any]], action: str, *, target: str | None = None, refresh: str | None = None
    ) -> list[dict[str, Any]]:
        """The `items` of `POST /<index>/_bulk`, refreshed by the store's policy unless `refresh` is given."""
        with self.calling(action):
            response = self.client.bulk(index=target or self.name, operations=operations, refresh=refresh or self.refresh)
        return list(response["items"])

    def bulk_results(
        self,
        ids: Sequence[str],
        operations: list[dict[str, Any]],
        action: str,
        *,
        target: str | None = None,
        refresh: str | None = None,
    ) -> list[tuple[str, dict[str, Any]]]:
        """`bulk` with one action per id: each id beside its item's result (`result`, or `error`)."""
        items = self.bulk(operations, action, target=target, refresh=refresh)
        return [(doc_id, next(iter(item.values()), {})) for doc_id, item in zip(ids, items, strict=True)]

    @staticmethod
    def failures(results: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, str]:
        """The ids of `bulk_results` whose item failed, with a one-line reason each."""
        return {doc_id: connection.item_reason(result) for doc_id, result in results if "error" in result}

    # ---- indices --------------------------------------------------------------------------------

    def create(self, name: str, **definition: Any) -> bool:
        """`PUT /<name>` with `definition` (`body=` or `mappings=`); False when it already existed
        (another process created it first). Call inside `calling`."""
        try:
            self.client.indices.create(index=name, **definition)
        except self.api_error as error:
            if getattr(error, "error", None) == "resource_already_exists_exception":
                return False
            raise
        return True

    def ensure_companion(self, name: str, mappings: dict[str, Any], what: str) -> None:
        """Create a companion index (the history's, the leases') once per store object; another
        process creating it first is fine."""
        if name in self._companions:
            return
        with self.calling(f"creating the {what} index"):
            if not self.client.indices.exists(index=name):
                self.create(name, mappings=mappings)
        self._companions.add(name)
