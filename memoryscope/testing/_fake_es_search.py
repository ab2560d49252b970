"""What `fake_elasticsearch` knows of the Query DSL: matching, BM25, kNN.

A subset, written from the Elasticsearch 8.x reference, enough for `elasticsearch_memory_store`:
queries `match_all`, `bool` (filter / must / should / must_not), `term`, `terms`, `range`,
`exists`, `ids`, `nested` (each object of a `nested` field matched on its own; the field's
values are not visible outside a `nested` query, as in Elasticsearch), `match` (`operator` or /
and), `multi_match` (most_fields / best_fields); the `knn` search option
(exact cosine over the filtered documents, scored `(1 + cosine) / 2` as Elasticsearch does).
Sorting, `search_after` and `_source` filtering are in `_fake_es_sorting`, aggregations in
`_fake_es_aggregations`. Anything else is refused with a 400 `parsing_exception`, so a body the
fake does not understand fails loudly instead of matching everything.

Text is analysed by the field's `analyzer`, at index and query time alike: `whitespace` splits
on whitespace and changes nothing else, as Elasticsearch's does; any other is approximated like
the `standard` analyzer for Latin words (lower-cased runs of letters and digits) and CJK (one
token per character). BM25 uses Lucene's formula
(k1 = 1.2, b = 0.75) with statistics over the whole index (one shard); kNN is exact.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

import numpy as np

__all__ = [
    "QueryError",
    "analyze",
    "single",
    "field_analyzer",
    "matches",
    "score",
    "knn_hits",
]

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}_]+")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class QueryError(Exception):
    """A body the fake refuses: becomes an HTTP 400 with `error_type` and the message as reason."""

    def __init__(self, reason: str, error_type: str = "parsing_exception"):
        self.error_type = error_type
        super().__init__(reason)


def analyze(text: Any, analyzer: str = "standard") -> list[str]:
    """The tokens `analyzer` makes of `text` (see the module for what is approximated)."""
    if text is None:
        return []
    if analyzer == "whitespace":
        return str(text).split()
    return [token.lower() for token in _TOKEN.findall(str(text))]


def field_analyzer(mappings: Mapping[str, Any], field: str) -> str:
    """The analyzer of a text field (`key.text` finds the sub-field's); "standard" when unset."""
    name, _, sub = field.partition(".")
    spec = _properties(mappings).get(name) or {}
    if sub:
        spec = spec.get("fields", {}).get(sub) or {}
    return str(spec.get("analyzer", "standard"))


def _properties(mappings: Mapping[str, Any]) -> Mapping[str, Any]:
    return mappings.get("properties", {})


def field_type(mappings: Mapping[str, Any], field: str) -> str | None:
    """The mapped type of `field` (`key.text` finds the `text` sub-field of `key`, and
    `meta_index.key` the `key` property of the object field `meta_index`)."""
    exact = _properties(mappings).get(field)  # inside a `nested` query properties go by full name
    if exact is not None:
        return str(exact.get("type", "object"))
    name, _, sub = field.partition(".")
    spec = _properties(mappings).get(name)
    if spec is None:
        return None
    if sub:
        spec = spec.get("fields", {}).get(sub) or spec.get("properties", {}).get(sub)
        return None if spec is None else spec.get("type", "object")
    return spec.get("type", "object")


def field_values(document: Mapping[str, Any], field: str) -> list[Any]:
    """The values of `field` in a `_source` (a sub-field reads its parent's value; objects are not
    values: a `nested` field's are searched by a `nested` query only)."""
    value = document[field] if field in document else document.get(field.partition(".")[0])
    if value is None:
        return []
    return [item for item in (value if isinstance(value, list) else [value]) if not isinstance(item, Mapping)]


def epoch_nanos(value: Any, kind: str) -> int:
    """A date as Elasticsearch keeps it: epoch nanoseconds (`date_nanos`) or milliseconds (`date`),
    truncated; both in nanoseconds here so comparisons mirror the field's resolution."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        moment_ns = int(value) * 1_000_000  # epoch_millis
    else:
        try:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise QueryError(f"failed to parse date field [{value}]", "parse_exception") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        delta = moment - _EPOCH
        moment_ns = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
    if kind == "date":
        return moment_ns // 1_000_000 * 1_000_000
    return moment_ns


def _comparable(value: Any, kind: str | None) -> Any:
    if kind in ("date", "date_nanos"):
        return epoch_nanos(value, kind)
    return value


# ---- matching and scoring ----------------------------------------------------------------------


def single(query: Mapping[str, Any], name: str) -> tuple[str, Any]:
    """The one `(key, value)` of a query object that has exactly one."""
    if not isinstance(query, Mapping) or len(query) != 1:
        raise QueryError(f"[{name}] query malformed, expected one field, got {query!r}")
    return next(iter(query.items()))


def _clauses(value: Any) -> list[Mapping[str, Any]]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def matches(query: Mapping[str, Any], document: Mapping[str, Any], mappings: Mapping[str, Any], doc_id: str = "") -> bool:
    """Whether `document` (with id `doc_id`) matches `query`; QueryError for queries the fake does not know."""
    kind, spec = single(query, "query")
    if kind == "match_all":
        return True
    if kind == "bool":
        unknown = set(spec) - {"filter", "must", "should", "must_not", "minimum_should_match"}
        if unknown:
            raise QueryError(f"[bool] unknown keys {sorted(unknown)}")
        required = _clauses(spec.get("filter")) + _clauses(spec.get("must"))
        if not all(matches(clause, document, mappings, doc_id) for clause in required):
            return False
        if any(matches(clause, document, mappings, doc_id) for clause in _clauses(spec.get("must_not"))):
            return False
        should = _clauses(spec.get("should"))
        needed = int(spec.get("minimum_should_match", 0 if required else 1 if should else 0))
        return sum(matches(clause, document, mappings, doc_id) for clause in should) >= needed
    if kind in ("term", "terms"):
        field, wanted = single(spec, kind)
        if kind == "term":
            wanted = [wanted["value"] if isinstance(wanted, Mapping) else wanted]
        elif not isinstance(wanted, list):
            raise QueryError(f"[terms] query expects a list for [{field}]")
        present = field_values(document, field)
        return any(value == item for value in present for item in wanted)
    if kind == "range":
        field, bounds = single(spec, "range")
        unknown = set(bounds) - {"gte", "gt", "lte", "lt", "format"}
        if unknown:
            raise QueryError(f"[range] unknown keys {sorted(unknown)}")
        field_kind = field_type(mappings, field)
        for value in field_values(document, field):
            current = _comparable(value, field_kind)
            checks = {
                "gte": lambda bound, current=current: current >= bound,
                "gt": lambda bound, current=current: current > bound,
                "lte": lambda bound, current=current: current <= bound,
                "lt": lambda bound, current=current: current < bound,
            }
            if all(checks[op](_comparable(bound, field_kind)) for op, bound in bounds.items() if op != "format"):
                return True
        return False
    if kind == "exists":
        return bool(field_values(document, spec["field"]))
    if kind == "ids":
        return doc_id in spec.get("values", [])
    if kind == "nested":
        return _nested_matches(spec, document, mappings, doc_id)
    if kind in ("match", "multi_match"):
        return _any_term(query, document, mappings)  # the default operator is `or`
    raise QueryError(f"unknown query [{kind}]")


def _nested_matches(spec: Mapping[str, Any], document: Mapping[str, Any], mappings: Mapping[str, Any], doc_id: str) -> bool:
    """Whether one object of the `nested` field `spec["path"]` matches `spec["query"]` on its own."""
    unknown = set(spec) - {"path", "query", "score_mode", "ignore_unmapped"}
    if unknown or "path" not in spec or "query" not in spec:
        raise QueryError(f"[nested] needs [path] and [query] and knows nothing else, got {sorted(spec)}")
    path = str(spec["path"])
    field = _properties(mappings).get(path) or {}
    if field.get("type") != "nested":
        raise QueryError(f"[nested] failed to find nested object under path [{path}]", "query_shard_exception")
    inner_mappings = {"properties": {f"{path}.{name}": sub for name, sub in field.get("properties", {}).items()}}
    objects = document.get(path) or []
    for item in objects if isinstance(objects, list) else [objects]:
        inner = {f"{path}.{name}": value for name, value in item.items()}
        if matches(spec["query"], inner, inner_mappings, doc_id):
            return True
    return False


def _any_term(query: Mapping[str, Any], document: Mapping[str, Any], mappings: Mapping[str, Any]) -> bool:
    text, fields, operator = _text_query(query)
    for field in fields:
        if field_type(mappings, field) != "text":
            raise QueryError(f"field [{field}] is not a text field in the fake's mapping", "query_shard_exception")
    for field in fields:
        analyzer = field_analyzer(mappings, field)
        terms = set(analyze(text, analyzer))
        present = set(analyze(" ".join(map(str, field_values(document, field))), analyzer))
        if terms and (terms <= present if operator == "and" else terms & present):
            return True
    return False


def _text_query(query: Mapping[str, Any]) -> tuple[str, list[str], str]:
    """`(query text, fields, operator)` of a `match` or `multi_match`."""
    kind, spec = single(query, "query")
    if kind == "match":
        field, value = single(spec, "match")
        if not isinstance(value, Mapping):
            return str(value), [field], "or"
        unknown = set(value) - {"query", "operator"}
        if unknown:
            raise QueryError(f"fake: [match] options {sorted(unknown)} are not supported")
        operator = str(value.get("operator", "or")).lower()
        if operator not in ("or", "and"):
            raise QueryError(f"[match] unknown operator [{operator}]")
        return str(value.get("query")), [field], operator
    if spec.get("type", "best_fields") not in ("best_fields", "most_fields"):
        raise QueryError(f"[multi_match] type [{spec.get('type')}] is not supported by the fake")
    return str(spec["query"]), list(spec["fields"]), "or"


class _Stats:
    """BM25 collection statistics per field over every document of the index."""

    def __init__(self, documents: Mapping[str, Mapping[str, Any]], mappings: Mapping[str, Any]):
        self.documents = documents
        self.mappings = mappings
        self._cache: dict[str, tuple[int, float, dict[str, int]]] = {}

    def field(self, field: str) -> tuple[int, float, dict[str, int]]:
        if field not in self._cache:
            lengths: list[int] = []
            frequency: dict[str, int] = {}
            analyzer = field_analyzer(self.mappings, field)
            for document in self.documents.values():
                tokens = analyze(" ".join(map(str, field_values(document, field))), analyzer)
                if tokens:
                    lengths.append(len(tokens))
                    for token in set(tokens):
                        frequency[token] = frequency.get(token, 0) + 1
            average = sum(lengths) / len(lengths) if lengths else 1.0
            self._cache[field] = (len(lengths), average, frequency)
        return self._cache[field]


def _bm25(text: str, field: str, document: Mapping[str, Any], stats: _Stats, k1: float = 1.2, b: float = 0.75) -> float:
    analyzer = field_analyzer(stats.mappings, field)
    tokens = analyze(" ".join(map(str, field_values(document, field))), analyzer)
    if not tokens:
        return 0.0
    count, average, frequency = stats.field(field)
    total = 0.0
    for term in analyze(text, analyzer):
        tf = tokens.count(term)
        if not tf:
            continue
        df = frequency.get(term, 1)
        idf = math.log(1 + (max(count, df) - df + 0.5) / (df + 0.5))
        total += idf * tf / (tf + k1 * (1 - b + b * len(tokens) / average))
    return total


def score(query: Mapping[str, Any], document: Mapping[str, Any], mappings: Mapping[str, Any], stats: _Stats) -> float:
    """The relevance score of a matching document (filters and term-level queries score 0)."""
    kind, spec = single(query, "query")
    if kind == "bool":
        return sum(score(clause, document, mappings, stats) for key in ("must", "should") for clause in _clauses(spec.get(key)))
    if kind in ("match", "multi_match"):
        text, fields, _ = _text_query(query)
        per_field = [_bm25(text, field, document, stats) for field in fields]
        most = kind == "match" or spec.get("type") == "most_fields"
        return sum(per_field) if most else max(per_field, default=0.0)
    return 0.0


def search_stats(documents: Mapping[str, Mapping[str, Any]], mappings: Mapping[str, Any]) -> _Stats:
    return _Stats(documents, mappings)


def knn_hits(
    knn: Mapping[str, Any], documents: Mapping[str, Mapping[str, Any]], mappings: Mapping[str, Any]
) -> list[tuple[str, float]]:
    """`(id, score)` of the `k` nearest filtered documents, best first (exact search)."""
    unknown = set(knn) - {"field", "query_vector", "k", "num_candidates", "filter", "similarity", "boost"}
    if unknown:
        raise QueryError(f"[knn] unknown keys {sorted(unknown)}")
    field, k, candidates = knn.get("field"), knn.get("k"), knn.get("num_candidates")
    spec = _properties(mappings).get(str(field), {})
    if spec.get("type") != "dense_vector" or not spec.get("index", True):
        raise QueryError(f"[knn] field [{field}] is not an indexed dense_vector field", "illegal_argument_exception")
    if not isinstance(k, int) or not isinstance(candidates, int) or k < 1:
        raise QueryError("[knn] needs integer [k] >= 1 and [num_candidates]", "illegal_argument_exception")
    if candidates < k:
        raise QueryError(f"[num_candidates] cannot be less than [k]; got {candidates} < {k}", "illegal_argument_exception")
    if candidates > 10_000:
        raise QueryError("[num_candidates] cannot exceed [10000]", "illegal_argument_exception")
    query = np.asarray(knn.get("query_vector"), dtype=np.float64)
    if query.shape != (spec.get("dims"),):
        raise QueryError(
            f"the query vector has {query.size} dimensions; the field has [{spec.get('dims')}]",
            "illegal_argument_exception",
        )
    norm = float(np.linalg.norm(query))
    if norm == 0.0:
        raise QueryError("The [cosine] similarity does not support vectors with zero magnitude.", "illegal_argument_exception")
    filters = _clauses(knn.get("filter"))
    scored = []
    for memory_id, document in documents.items():
        vector = document.get(str(field))
        if vector is None or not all(matches(clause, document, mappings, memory_id) for clause in filters):
            continue
        row = np.asarray(vector, dtype=np.float64)
        cosine = float(row @ query) / (float(np.linalg.norm(row)) * norm)
        scored.append((memory_id, (1.0 + cosine) / 2.0))
    scored.sort(key=lambda pair: -pair[1])
    return scored[:k]
