"""The indices behind `FakeElasticsearch`: documents, aliases and mappings, and the routes that act on them.

Plain state and request handling without HTTP, locking or scripting: the server in
`fake_elasticsearch` holds its lock around every call and keeps the recorded requests. What
needs no state (mapping checks, merges, `_source` options) is in `_fake_es_documents`.
"""

from __future__ import annotations

import copy
import fnmatch
import itertools
import re
from collections import deque
from collections.abc import Mapping
from typing import Any

from memoryscope.testing import _fake_es_search as dsl
from memoryscope.testing import _fake_es_sorting as sorting
from memoryscope.testing._fake_es_aggregations import aggregate
from memoryscope.testing._fake_es_documents import (
    SHARDS,
    Failure,
    Index,
    check_version,
    document_meta,
    hits_response,
    merge,
    merge_mapping,
    source_option,
    source_params,
    validate_document,
)

__all__ = ["FakeCluster"]

_ROUTE = re.compile(r"^/(?P<index>[^/_][^/]*)(?:/(?P<action>_[a-z_]+)(?:/(?P<id>[^/]+))?)?$")


class FakeCluster:
    """Indices and aliases, and the answer to each request that reaches them."""

    def __init__(self, max_result_window: int) -> None:
        self.max_result_window = max_result_window
        self.indices: dict[str, Index] = {}
        self.aliases: dict[str, set[str]] = {}  # alias -> its indices
        self.item_failures: dict[str, tuple[int, str, str]] = {}  # doc id -> a bulk item's (status, type, reason)
        self.scripted: deque[list[dict[str, Any]]] = deque()  # hits the next searches answer
        self.seq = itertools.count(1)

    def route(self, method: str, path: str, params: dict[str, str], body: Any) -> tuple[int, Any]:
        if path == "/" and method in ("GET", "HEAD"):
            return 200, {"name": "fake", "cluster_name": "fake", "version": {"number": "8.13.4"}}
        if path == "/_aliases" and method == "POST":
            return 200, self._update_aliases(body or {})
        route = _ROUTE.match(path)
        if route is None:
            raise Failure(400, "illegal_argument_exception", f"fake: no route for {method} {path}")
        name, action, doc_id = route.group("index"), route.group("action"), route.group("id")
        if action is None:
            return self._index_admin(method, name, params, body)
        name = self._resolve(name)
        if action == "_bulk" and method in ("POST", "PUT"):
            return 200, self._bulk(name, body if isinstance(body, list) else [])
        if action == "_mget" and name not in self.indices:  # each document fails on its own, the request does not
            return 200, self._mget_missing(name, body or {})
        index = self._existing(name)
        handlers = {
            ("_mapping", "GET"): lambda: {name: {"mappings": copy.deepcopy(index.mappings)}},
            ("_mapping", "PUT"): lambda: self._put_mapping(index, body),
            ("_mapping", "POST"): lambda: self._put_mapping(index, body),
            ("_mget", "POST"): lambda: self._mget(name, index, params, body or {}),
            ("_mget", "GET"): lambda: self._mget(name, index, params, body or {}),
            ("_search", "POST"): lambda: self._search(name, index, params, body or {}),
            ("_search", "GET"): lambda: self._search(name, index, params, body or {}),
            ("_count", "POST"): lambda: {"count": len(self._matching(index, (body or {}).get("query"))), "_shards": SHARDS},
            ("_count", "GET"): lambda: {"count": len(self._matching(index, (body or {}).get("query"))), "_shards": SHARDS},
            ("_delete_by_query", "POST"): lambda: self._delete_by_query(index, body or {}),
            ("_refresh", "POST"): lambda: {"_shards": SHARDS},
            ("_refresh", "GET"): lambda: {"_shards": SHARDS},
        }
        if action == "_doc" and doc_id is not None and method in ("PUT", "POST"):
            return self._index_document(name, index, doc_id, body, params)
        if action == "_update" and doc_id is not None and method == "POST":
            return 200, self._update(name, index, doc_id, body or {}, params)
        handler = handlers.get((action, method))
        if handler is None:
            raise Failure(400, "illegal_argument_exception", f"fake: no route for {method} {path}")
        return 200, handler()

    def _put_mapping(self, index: Index, body: Any) -> dict[str, Any]:
        merge_mapping(index.mappings, body)
        return {"acknowledged": True}

    def _resolve(self, name: str) -> str:
        """The index a name stands for: itself, or the one index of an alias."""
        targets = self.aliases.get(name)
        if not targets:
            return name
        if len(targets) > 1:
            reason = (
                f"alias [{name}] has more than one index associated with it {sorted(targets)}, can't execute a single index op"
            )
            raise Failure(400, "illegal_argument_exception", reason)
        return next(iter(targets))

    def _update_aliases(self, body: Mapping[str, Any]) -> dict[str, Any]:
        actions = body.get("actions")
        if not isinstance(actions, list) or not actions:
            raise Failure(400, "action_request_validation_exception", "Validation Failed: 1: no actions specified;")
        indices = dict(self.indices)
        aliases = {alias: set(targets) for alias, targets in self.aliases.items()}
        # Elasticsearch runs every remove_index first, wherever it sits in the list
        ordered = [a for a in actions if "remove_index" in a] + [a for a in actions if "remove_index" not in a]
        for action in ordered:
            ((kind, spec),) = action.items()
            index, alias = spec.get("index"), spec.get("alias")
            if kind in ("remove_index", "add") and index in aliases:
                reason = (
                    f"The provided expression [{index}] matches an alias, specify the corresponding concrete indices instead."
                )
                raise Failure(400, "illegal_argument_exception", reason)
            if index not in indices:
                raise Failure(404, "index_not_found_exception", f"no such index [{index}]")
            if kind == "remove_index":
                del indices[index]
                for targets in aliases.values():
                    targets.discard(index)
            elif kind == "add":
                if alias in indices:
                    reason = f"Invalid alias name [{alias}]: an index or data stream exists with the same name as the alias"
                    raise Failure(400, "invalid_alias_name_exception", reason)
                aliases.setdefault(str(alias), set()).add(index)
            elif kind == "remove":
                if index not in aliases.get(str(alias), set()):
                    raise Failure(404, "aliases_not_found_exception", f"aliases [{alias}] missing")
                aliases[str(alias)].discard(index)
            else:
                raise Failure(400, "x_content_parse_exception", f"fake: unknown alias action [{kind}]")
        self.indices = indices
        self.aliases = {alias: targets for alias, targets in aliases.items() if targets}
        return {"acknowledged": True, "errors": False}

    def _existing(self, name: str) -> Index:
        index = self.indices.get(name)
        if index is None:
            raise Failure(404, "index_not_found_exception", f"no such index [{name}]")
        return index

    def _index_admin(self, method: str, name: str, params: Mapping[str, str], body: Any) -> tuple[int, Any]:
        if method == "HEAD":
            return (200 if name in self.indices or name in self.aliases else 404), None
        if method == "PUT":
            if name in self.indices:
                raise Failure(400, "resource_already_exists_exception", f"index [{name}/fakeuuid] already exists")
            if name in self.aliases:
                raise Failure(400, "invalid_index_name_exception", f"Invalid index name [{name}], already exists as alias")
            mappings = (body or {}).get("mappings", {})
            for prop, spec in mappings.get("properties", {}).items():
                if spec.get("type") == "dense_vector" and not isinstance(spec.get("dims"), int):
                    raise Failure(400, "mapper_parsing_exception", f"[dims] is required for dense_vector field [{prop}]")
            self.indices[name] = Index(copy.deepcopy(mappings))
            return 200, {"acknowledged": True, "shards_acknowledged": True, "index": name}
        if method == "DELETE":
            if name in self.aliases:
                reason = f"The provided expression [{name}] matches an alias, specify the corresponding concrete indices instead."
                raise Failure(400, "illegal_argument_exception", reason)
            if name not in self.indices and params.get("ignore_unavailable") == "true":
                return 200, {"acknowledged": True}
            self._existing(name)
            del self.indices[name]
            for targets in self.aliases.values():
                targets.discard(name)
            self.aliases = {alias: targets for alias, targets in self.aliases.items() if targets}
            return 200, {"acknowledged": True}
        if method == "GET":
            names = [known for known in self.indices if fnmatch.fnmatchcase(known, name)] if "*" in name else [name]
            names = [concrete for known in names for concrete in sorted(self.aliases.get(known, {known}))]
            if params.get("ignore_unavailable") == "true":
                names = [known for known in names if known in self.indices]
            found = {known: {"mappings": copy.deepcopy(self._existing(known).mappings), "settings": {}} for known in names}
            return 200, found
        raise Failure(405, "method_not_allowed", f"fake: {method} /{name}")

    # -- documents -------------------------------------------------------------------------

    def _put(self, index: Index, doc_id: str, source: Any, params: Mapping[str, str]) -> tuple[str, int, int]:
        check_version(index, doc_id, params)
        validate_document(index, doc_id, source)
        version = index.versions.get(doc_id, (0, 0))[0] + 1
        result = "updated" if doc_id in index.documents else "created"
        index.documents[doc_id] = copy.deepcopy(source)
        index.versions[doc_id] = (version, next(self.seq))
        return result, version, index.versions[doc_id][1]

    def _index_document(self, name: str, index: Index, doc_id: str, body: Any, params: Mapping[str, str]) -> tuple[int, Any]:
        result, _, _ = self._put(index, doc_id, body, params)
        return (201 if result == "created" else 200), {**document_meta(name, index, doc_id), "result": result, "_shards": SHARDS}

    def _update(self, name: str, index: Index, doc_id: str, body: Mapping[str, Any], params: Mapping[str, str]) -> dict[str, Any]:
        if set(body) - {"doc", "doc_as_upsert", "detect_noop"}:
            raise Failure(400, "x_content_parse_exception", f"fake: unsupported update keys {sorted(set(body) - {'doc'})}")
        if doc_id not in index.documents:
            raise Failure(404, "document_missing_exception", f"[{doc_id}]: document missing")
        merged = merge(index.documents[doc_id], body.get("doc") or {})
        if merged == index.documents[doc_id]:
            check_version(index, doc_id, params)
            return {**document_meta(name, index, doc_id), "result": "noop"}
        self._put(index, doc_id, merged, params)
        return {**document_meta(name, index, doc_id), "result": "updated", "_shards": SHARDS}

    def _bulk(self, name: str, lines: list[Any]) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        position = 0
        while position < len(lines):
            action_line = lines[position]
            position += 1
            ((action, meta),) = action_line.items()
            index_name = self._resolve(meta.get("_index", name))
            doc_id = str(meta.get("_id"))
            source = None
            if action in ("index", "create", "update"):
                source = lines[position]
                position += 1
            result: dict[str, Any] = {"_index": index_name, "_id": doc_id}
            try:
                if doc_id in self.item_failures:
                    raise Failure(*self.item_failures[doc_id])
                index = self.indices.setdefault(index_name, Index({})) if action != "delete" else self._existing(index_name)
                if action == "delete":
                    check_version(index, doc_id, meta)
                    if doc_id in index.documents:
                        result.update(document_meta(index_name, index, doc_id))
                        del index.documents[doc_id]
                        result.update(result="deleted", status=200)
                    else:
                        result.update(result="not_found", status=404)
                elif action == "update":
                    guard = {key: meta[key] for key in ("if_seq_no", "if_primary_term") if key in meta}
                    result.update(self._update(index_name, index, doc_id, source or {}, guard), status=200)
                else:
                    if action == "create" and doc_id in index.documents:
                        reason = f"[{doc_id}]: version conflict, document already exists"
                        raise Failure(409, "version_conflict_engine_exception", reason)
                    guard = {key: meta[key] for key in ("if_seq_no", "if_primary_term") if key in meta}
                    outcome, _, _ = self._put(index, doc_id, source, guard)
                    status = 201 if outcome == "created" else 200
                    result.update(document_meta(index_name, index, doc_id), result=outcome, status=status)
            except Failure as failure:
                result.update(status=failure.status, error={"type": failure.error_type, "reason": failure.reason})
            items.append({action: result})
        return {"took": 1, "errors": any("error" in item[next(iter(item))] for item in items), "items": items}

    def _mget(self, name: str, index: Index, params: Mapping[str, str], body: Mapping[str, Any]) -> dict[str, Any]:
        ids = body.get("ids") or [doc.get("_id") for doc in body.get("docs", [])]
        includes, excludes = source_params(params)
        docs = []
        for doc_id in ids:
            if doc_id in index.documents:
                source = sorting.filter_source(index.documents[doc_id], includes, excludes)
                docs.append({**document_meta(name, index, doc_id), "found": True, "_source": source})
            else:
                docs.append({"_index": name, "_id": doc_id, "found": False})
        return {"docs": docs}

    @staticmethod
    def _mget_missing(name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """`_mget` on an index that does not exist: each document answers the error (HTTP 200)."""
        ids = body.get("ids") or [doc.get("_id") for doc in body.get("docs", [])]
        cause = {"type": "index_not_found_exception", "reason": f"no such index [{name}]", "index": name}
        return {"docs": [{"_index": name, "_id": doc_id, "error": {"root_cause": [cause], **cause}} for doc_id in ids]}

    # -- searching ---------------------------------------------------------------------------

    def _matching(self, index: Index, query: Any) -> list[str]:
        query = query or {"match_all": {}}
        return [doc_id for doc_id, doc in index.documents.items() if dsl.matches(query, doc, index.mappings, doc_id)]

    def _delete_by_query(self, index: Index, body: Mapping[str, Any]) -> dict[str, Any]:
        doomed = self._matching(index, body.get("query"))
        for doc_id in doomed:
            del index.documents[doc_id]
        return {"took": 1, "timed_out": False, "total": len(doomed), "deleted": len(doomed), "batches": 1,
                "version_conflicts": 0, "noops": 0, "failures": []}  # fmt: skip

    def _search(self, name: str, index: Index, params: Mapping[str, str], body: Mapping[str, Any]) -> dict[str, Any]:
        known = {"query", "knn", "size", "from", "sort", "search_after", "_source", "track_total_hits", "aggs", "aggregations",
                 "seq_no_primary_term"}  # fmt: skip
        if set(body) - known:
            raise dsl.QueryError(f"fake: unsupported search keys {sorted(set(body) - known)}")
        size, start = int(body.get("size", 10)), int(body.get("from", 0))
        if start + size > self.max_result_window:
            raise dsl.QueryError(
                f"Result window is too large, from + size must be less than or equal to: [{self.max_result_window}] "
                f"but was [{start + size}].", "illegal_argument_exception",
            )  # fmt: skip
        if self.scripted:
            return hits_response(name, self.scripted.popleft())
        if "knn" in body and "query" in body:
            raise dsl.QueryError("fake: `knn` together with `query` is not supported")
        if "knn" in body:
            scored = dsl.knn_hits(body["knn"], index.documents, index.mappings)
        else:
            query = body.get("query") or {"match_all": {}}
            stats = dsl.search_stats(index.documents, index.mappings)
            documents = index.documents
            matching = self._matching(index, query)
            scored = [(doc_id, dsl.score(query, documents[doc_id], index.mappings, stats)) for doc_id in matching]
            scored.sort(key=lambda pair: -pair[1])
        sort = sorting.parse_sort(body["sort"]) if "sort" in body else None
        hits: list[dict[str, Any]] = []
        for doc_id, value in scored:
            hit: dict[str, Any] = {"_index": name, "_id": doc_id, "_score": None if sort else value}
            if body.get("seq_no_primary_term") is True:
                hit.update(_seq_no=index.versions[doc_id][1], _primary_term=1)
            if sort:
                hit["sort"] = sorting.sort_values(index.documents[doc_id], sort, index.mappings)
            hits.append(hit)
        if sort:
            hits.sort(key=lambda hit: sorting.sort_key(hit["sort"], sort))
            if "search_after" in body:
                after = sorting.sort_key(body["search_after"], sort)
                hits = [hit for hit in hits if sorting.sort_key(hit["sort"], sort) > after]
        elif "search_after" in body:
            raise dsl.QueryError("fake: search_after needs sort")
        total = len(hits)
        hits = hits[start : start + size]
        includes, excludes = source_option(body.get("_source"), params)
        for hit in hits:
            if includes is not False:
                hit["_source"] = sorting.filter_source(index.documents[hit["_id"]], includes or None, excludes)
        response = {"took": 1, "timed_out": False, "_shards": SHARDS,
                    "hits": {"total": {"value": total, "relation": "eq"}, "max_score": None, "hits": hits}}  # fmt: skip
        aggs = body.get("aggs", body.get("aggregations"))
        if aggs is not None:
            if "knn" in body:
                raise dsl.QueryError("fake: aggregations with `knn` are not supported")
            matched = [index.documents[doc_id] for doc_id, _ in scored]
            response["aggregations"] = aggregate(aggs, matched, index.mappings)
        return response
