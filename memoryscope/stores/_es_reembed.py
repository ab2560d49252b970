"""Re-embedding an `elasticsearch_memory_store` index with another embedding model.

A `dense_vector` field's `dims` cannot change in place, so the memories move to a new index:

1. create `<index_name>-reembed-<UTC yyyymmddhhmmss>` (`-2`, `-3`, ... if taken) with the
   mapping for the new model;
2. copy every memory into it (read by `memory_id` pages from the old index, embedded, bulk
   written without refresh), then refresh it and check it holds as many memories as the old;
3. one `POST /_aliases` request deletes the old index and makes `index_name` an alias of the new
   one, atomically (`remove_index` + `add`): readers see the old index or the new, never none.

The config does not change: `index_name` now names an alias, which every API the store uses
resolves, and a later re-embed swaps it again. If anything fails before step 3, the new index is
deleted and the old one is untouched. Stop writers first: what they write to the old index
during the copy is not carried over (the count check catches added or deleted memories, not
edits).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

from memoryscope.errors import StoreError
from memoryscope.memory import embedding_text
from memoryscope.progress import Progress
from memoryscope.stores import _es_queries as queries

if TYPE_CHECKING:
    from memoryscope.stores._es_index import EsIndex
    from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore

__all__ = ["reembed_index", "new_index_name"]


def new_index_name(index_name: str, now: datetime | None = None) -> str:
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return f"{index_name}-reembed-{moment:%Y%m%d%H%M%S}"


def reembed_index(store: ElasticsearchMemoryStore, index: EsIndex, batch_size: int, progress: Progress) -> int:
    """Copy `store`'s memories into a new index with new vectors, then swap it in; returns how many."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 0 < batch_size <= queries.MAX_RESULT_WINDOW:
        raise StoreError(f"reembed: batch_size must be an integer from 1 to {queries.MAX_RESULT_WINDOW}, got {batch_size!r}")
    client = index.client
    store.ensure_index()
    with index.calling("reading the index"):
        concrete = sorted(client.indices.get_mapping(index=index.name).body)
    if len(concrete) != 1:
        raise StoreError(index.where(f"{index.name!r} is an alias of {len(concrete)} indices ({', '.join(concrete)}); "
                                     "re-embedding needs exactly one"))  # fmt: skip
    old_index = concrete[0]
    new_index = base = new_index_name(index.name)
    with index.calling("choosing the new index name"):
        taken = 1
        while client.indices.exists(index=new_index):  # a re-embed within the same second, or a leftover
            taken += 1
            new_index = f"{base}-{taken}"
    body = queries.index_body(
        embedding_model=store.embedding_model.model_name, dimension=store.dimension, analyzer=store.params.analyzer
    )
    with index.calling(f"creating index {new_index!r}"):
        client.indices.create(index=new_index, body=body)
    try:
        count = _copy(store, index, old_index, new_index, batch_size, progress)
        with index.calling(f"switching {index.name!r} to {new_index!r}"):
            swap = queries.alias_swap_body(alias=index.name, old_index=old_index, new_index=new_index)
            client.indices.update_aliases(body=swap)
    except BaseException:
        try:
            client.indices.delete(index=new_index, ignore_unavailable=True)
        except Exception:  # the original error matters more; the message names the index
            progress.note(f"could not delete the unfinished index {new_index!r}; delete it by hand")
        raise
    progress.note(f"{index.name!r} is now an alias of {new_index!r}; the old index {old_index!r} is deleted")
    return count


def _copy(
    store: ElasticsearchMemoryStore, index: EsIndex, old_index: str, new_index: str, batch_size: int, progress: Progress
) -> int:
    client = index.client
    total = index.count("counting memories", target=old_index)
    progress.start("re-embed", total)
    copied = 0
    for nodes in store.iter_all(batch_size):
        texts = [embedding_text(node) for node in nodes]
        rows = index.unit_rows(store.embedding_model.embed_passages(texts), len(nodes), "embedding model output")
        documents = [queries.node_to_document(node, queries.stored_vector(row)) for node, row in zip(nodes, rows, strict=True)]
        lines, ids = queries.bulk_index_lines(documents), [node.memory_id for node in nodes]
        # refresh once at the end, not per batch: nobody reads the new index before the swap
        failed = list(index.failures(index.bulk_results(ids, lines, "bulk copy", target=new_index, refresh="false")).items())
        if failed:
            shown = "; ".join(f"{memory_id}: {reason}" for memory_id, reason in failed[:10])
            raise StoreError(index.where(f"re-embed: {len(failed)} memories could not be written to {new_index!r}: {shown}"))
        copied += len(nodes)
        progress.advance(len(nodes))
    progress.finish()
    with index.calling(f"checking {new_index!r}"):
        client.indices.refresh(index=new_index)
        written = int(client.count(index=new_index)["count"])
        now_old = int(client.count(index=old_index)["count"])
    if not written == copied == now_old:
        raise StoreError(index.where(
            f"re-embed: the old index holds {now_old} memories, {copied} were copied and the new index holds {written}; "
            "stop every writer and run `memoryscope reembed` again (the old index is kept)"
        ))  # fmt: skip
    return copied
