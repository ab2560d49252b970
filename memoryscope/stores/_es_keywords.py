"""The derived fields of `elasticsearch_memory_store`, `keywords`, `meta_index` and `rank_terms`:
bringing older indices up to them, and filling them.

Keyword search reads only `keywords`, metadata filters only `meta_index` (see `_es_queries`,
`_es_metadata`). Every write path sends both (`upsert`, `update`, the re-embed copy, and so
migrate and import, which upsert), so what matters here is what was written before a field existed:

- `upgrade_index`, when the store opens an index: an index of schema version 1, 2 or 3 gets the
  fields it lacks with the update-mapping API (adding a field to a mapping is allowed; no
  document is touched) and `_meta.schema_version` 4. A document without `rank_terms` is ranked
  as before (the ranker parses it), so that needs no warning. While `_meta.keyword_text_version` is not
  the current one, some documents may lack `keywords`, or hold an older `keyword_text`; keyword
  search cannot find them, and one warning says so and names the command that fixes it. While
  `_meta.metadata_index_version` is not the current one, some may lack their `meta_index`
  objects: a warning says so, and reads with metadata conditions are refused
  (`_es_metadata.require_filled`) instead of silently missing them.
- `fill_keywords` (run by `memoryscope reembed` when the model is unchanged): walk every
  document by `memory_id` and set `keywords`, `meta_index` and `rank_terms` where they differ from what the
  document's node makes, in place with partial `update`s guarded by the sequence number read (a
  memory written meanwhile keeps what its writer wrote), then record both versions in `_meta`.
  Nothing is embedded again.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memoryscope.errors import StoreError
from memoryscope.progress import Progress
from memoryscope.stores import _es_queries as queries
from memoryscope.stores._es_metadata import (
    FILL_COMMAND,
    META_INDEX_FIELD,
    META_INDEX_MAPPING,
    meta_index_entries,
    metadata_filled,
)
from memoryscope.stores.metadata import METADATA_INDEX_VERSION
from memoryscope.text import KEYWORD_TEXT_VERSION, keyword_text, rank_terms

if TYPE_CHECKING:
    from memoryscope.stores._es_index import EsIndex
    from memoryscope.stores.elasticsearch_store import ElasticsearchMemoryStore

__all__ = [
    "FILL_COMMAND",
    "bulk_fill_update_lines",
    "fill_keywords",
    "fill_page_body",
    "upgrade_index",
    "upgrade_mapping_body",
]

logger = logging.getLogger("memoryscope.stores.elasticsearch")

# a memory deleted, or written again, between the read and the update: nothing left to fill
_SKIPPED = ("version_conflict_engine_exception", "document_missing_exception")
_DERIVED = (queries.KEYWORDS_FIELD, META_INDEX_FIELD, queries.RANK_TERMS_FIELD)
_FILLED_WHAT = f"{queries.KEYWORDS_FIELD!r} and {queries.RANK_TERMS_FIELD!r} fields and {META_INDEX_FIELD!r} objects"


def upgrade_mapping_body(*, embedding_model: str, dimension: int, meta: dict[str, Any], missing: Sequence[str]) -> dict[str, Any]:
    """`PUT /<index>/_mapping` for an older index: add the `missing` fields (of `keywords`,
    `meta_index`, `rank_terms`; adding a field is allowed, nothing else changes) and record the
    current schema version, the recorded model kept and `keywords` and `meta_index` still marked
    filled if they are not missing and `meta` (the index's `_meta`) says so. The documents
    written before lack the new fields until `fill_keywords` writes them."""
    upgraded = queries.index_meta(
        embedding_model=embedding_model,
        dimension=dimension,
        keywords_filled=queries.KEYWORDS_FIELD not in missing and meta.get("keyword_text_version") == KEYWORD_TEXT_VERSION,
        # a field already there stays marked filled (a schema 3 index keeps its `meta_index`)
        metadata_filled=META_INDEX_FIELD not in missing and meta.get("metadata_index_version") == METADATA_INDEX_VERSION,
        rank_terms_filled=False,
    )
    fields = {
        queries.KEYWORDS_FIELD: dict(queries.KEYWORDS_MAPPING),
        META_INDEX_FIELD: copy.deepcopy(META_INDEX_MAPPING),
        queries.RANK_TERMS_FIELD: dict(queries.RANK_TERMS_MAPPING),
    }
    return {"properties": {name: fields[name] for name in missing}, "_meta": upgraded}


def fill_page_body(*, size: int, after_id: str | None = None) -> dict[str, Any]:
    """One page of every memory by `memory_id`, with its stored `keywords` and `meta_index` and the
    sequence number and primary term that guard rewriting it (`bulk_fill_update_lines`)."""
    body = queries.iter_body(size=size, after_id=after_id)
    body["_source"] = {"excludes": [queries.VECTOR_FIELD]}
    body["seq_no_primary_term"] = True
    return body


def bulk_fill_update_lines(updates: Sequence[tuple[str, dict[str, Any], int, int]]) -> list[dict[str, Any]]:
    """`_bulk` lines setting the fields of `(memory_id, fields, seq_no, primary_term)`: each an
    `update` that fails (409) if the memory changed since it was read, so a concurrent write,
    which writes its own, always wins."""
    lines: list[dict[str, Any]] = []
    for memory_id, fields, seq_no, primary_term in updates:
        lines.append({"update": {"_id": memory_id, "if_seq_no": seq_no, "if_primary_term": primary_term}})
        lines.append({"doc": fields})
    return lines


def upgrade_index(index: EsIndex, mappings: dict[str, Any], *, warn: bool = True) -> set[str]:
    """Add `keywords` and `meta_index` to the indices behind the store's name (`mappings`, as
    get-mapping answers) that lack them. Returns the fields some documents may lack or hold
    outdated (empty: every document has both as they are made now); with `warn`, one warning
    per such field, naming the command that fills it."""
    stale: dict[str, list[str]] = {name: [] for name in _DERIVED}
    for concrete, entry in sorted(mappings.items()):
        mapping = entry.get("mappings") or {}
        meta = mapping.get("_meta") or {}
        missing = [name for name in _DERIVED if name not in (mapping.get("properties") or {})]
        if missing:
            model, dimension = _recorded(index, concrete, meta)
            body = upgrade_mapping_body(embedding_model=model, dimension=dimension, meta=meta, missing=missing)
            index.client.indices.put_mapping(index=concrete, body=body)
            logger.info("index %r: added %s", concrete, ", ".join(map(repr, missing)))
        if meta.get("keyword_text_version") != KEYWORD_TEXT_VERSION:
            stale[queries.KEYWORDS_FIELD].append(concrete)
        if not metadata_filled(mapping):
            stale[META_INDEX_FIELD].append(concrete)
        if meta.get("rank_terms_version") != KEYWORD_TEXT_VERSION:  # no warning: such memories rank as before, parsed
            stale[queries.RANK_TERMS_FIELD].append(concrete)
    if warn and stale[queries.KEYWORDS_FIELD]:
        logger.warning("%s", index.where(
            f"memories written to {', '.join(map(repr, stale[queries.KEYWORDS_FIELD]))} by an older MemoryScope are not "
            f"found by keyword search until their {queries.KEYWORDS_FIELD!r} field is filled: run `{FILL_COMMAND}` once "
            "(in place; nothing is embedded again)"
        ))  # fmt: skip
    if warn and stale[META_INDEX_FIELD]:
        logger.warning("%s", index.where(
            f"memories written to {', '.join(map(repr, stale[META_INDEX_FIELD]))} by an older MemoryScope have no "
            f"{META_INDEX_FIELD!r} objects yet, so metadata filters are refused until `{FILL_COMMAND}` has run once "
            "(in place; nothing is embedded again)"
        ))  # fmt: skip
    return {name for name, indices in stale.items() if indices}


def fill_keywords(store: ElasticsearchMemoryStore, index: EsIndex, batch_size: int, progress: Progress | None = None) -> int:
    """Set `keywords` and `meta_index` of every memory whose stored ones are missing or outdated;
    how many memories were set. Nothing is read when the index's `_meta` records that every
    memory has the current ones."""
    progress = progress or Progress()
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 0 < batch_size <= queries.MAX_RESULT_WINDOW:
        limit = queries.MAX_RESULT_WINDOW
        raise StoreError(f"fill_keywords: batch_size must be an integer from 1 to {limit}, got {batch_size!r}")
    store.ensure_index()
    with index.calling("reading the mapping"):
        mappings = index.client.indices.get_mapping(index=index.name).body
        stale = upgrade_index(index, mappings, warn=False)
    if not stale:
        progress.note(f"every memory already has its {_FILLED_WHAT}; nothing to fill")
        return 0
    total = index.count("counting memories")
    progress.start("fill keywords", total)
    filled = 0
    failed: dict[str, str] = {}
    after: str | None = None
    while True:
        hits = index.search(fill_page_body(size=batch_size, after_id=after), "reading memories to fill keywords")
        updates = []
        for hit in hits:
            fields = _outdated_fields(hit["_source"])
            if fields:
                updates.append((hit["_id"], fields, int(hit["_seq_no"]), int(hit["_primary_term"])))
        if updates:
            ids = [memory_id for memory_id, *_ in updates]
            results = index.bulk_results(ids, bulk_fill_update_lines(updates), "filling keywords")
            filled += sum(1 for _, result in results if result.get("error") is None)
            failed.update(index.failures([(memory_id, result) for memory_id, result in results if not _skipped(result)]))
        progress.advance(len(hits))
        if len(hits) < batch_size:
            break
        after = str(hits[-1]["_source"]["memory_id"])
    progress.finish()
    if failed:
        shown = "; ".join(f"{memory_id}: {reason}" for memory_id, reason in list(failed.items())[:10])
        raise StoreError(index.where(
            f"filling keywords: {len(failed)} memories failed ({shown}); {filled} were filled. Run `{FILL_COMMAND}` again"
        ))  # fmt: skip
    with index.calling("recording the keyword text and metadata index versions"):
        for concrete, entry in sorted(mappings.items()):
            meta = (entry.get("mappings") or {}).get("_meta") or {}
            model, dimension = _recorded(index, concrete, meta)
            done = queries.index_meta(
                embedding_model=model, dimension=dimension, keywords_filled=True, metadata_filled=True, rank_terms_filled=True
            )
            index.client.indices.put_mapping(index=concrete, body={"_meta": done})
    index.metadata_filled = True
    progress.note(f"filled the {_FILLED_WHAT} of {filled:,} memories")
    return filled


def _outdated_fields(source: dict[str, Any]) -> dict[str, Any]:
    """The derived fields a stored document lacks or holds outdated, as its node makes them now."""
    node = queries.document_to_node(source)
    fields: dict[str, Any] = {}
    words = keyword_text(node)
    if source.get(queries.KEYWORDS_FIELD) != words:
        fields[queries.KEYWORDS_FIELD] = words
    entries = meta_index_entries(node.meta)
    if (source.get(META_INDEX_FIELD) or []) != entries:
        fields[META_INDEX_FIELD] = entries
    terms = rank_terms(node)
    if source.get(queries.RANK_TERMS_FIELD) != terms:
        fields[queries.RANK_TERMS_FIELD] = terms
    return fields


def _skipped(result: dict[str, Any]) -> bool:
    """A fill the memory no longer needs: deleted, or written again, since it was read."""
    error = result.get("error")
    return isinstance(error, dict) and error.get("type") in _SKIPPED


def _recorded(index: EsIndex, concrete: str, meta: dict[str, Any]) -> tuple[str, int]:
    """The model and dimension `meta` records, kept as they are when `_meta` is written again."""
    model, dimension = meta.get("embedding_model"), meta.get("dimension")
    if not isinstance(model, str) or not isinstance(dimension, int):
        raise StoreError(index.where(f"index {concrete!r}: its _meta lacks embedding_model or dimension: {meta}"))
    return model, dimension
