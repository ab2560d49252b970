"""What `fake_elasticsearch` knows of aggregations: `composite` of `terms` sources on keyword
fields (buckets in key order, paged by `after`); anything else is refused with a 400."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memoryscope.testing._fake_es_search import QueryError, field_type, field_values, single

__all__ = ["aggregate"]


def aggregate(aggs: Mapping[str, Any], documents: Sequence[Mapping[str, Any]], mappings: Mapping[str, Any]) -> dict[str, Any]:
    """The `aggregations` of a response: `composite` of `terms` sources only."""
    if not isinstance(aggs, Mapping):
        raise QueryError("[aggs] must be an object")
    return {name: _composite(name, spec, documents, mappings) for name, spec in aggs.items()}


def _composite(
    name: str, spec: Mapping[str, Any], documents: Sequence[Mapping[str, Any]], mappings: Mapping[str, Any]
) -> dict[str, Any]:
    if not isinstance(spec, Mapping) or set(spec) != {"composite"}:
        raise QueryError(f"fake: aggregation [{name}] must be a `composite` aggregation and nothing else")
    composite = spec["composite"]
    unknown = set(composite) - {"size", "sources", "after"}
    if unknown:
        raise QueryError(f"[composite] unknown keys {sorted(unknown)}")
    keys: list[tuple[str, str]] = []  # (key name, field)
    for source in composite.get("sources") or []:
        key_name, source_spec = single(source, "composite.sources")
        if not isinstance(source_spec, Mapping) or set(source_spec) != {"terms"}:
            raise QueryError(f"fake: composite source [{key_name}] must be `terms`")
        field = source_spec["terms"].get("field")
        if field_type(mappings, str(field)) != "keyword":
            raise QueryError(f"fake: composite terms on [{field}] needs a keyword field")
        keys.append((key_name, str(field)))
    if not keys:
        raise QueryError("[composite] [sources] cannot be empty")
    counts: dict[tuple[Any, ...], int] = {}
    for document in documents:
        values = tuple(field_values(document, field)[:1] for _, field in keys)
        if all(values):  # documents missing a source field make no bucket (missing_bucket: false)
            key = tuple(value[0] for value in values)
            counts[key] = counts.get(key, 0) + 1
    ordered = sorted(counts)
    after = composite.get("after")
    if after is not None:
        start = tuple(after[key_name] for key_name, _ in keys)
        ordered = [key for key in ordered if key > start]
    page = ordered[: int(composite.get("size", 10))]
    buckets = [{"key": dict(zip([key_name for key_name, _ in keys], key, strict=True)), "doc_count": counts[key]} for key in page]
    result: dict[str, Any] = {"buckets": buckets}
    if buckets:
        result["after_key"] = buckets[-1]["key"]
    return result
