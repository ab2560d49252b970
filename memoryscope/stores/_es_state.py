"""State records in Elasticsearch (see `memoryscope.stores.state`): the index `<index_name>-state`,
made on the first write (reads of a state never written find nothing and make nothing).

Layout. A record's latest version is the document `record_id(key)` (a uuid5 of its five parts)
with `current: true`. A `versioned` write keeps the version it replaces as the document
`<record_id>.<version>` with `current: false`; so do imports, for every version but the latest.
A record's kept versions are its `.N` documents and its current one (`state_versions`,
`iter_state`; a version found twice, which only an undone write leaves, is read once). An
unversioned write replaces the current document and leaves any `.N` document as it is.

Writes. `write` reads the current documents (`_mget`, realtime), checks `expected` (a mismatch
writes nothing), then sends one `_bulk`: each current document `index`ed guarded by the version
read (`if_seq_no`), or `create`d when there was none, so a writer that got in between fails the
item with a 409 (`StoreConflict`). Elasticsearch has no transaction across documents: when an
item fails, the current documents of the same write that did land are put back as they were
(again guarded), so the write is whole or not at all unless the process stops between the two
requests. The `.N` copy of a replaced version is the same whoever writes it, so it needs no guard.
Writes refresh by the store's policy, so `list_state` (a search) sees them; reads by id always do.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from memoryscope.errors import StoreConflict, StoreError
from memoryscope.history import ChangeSource
from memoryscope.memory import utc_now
from memoryscope.stores import _es_queries as queries
from memoryscope.stores._es_index import index_missing, version_guard
from memoryscope.stores.base import conflict_error
from memoryscope.stores.state import StateKey, StateOwner, StateRecord, state_value_json

if TYPE_CHECKING:
    from memoryscope.stores._es_index import EsIndex

__all__ = [
    "STATE_MAPPINGS",
    "delete",
    "import_records",
    "iterate",
    "list_kind",
    "read",
    "record_id",
    "versions",
    "write",
]

# fixed forever: the ids of stored records derive from it (uuid5 of "memoryscope:state-records" in NAMESPACE_URL)
_ID_NAMESPACE = uuid.UUID("7dd702ca-79fb-5bb8-a2da-4d5cd821f1ea")
_PARTS = ("user_name", "target_name", "workspace", "kind", "name")
_IMPORT_BATCH = 500  # documents per _bulk request of an import
STATE_MAPPINGS: dict[str, Any] = {
    "dynamic": "strict",
    "properties": {
        **{part: {"type": "keyword"} for part in _PARTS},
        "version": {"type": "long"},
        "current": {"type": "boolean"},
        "updated_at": {"type": "double"},  # epoch seconds
        "operation": {"type": "keyword"},
        "run_id": {"type": "keyword"},
        "value": {"type": "object", "enabled": False},  # kept, never searched
    },
}


def record_id(key: StateKey) -> str:
    """The id of a record's current document; its kept versions are `<id>.<version>`."""
    return uuid.uuid5(_ID_NAMESPACE, "\x1f".join(key.parts())).hex


# ---- reading -------------------------------------------------------------------------------------


def read(index: EsIndex, keys: Sequence[StateKey]) -> list[StateRecord]:
    keys = [_checked_key(key) for key in keys]
    if not keys:
        return []
    current = _current(index, keys, "reading state records")
    return [_record(current[key]) for key in keys if key in current]


def list_kind(index: EsIndex, owner: StateOwner, kind: str) -> list[StateRecord]:
    parts = (owner.user_name, owner.target_name, owner.workspace, kind)
    query = _filter(**dict(zip(_PARTS[:4], parts, strict=True)), current=True)
    pages = _pages(index, query, [{"name": "asc"}], None, "listing state records")
    return [_record(hit) for page in pages for hit in page]


def versions(index: EsIndex, key: StateKey, limit: int) -> list[StateRecord]:
    """Newest first, one more than `limit` (a version may be there twice), then oldest first."""
    key = _checked_key(key)
    if limit < 1:
        return []
    query = _filter(**dict(zip(_PARTS, key.parts(), strict=True)))
    hits = [hit for page in _pages(index, query, [{"version": "desc"}], limit + 1, "reading state versions") for hit in page]
    kept = {int(hit["_source"]["version"]): hit for hit in reversed(hits)}  # the first hit of a version wins
    return [_record(kept[version]) for version in sorted(kept)[-limit:]]


