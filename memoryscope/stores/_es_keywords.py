"""The `keywords` field of `elasticsearch_memory_store`: bringing older indices up to it, and filling it.

Keyword search reads only `keywords` (see `_es_queries`). Every write path sends it (`upsert`,
`update`, the re-embed copy, and so migrate and import, which upsert), so what matters here is
what was written before the field existed:

- `upgrade_index`, when the store opens an index: a schema-version-1 index gets the field with
  the update-mapping API (adding a field to a mapping is allowed; no document is touched) and
  `_meta.schema_version` 2. While `_meta.keyword_text_version` is not the current one, some
  documents may lack the field, or hold an older `keyword_text`; keyword search cannot find
  them, and one warning says so and names the command that fixes it.
- `fill_keywords` (run by `memoryscope reembed` when the model is unchanged): walk every
  document by `memory_id` and set `keywords` where it differs from `keyword_text`, in place with
  partial `update`s guarded by the sequence number read (a memory written meanwhile keeps what
  its writer wrote), then record the version in `_meta`. Nothing is embedded again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from memoryscope.errors import StoreError
from memoryscope.progress import Progress
from memoryscope.stores import _es_connection as connection
from memoryscope.stores import _es_queries as queries
from memoryscope.text import KEYWORD_TEXT_VERSION, keyword_text

if TYPE_CHECKING:
    from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore

__all__ = ["FILL_COMMAND", "fill_keywords", "upgrade_index"]

logger = logging.getLogger("memoryscope.stores.elasticsearch")

FILL_COMMAND = "memoryscope reembed --config CONFIG"
# a memory deleted, or written again, between the read and the update: nothing left to fill
_SKIPPED = ("version_conflict_engine_exception", "document_missing_exception")


def upgrade_index(store: ElasticsearchMemoryStore, mappings: dict[str, Any], *, warn: bool = True) -> bool:
    """Add `keywords` to the indices behind the store's name (`mappings`, as get-mapping answers)
    that lack it. True when every document has the current `keywords`; else False, and with
    `warn` one warning naming the command that fills them."""
    stale = []
    for concrete, entry in sorted(mappings.items()):
        mapping = entry.get("mappings") or {}
        meta = mapping.get("_meta") or {}
        if queries.KEYWORDS_FIELD not in (mapping.get("properties") or {}):
            model, dimension = _recorded(store, concrete, meta)
            body = queries.upgrade_mapping_body(embedding_model=model, dimension=dimension)
            store.client.indices.put_mapping(index=concrete, body=body)
            logger.info("index %r: added the %r field", concrete, queries.KEYWORDS_FIELD)
        if meta.get("keyword_text_version") != KEYWORD_TEXT_VERSION:
            stale.append(concrete)
    if stale and warn:
        logger.warning(
            "%s",
            store._where(
                f"memories written to {', '.join(map(repr, stale))} by an older MemoryScope are not found by keyword "
                f"search until their {queries.KEYWORDS_FIELD!r} field is filled: run `{FILL_COMMAND}` once "
                "(in place; nothing is embedded again)"
            ),
        )
    return not stale


def fill_keywords(store: ElasticsearchMemoryStore, batch_size: int, progress: Progress | None = None) -> int:
    """Set `keywords` of every memory whose stored value is missing or outdated; how many were set.
    Nothing is read when the index's `_meta` records that every memory has the current one."""
    progress = progress or Progress()
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 0 < batch_size <= queries.MAX_RESULT_WINDOW:
        limit = queries.MAX_RESULT_WINDOW
        raise StoreError(f"fill_keywords: batch_size must be an integer from 1 to {limit}, got {batch_size!r}")
    store.ensure_index()
    with store._calling("reading the mapping"):
        mappings = store.client.indices.get_mapping(index=store.index_name).body
        filled_already = upgrade_index(store, mappings, warn=False)
    if filled_already:
        progress.note(f"every memory already has its {queries.KEYWORDS_FIELD!r} field; nothing to fill")
        return 0
    with store._calling("counting memories"):
        total = int(store.client.count(index=store.index_name)["count"])
    progress.start("fill keywords", total)
    filled = 0
    failed: dict[str, str] = {}
    after: str | None = None
    while True:
        hits = store._search(queries.keyword_fill_page_body(size=batch_size, after_id=after), "reading memories to fill keywords")
        updates = []
        for hit in hits:
            text = keyword_text(queries.document_to_node(hit["_source"]))
            if hit["_source"].get(queries.KEYWORDS_FIELD) != text:
                updates.append((hit["_id"], text, int(hit["_seq_no"]), int(hit["_primary_term"])))
        if updates:
            items = store._bulk(queries.bulk_keyword_update_lines(updates), "filling keywords")
            for (memory_id, *_), item in zip(updates, items, strict=True):
                result = item.get("update", {})
                error = result.get("error")
                if error is None:
                    filled += 1
                elif not (isinstance(error, dict) and error.get("type") in _SKIPPED):
                    failed[memory_id] = connection.item_reason(result)
        progress.advance(len(hits))
        if len(hits) < batch_size:
            break
        after = str(hits[-1]["_source"]["memory_id"])
    progress.finish()
    if failed:
        shown = "; ".join(f"{memory_id}: {reason}" for memory_id, reason in list(failed.items())[:10])
        raise StoreError(store._where(
            f"filling keywords: {len(failed)} memories failed ({shown}); {filled} were filled. Run `{FILL_COMMAND}` again"
        ))  # fmt: skip
    with store._calling("recording the keyword text version"):
        for concrete, entry in sorted(mappings.items()):
            meta = (entry.get("mappings") or {}).get("_meta") or {}
            model, dimension = _recorded(store, concrete, meta)
            done = queries.index_meta(embedding_model=model, dimension=dimension, keywords_filled=True)
            store.client.indices.put_mapping(index=concrete, body={"_meta": done})
    progress.note(f"filled the {queries.KEYWORDS_FIELD!r} field of {filled:,} memories")
    return filled


def _recorded(store: ElasticsearchMemoryStore, index: str, meta: dict[str, Any]) -> tuple[str, int]:
    """The model and dimension `meta` records, kept as they are when `_meta` is written again."""
    model, dimension = meta.get("embedding_model"), meta.get("dimension")
    if not isinstance(model, str) or not isinstance(dimension, int):
        raise StoreError(store._where(f"index {index!r}: its _meta lacks embedding_model or dimension: {meta}"))
    return model, dimension
