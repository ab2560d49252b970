"""The pieces of the fake Elasticsearch that need no cluster state: documents, errors, answers.

The `Index` record, the `Failure` a request ends with and its error body, mapping checks on a
document, the update-mapping merge, version checks, the partial-update merge and the `_source`
filtering options.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memoryscope.testing import _fake_es_search as dsl

__all__ = [
    "SHARDS",
    "Failure",
    "Index",
    "check_version",
    "document_meta",
    "error_body",
    "hits_response",
    "merge",
    "merge_mapping",
    "source_option",
    "source_params",
    "validate_document",
]

SHARDS = {"total": 1, "successful": 1, "skipped": 0, "failed": 0}


@dataclass
class Index:
    mappings: dict[str, Any]
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    versions: dict[str, tuple[int, int]] = field(default_factory=dict)  # id -> (_version, _seq_no)


class Failure(Exception):
    def __init__(self, status: int, error_type: str, reason: str):
        self.status, self.error_type, self.reason = status, error_type, reason
        super().__init__(reason)


def error_body(status: int, error_type: str, reason: str) -> dict[str, Any]:
    cause = {"type": error_type, "reason": reason}
    return {"error": {"root_cause": [cause], **cause}, "status": status}


def validate_document(index: Index, doc_id: str, source: Any) -> None:
    if not isinstance(source, dict):
        raise Failure(400, "mapper_parsing_exception", "failed to parse, document is empty")
    properties = index.mappings.get("properties", {})
    strict = index.mappings.get("dynamic") in ("strict", "false", False)
    for name, value in source.items():
        spec = properties.get(name)
        if spec is None:
            if strict:
                reason = f"mapping set to strict, dynamic introduction of [{name}] within [_doc] is not allowed"
                raise Failure(400, "strict_dynamic_mapping_exception", reason)
            continue
        if value is None:
            continue
        kind = spec.get("type")
        if kind == "dense_vector":
            vector = np.asarray(value, dtype=np.float64)
            if vector.shape != (spec.get("dims"),):
                raise Failure(
                    400, "document_parsing_exception",
                    f"The [dense_vector] field [{name}] in doc [document with id '{doc_id}'] has a different number of "
                    f"dimensions [{vector.size}] than defined in the mapping [{spec.get('dims')}]",
                )  # fmt: skip
            if spec.get("similarity", "cosine") == "cosine" and not vector.any():
                reason = "The [cosine] similarity does not support vectors with zero magnitude."
                raise Failure(400, "document_parsing_exception", reason)
        elif kind == "nested":
            _validate_nested(name, spec, value, strict)
        elif kind in ("date", "date_nanos"):
            for item in value if isinstance(value, list) else [value]:
                try:
                    nanos = dsl.epoch_nanos(item, kind)
                except dsl.QueryError:
                    reason = f"failed to parse field [{name}] of type [{kind}]"
                    raise Failure(400, "document_parsing_exception", reason) from None
                if kind == "date_nanos" and nanos < 0:
                    raise Failure(400, "document_parsing_exception", f"date[{item}] is before the epoch in 1970")


def _validate_nested(name: str, spec: Mapping[str, Any], value: Any, strict: bool) -> None:
    """The objects of a `nested` field: objects, with known properties (when strict), numbers in numeric ones."""
    properties = spec.get("properties", {})
    for item in value if isinstance(value, list) else [value]:
        if not isinstance(item, dict):
            raise Failure(400, "document_parsing_exception", f"object mapping for [{name}] tried to parse a value as object")
        for sub, sub_value in item.items():
            kind = (properties.get(sub) or {}).get("type")
            if kind is None and strict:
                reason = f"mapping set to strict, dynamic introduction of [{sub}] within [{name}] is not allowed"
                raise Failure(400, "strict_dynamic_mapping_exception", reason)
            numeric = isinstance(sub_value, int | float) and not isinstance(sub_value, bool)
            if kind in ("double", "long", "integer") and not numeric:
                raise Failure(400, "document_parsing_exception", f"failed to parse field [{name}.{sub}] of type [{kind}]")


def merge_mapping(mappings: dict[str, Any], update: Any) -> None:
    """The update-mapping API (`PUT /<index>/_mapping`): new fields are added, a field already
    mapped must be given exactly as it is (Elasticsearch refuses to change a field's type or
    analyzer), `_meta` is replaced as a whole, `dynamic` is set. Checked before anything changes."""
    if not isinstance(update, dict):
        raise Failure(400, "action_request_validation_exception", "Validation Failed: 1: mapping source is missing;")
    unknown = set(update) - {"properties", "_meta", "dynamic"}
    if unknown:
        raise Failure(400, "mapper_parsing_exception", f"fake: unsupported mapping keys {sorted(unknown)}")
    properties = mappings.get("properties", {})
    added = update.get("properties") or {}
    for name, spec in added.items():
        old = properties.get(name)
        if old is not None and old != spec:
            if old.get("type", "object") != spec.get("type", "object"):
                reason = f"mapper [{name}] cannot be changed from type [{old.get('type')}] to [{spec.get('type')}]"
            else:
                reason = f"Mapper for [{name}] conflicts with existing mapper: {old} != {spec}"
            raise Failure(400, "illegal_argument_exception", reason)
        if spec.get("type") == "dense_vector" and not isinstance(spec.get("dims"), int):
            raise Failure(400, "mapper_parsing_exception", f"[dims] is required for dense_vector field [{name}]")
    mappings.setdefault("properties", {}).update(copy.deepcopy(added))
    if "_meta" in update:
        mappings["_meta"] = copy.deepcopy(update["_meta"])
    if "dynamic" in update:
        mappings["dynamic"] = update["dynamic"]


def check_version(index: Index, doc_id: str, params: Mapping[str, Any]) -> None:
    if "if_seq_no" not in params:
        return
    current = index.versions.get(doc_id)
    if current is None or str(current[1]) != str(params["if_seq_no"]) or str(params.get("if_primary_term", 1)) != "1":
        seq = current[1] if current else -2
        raise Failure(
            409, "version_conflict_engine_exception",
            f"[{doc_id}]: version conflict, required seqNo [{params['if_seq_no']}], current document has seqNo [{seq}]",
        )  # fmt: skip


def document_meta(name: str, index: Index, doc_id: str) -> dict[str, Any]:
    version, seq_no = index.versions[doc_id]
    return {"_index": name, "_id": doc_id, "_version": version, "_seq_no": seq_no, "_primary_term": 1}


def merge(source: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """Elasticsearch's partial-update merge: objects merge key by key, everything else is replaced."""
    merged = copy.deepcopy(dict(source))
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def source_params(params: Mapping[str, str]) -> tuple[list[str] | None, list[str] | None]:
    includes = params.get("_source_includes")
    excludes = params.get("_source_excludes")
    return (includes.split(",") if includes else None), (excludes.split(",") if excludes else None)


def source_option(option: Any, params: Mapping[str, str]) -> tuple[Any, list[str] | None]:
    """(includes | None | False, excludes) from the body's `_source` and the query string."""
    if option is False:
        return False, None
    if isinstance(option, Mapping):
        return option.get("includes"), option.get("excludes")
    if isinstance(option, list):
        return option, None
    return source_params(params)


def hits_response(name: str, hits: list[dict[str, Any]]) -> dict[str, Any]:
    shaped = [{"_index": name, "_score": None, **hit} for hit in hits]
    return {"took": 1, "timed_out": False, "_shards": SHARDS,
            "hits": {"total": {"value": len(shaped), "relation": "eq"}, "max_score": None, "hits": shaped}}  # fmt: skip