def iterate(index: EsIndex, user_name: str | None, batch_size: int) -> Iterator[list[StateRecord]]:
    """Every document (current and kept), sorted by record then version, with `search_after`; a
    version found twice is given once."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 0 < batch_size <= queries.MAX_RESULT_WINDOW:
        raise StoreError(f"iter_state: batch_size must be an integer from 1 to {queries.MAX_RESULT_WINDOW}, got {batch_size!r}")
    query = _filter(user_name=user_name) if user_name is not None else {"match_all": {}}
    sort = [{part: "asc"} for part in _PARTS] + [{"version": "asc"}]
    after: list[Any] | None = None
    last: list[Any] | None = None
    while True:
        body: dict[str, Any] = {"query": query, "sort": sort, "size": batch_size}
        if after is not None:
            body["search_after"] = after
        hits = index.search(body, "reading all state records", target=index.state_name, missing_ok=True)
        batch = []
        for hit in hits:
            if hit["sort"] != last:
                batch.append(_record(hit))
            last = hit["sort"]
        if batch:
            yield batch
        if len(hits) < batch_size:
            return
        after = list(hits[-1]["sort"])


# ---- writing -------------------------------------------------------------------------------------


def write(
    index: EsIndex,
    values: Mapping[StateKey, Mapping[str, Any]],
    expected: Mapping[StateKey, int] | None,
    versioned: bool,
    change: ChangeSource | None,
) -> list[StateRecord]:
    """Check, read the current documents, compare `expected`, then one `_bulk` (see the module)."""
    checked = {_checked_key(key): _json_value(value, key) for key, value in values.items()}  # all before anything is sent
    wanted = {_checked_key(key): _checked_version(version, key) for key, version in (expected or {}).items()}
    if not checked:
        return []
    _ensure_index(index)
    current = _current(index, list(dict.fromkeys([*checked, *wanted])), "writing state records")
    wrong = [key for key, version in wanted.items() if _version(current.get(key)) != version]
    if wrong:
        raise conflict_error([f"{key.kind}/{key.name}" for key in wrong], index.where("writing state records"))
    source = change or ChangeSource()
    now = utc_now()
    written = [StateRecord(key, value, _version(current.get(key)) + 1, now, source.operation, source.run_id)
               for key, value in checked.items()]  # fmt: skip
    ids: list[str] = []
    lines: list[dict[str, Any]] = []
    for record in written:
        doc_id, before = record_id(record.key), current.get(record.key)
        if before is None:
            lines += [{"create": {"_id": doc_id}}, _document(record, current=True)]
        else:
            lines += [{"index": {"_id": doc_id, **version_guard(before)}}, _document(record, current=True)]
        ids.append(doc_id)
        if versioned and before is not None:  # the version replaced is kept as it was
            ids.append(f"{doc_id}.{_version(before)}")
            lines += [{"index": {"_id": ids[-1]}}, {**before["_source"], "current": False}]
    results = dict(index.bulk_results(ids, lines, "writing state records", target=index.state_name))
    failed = {doc_id: result for doc_id, result in results.items() if "error" in result}
    if failed:
        _undo(index, written, current, results, failed)
    return written


def _undo(
    index: EsIndex,
    written: Sequence[StateRecord],
    current: Mapping[StateKey, dict[str, Any]],
    results: Mapping[str, dict[str, Any]],
    failed: Mapping[str, dict[str, Any]],
) -> None:
    """Put back, guarded by what they just became, the current documents of a write some items of
    which failed; then raise: StoreConflict when an item met another writer (409), else StoreError."""
    ids: list[str] = []
    lines: list[dict[str, Any]] = []
    for record in written:
        doc_id = record_id(record.key)
        if doc_id in failed:
            continue
        landed = {"if_seq_no": results[doc_id]["_seq_no"], "if_primary_term": results[doc_id]["_primary_term"]}
        before = current.get(record.key)
        if before is None:  # created: deleted again
            lines.append({"delete": {"_id": doc_id, **landed}})
        else:
            lines += [{"index": {"_id": doc_id, **landed}}, before["_source"]]
        ids.append(doc_id)
    kept: dict[str, str] = {}  # what could not be put back
    if ids:
        kept = index.failures(index.bulk_results(ids, lines, "undoing a partly failed state write", target=index.state_name))
    by_id = {record_id(record.key): record.key for record in written}
    names = [f"{by_id[doc_id].kind}/{by_id[doc_id].name}" for doc_id in kept]
    left = f"; records {', '.join(names)} could not be put back and keep the new version" if names else ""
    conflicts = [doc_id for doc_id, result in failed.items() if result.get("status") == 409]
    if conflicts:
        keys = [by_id[doc_id.split(".")[0]] for doc_id in conflicts]
        error = conflict_error([f"{key.kind}/{key.name}" for key in keys], index.where("writing state records"))
        raise StoreConflict(f"{error}{left}", error.memory_ids)
    reasons = "; ".join(f"{doc_id}: {reason}" for doc_id, reason in list(index.failures(list(failed.items())).items())[:5])
    raise StoreError(index.where(f"writing state records failed ({reasons}); the write was undone{left}"))


def delete(index: EsIndex, user_name: str, target_name: str | None, workspace: str | None) -> int:
    """How many records (current documents) there were; then every document of them, with
    `_delete_by_query`, refreshed unless `refresh` is "false" (it takes no `wait_for`)."""
    if not isinstance(user_name, str) or not user_name:
        raise StoreError("delete_state needs a user name")
    query = _filter(user_name=user_name, target_name=target_name, workspace=workspace)
    records = index.count("counting state records", {"query": _with_current(query)}, target=index.state_name, missing_ok=True)
    with index.calling("deleting state records"):
        try:
            response = index.client.delete_by_query(
                index=index.state_name, body={"query": query}, refresh=index.refresh != "false"
            )
        except index.api_error as error:
            if index_missing(error):
                return 0
            raise
    failures = response.get("failures") or []
    if failures:
        reasons = "; ".join(str((item.get("cause") or {}).get("reason", item)) for item in failures[:5])
        deleted = response.get("deleted", 0)
        raise StoreError(index.where(f"deleting state records removed {deleted} documents, then failed: {reasons}"))
    return records


def import_records(index: EsIndex, records: Sequence[StateRecord]) -> int:
    """Each record as it is, unguarded, a batch at a time (one `_mget` of the current documents,
    one `_bulk`). A key's highest version, given or stored, stays current; every other version
    given, and a stored current one that a higher one replaces, is kept as `<id>.<version>`."""
    given: dict[StateKey, dict[int, StateRecord]] = {}
    for record in records:
        given.setdefault(_checked_record(record).key, {})[record.version] = record  # a repeated version: the last wins
    if not given:
        return 0
    _ensure_index(index)
    batch: list[StateKey] = []
    size = 0
    for key, kept in given.items():
        batch.append(key)
        size += len(kept)
        if size >= _IMPORT_BATCH:
            _import_batch(index, batch, given)
            batch, size = [], 0
    if batch:
        _import_batch(index, batch, given)
    return len(records)


def _import_batch(index: EsIndex, keys: Sequence[StateKey], given: Mapping[StateKey, Mapping[int, StateRecord]]) -> None:
    current = _current(index, keys, "importing state records")
    ids: list[str] = []
    lines: list[dict[str, Any]] = []
    for key in keys:
        doc_id, stored = record_id(key), current.get(key)
        held = _version(stored)
        latest = max(given[key])
        for version, record in sorted(given[key].items()):
            is_current = version == latest and latest >= held
            ids.append(doc_id if is_current else f"{doc_id}.{version}")
            lines += [{"index": {"_id": ids[-1]}}, _document(record, current=is_current)]
        if stored is not None and held < latest and held not in given[key]:
            ids.append(f"{doc_id}.{held}")
            lines += [{"index": {"_id": ids[-1]}}, {**stored["_source"], "current": False}]
    failed = index.failures(index.bulk_results(ids, lines, "importing state records", target=index.state_name))
    if failed:
        reasons = "; ".join(f"{doc_id}: {reason}" for doc_id, reason in list(failed.items())[:5])
        raise StoreError(index.where(f"importing state records: {len(failed)} of {len(ids)} documents failed ({reasons})"))


# ---- documents -----------------------------------------------------------------------------------


def _document(record: StateRecord, *, current: bool) -> dict[str, Any]:
    return {
        **dict(zip(_PARTS, record.key.parts(), strict=True)),
        "version": record.version,
        "current": current,
        "updated_at": record.updated_at.timestamp(),
        "operation": record.operation,
        "run_id": record.run_id,
        "value": record.value,
    }


def _record(doc: Mapping[str, Any]) -> StateRecord:
    """A stored document (a hit or a found `_mget` doc) as a record; StoreError naming it when damaged."""
    source = doc.get("_source") or {}
    try:
        key = StateKey(StateOwner(*(source[part] for part in _PARTS[:3])), source["kind"], source["name"])
        value, version = source["value"], source["version"]
        if not isinstance(value, dict) or isinstance(version, bool) or not isinstance(version, int):
            raise TypeError("value or version of the wrong type")
        updated_at = datetime.fromtimestamp(float(source["updated_at"]), timezone.utc)
        return StateRecord(key, value, version, updated_at, str(source.get("operation", "")), str(source.get("run_id", "")))
    except (KeyError, TypeError, ValueError, OverflowError, StoreError) as error:
        raise StoreError(f"state document {doc.get('_id')!r} is damaged: {error}") from None


def _current(index: EsIndex, keys: Sequence[StateKey], action: str) -> dict[StateKey, dict[str, Any]]:
    """The current documents of `keys` that exist (with `_seq_no` and `_primary_term`), by key."""
    unique = list(dict.fromkeys(keys))
    docs = index.mget([record_id(key) for key in unique], action, target=index.state_name)
    found = {}
    for key, doc in zip(unique, docs, strict=True):
        error = doc.get("error")
        if error is not None and not index_missing(error):  # a missing index: nothing written yet
            reason = error.get("reason", error) if isinstance(error, dict) else error
            raise StoreError(index.where(f"{action} failed: {reason}"))
        if doc.get("found"):
            found[key] = dict(doc)
    return found


def _version(doc: Mapping[str, Any] | None) -> int:
    return 0 if doc is None else int(doc["_source"]["version"])


def _pages(
    index: EsIndex, query: dict[str, Any], sort: list[dict[str, str]], limit: int | None, action: str
) -> Iterator[list[dict[str, Any]]]:
    def body_of(size: int, after: list[Any] | None) -> dict[str, Any]:
        body: dict[str, Any] = {"query": query, "sort": sort, "size": size}
        if after is not None:
            body["search_after"] = after
        return body

    return index.pages(body_of, limit, action, target=index.state_name, missing_ok=True)


def _filter(**terms: Any) -> dict[str, Any]:
    """A bool filter of a `term` per value given (None: any)."""
    return {"bool": {"filter": [{"term": {field: value}} for field, value in terms.items() if value is not None]}}


def _with_current(query: dict[str, Any]) -> dict[str, Any]:
    return {"bool": {"filter": [*query["bool"]["filter"], {"term": {"current": True}}]}}


def _ensure_index(index: EsIndex) -> None:
    index.ensure_companion(index.state_name, STATE_MAPPINGS, "state")


# ---- checks --------------------------------------------------------------------------------------


def _checked_key(key: Any) -> StateKey:
    if not isinstance(key, StateKey):
        raise StoreError(f"state records are named by StateKey objects, got {type(key).__name__}")
    return key


def _checked_version(version: Any, key: StateKey) -> int:
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        where = f"state record {key.kind} {key.name!r} of user {key.owner.user_name!r}"
        raise StoreError(f"{where}: the expected version must be a whole number from 0, got {version!r}")
    return version


def _json_value(value: Any, key: StateKey) -> dict[str, Any]:
    """`value` as it reads back (a tuple becomes a list), or StoreError naming the record."""
    decoded: dict[str, Any] = json.loads(state_value_json(value, key))
    return decoded


def _checked_record(record: Any) -> StateRecord:
    if not isinstance(record, StateRecord):
        raise StoreError(f"import_state takes StateRecord objects, got {type(record).__name__}")
    key = _checked_key(record.key)
    where = f"state record {key.kind} {key.name!r} of user {key.owner.user_name!r}"
    if isinstance(record.version, bool) or not isinstance(record.version, int) or record.version < 1:
        raise StoreError(f"{where}: the version must be a whole number from 1, got {record.version!r}")
    if not isinstance(record.updated_at, datetime) or record.updated_at.tzinfo is None:
        raise StoreError(f"{where}: updated_at must be a datetime with its time zone")
    state_value_json(record.value, key)
    return record
