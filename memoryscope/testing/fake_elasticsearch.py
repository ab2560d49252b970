"""A fake Elasticsearch 8.x server: real HTTP on 127.0.0.1, in-memory indices, every request recorded.

The real `elasticsearch` client talks to it (every answer carries `X-Elastic-Product:
Elasticsearch` and the `compatible-with=8` media type the 8.x client checks), so tests run the
real client and the real store code, and can pin the exact bodies sent::

    with FakeElasticsearch() as server, ElasticsearchMemoryStore(hosts=[server.url], embedding_model=model) as store:
        store.count(MemoryFilter("ann"))
        assert server.requests[-1].path == "/memoryscope_memory/_count"
        assert server.requests[-1].body == {"query": {"bool": {"filter": [{"term": {"user_name": "ann"}}]}}}

Endpoints: `HEAD|PUT|DELETE /<index>`, `GET /<index>/_mapping`, `POST /<index>/_bulk` (index,
create, delete and update actions), `POST /<index>/_mget`, `PUT /<index>/_doc/<id>`,
`POST /<index>/_update/<id>` (`doc` merged into `_source` object by object, as Elasticsearch
does), `POST /<index>/_search` (`query` or `knn`, `sort`, `search_after`, `from`/`size` within
`max_result_window`, `composite` aggregations of `terms` sources), `POST /<index>/_count`, `POST
/<index>/_delete_by_query`, `POST /<index>/_refresh`, `POST /_aliases` (`add`, `remove`,
`remove_index`, applied atomically, `remove_index` first), `GET /`. An alias of one index stands
for it in every per-index endpoint. `if_seq_no` / `if_primary_term` are honoured (409 on a
mismatch).
Mappings are enforced as far as the store relies on them: `dynamic: strict` rejects unknown
fields, `dense_vector` checks its dimension and refuses zero vectors for cosine, dates must parse.
Query semantics and their approximations are in `_fake_es_search`. Refresh is not modelled:
every write is visible at once (tests check the `refresh` parameter in `requests` instead).

Scripting for tests: `create_index` (an index made elsewhere, e.g. with another `_meta`),
`fail_items` (bulk items that fail, per document id), `script_search` (the next searches answer
these hits), `fail_next` (the next requests get an error status).

From a shell: `python -m memoryscope.testing.fake_elasticsearch --port 9200` (serves until Ctrl-C).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import fnmatch
import itertools
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import numpy as np

from memoryscope.testing import _fake_es_search as dsl

__all__ = ["FakeElasticsearch", "RecordedRequest"]

_MEDIA_TYPE = "application/vnd.elasticsearch+json;compatible-with=8"
_ROUTE = re.compile(r"^/(?P<index>[^/_][^/]*)(?:/(?P<action>_[a-z_]+)(?:/(?P<id>[^/]+))?)?$")


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it (credentials are not kept)."""

    method: str
    path: str
    params: dict[str, str]  # the query string
    body: Any  # parsed JSON; a list of parsed lines for NDJSON (`_bulk`); None when empty
    headers: dict[str, str]  # without Authorization
    auth_scheme: str | None  # "ApiKey", "Basic", ... from the Authorization header; None without one
    status: int


@dataclass
class _Index:
    mappings: dict[str, Any]
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    versions: dict[str, tuple[int, int]] = field(default_factory=dict)  # id -> (_version, _seq_no)


@dataclass(frozen=True)
class _Fault:
    status: int
    error_type: str
    reason: str
    action: str | None
    method: str | None

    def applies(self, method: str, path: str) -> bool:
        return (self.action is None or path.endswith(self.action)) and (self.method is None or method == self.method)


class _Failure(Exception):
    def __init__(self, status: int, error_type: str, reason: str):
        self.status, self.error_type, self.reason = status, error_type, reason
        super().__init__(reason)


def _error(status: int, error_type: str, reason: str) -> dict[str, Any]:
    cause = {"type": error_type, "reason": reason}
    return {"error": {"root_cause": [cause], **cause}, "status": status}


class FakeElasticsearch:
    """The server; a context manager that starts it on a free port and stops it on exit."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, max_result_window: int = 10_000) -> None:
        self.host = host
        self.requested_port = port
        self.max_result_window = max_result_window
        self._lock = threading.RLock()
        self._indices: dict[str, _Index] = {}
        self._aliases: dict[str, set[str]] = {}  # alias -> its indices
        self._requests: list[RecordedRequest] = []
        self._item_failures: dict[str, tuple[int, str, str]] = {}
        self._scripted: deque[list[dict[str, Any]]] = deque()
        self._faults: deque[_Fault] = deque()
        self._seq = itertools.count(1)
        self._connections: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeElasticsearch:
        if self._httpd is not None:
            raise RuntimeError("FakeElasticsearch is already running")
        httpd = ThreadingHTTPServer((self.host, self.requested_port), _Handler)
        httpd.fake = self  # type: ignore[attr-defined]  # how the handler finds its server
        self._httpd = httpd
        # a short poll interval: `stop()` waits up to one interval for the serving loop to notice
        self._thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), name="fake-elasticsearch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        with self._lock:
            for connection in list(self._connections):  # idle keep-alive connections: wake their threads
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeElasticsearch:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeElasticsearch is not running; use `with FakeElasticsearch() as server:`")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- scripting and inspection ----------------------------------------------------------

    def create_index(
        self, name: str, mappings: Mapping[str, Any], documents: Mapping[str, Mapping[str, Any]] | None = None
    ) -> None:
        """An index as if made by someone else (with any `_meta`), optionally with documents."""
        with self._lock:
            index = _Index(copy.deepcopy(dict(mappings)))
            for doc_id, source in (documents or {}).items():
                index.documents[doc_id] = copy.deepcopy(dict(source))
                index.versions[doc_id] = (1, next(self._seq))
            self._indices[name] = index

    def documents(self, index: str) -> dict[str, dict[str, Any]]:
        """A copy of an index's (or a one-index alias's) documents by id ({} when there is no such index)."""
        with self._lock:
            targets = self._aliases.get(index, {index})
            found = self._indices.get(next(iter(targets))) if len(targets) == 1 else None
            return copy.deepcopy(found.documents) if found else {}

    def index_names(self) -> list[str]:
        """The concrete indices (not aliases)."""
        with self._lock:
            return sorted(self._indices)

    def aliases(self) -> dict[str, list[str]]:
        """Each alias and the indices it points at."""
        with self._lock:
            return {alias: sorted(targets) for alias, targets in sorted(self._aliases.items())}

    def fail_items(self, failures: Mapping[str, str | tuple[str, str]], status: int = 400) -> None:
        """Bulk items for these document ids fail with `reason` (or `(error_type, reason)`)."""
        with self._lock:
            for doc_id, failure in failures.items():
                error_type, reason = failure if isinstance(failure, tuple) else ("mapper_parsing_exception", failure)
                self._item_failures[doc_id] = (status, error_type, reason)

    def script_search(self, *hit_lists: list[dict[str, Any]]) -> None:
        """The next searches answer these hits (each `{"_id", "_score", "_source"}`), one list per search."""
        with self._lock:
            self._scripted.extend(list(hits) for hits in hit_lists)

    def fail_next(
        self,
        count: int = 1,
        status: int = 500,
        error_type: str = "fake_failure",
        reason: str = "injected",
        *,
        action: str | None = None,
        method: str | None = None,
    ) -> None:
        """The next `count` requests get an error; only those whose path ends with `action` and
        whose method is `method`, when given (the others are answered normally meanwhile)."""
        with self._lock:
            self._faults.extend([_Fault(status, error_type, reason, action, method)] * count)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every request so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def requests_to(self, action: str) -> list[RecordedRequest]:
        """The requests whose path ends with `action` (e.g. "_search", "_bulk")."""
        return [request for request in self.requests if request.path.rstrip("/").endswith(action)]

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    # -- answering (called from handler threads) -------------------------------------------

    def answer(self, method: str, path: str, params: dict[str, str], body: Any) -> tuple[int, Any]:
        with self._lock:
            if self._faults and self._faults[0].applies(method, path):
                fault = self._faults.popleft()
                return fault.status, _error(fault.status, fault.error_type, fault.reason)
            try:
                return self._route(method, path, params, body)
            except _Failure as failure:
                return failure.status, _error(failure.status, failure.error_type, failure.reason)
            except dsl.QueryError as error:
                return 400, _error(400, error.error_type, str(error))

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _route(self, method: str, path: str, params: dict[str, str], body: Any) -> tuple[int, Any]:
        if path == "/" and method in ("GET", "HEAD"):
            return 200, {"name": "fake", "cluster_name": "fake", "version": {"number": "8.13.4"}}
        if path == "/_aliases" and method == "POST":
            return 200, self._update_aliases(body or {})
        route = _ROUTE.match(path)
        if route is None:
            raise _Failure(400, "illegal_argument_exception", f"fake: no route for {method} {path}")
        name, action, doc_id = route.group("index"), route.group("action"), route.group("id")
        if action is None:
            return self._index_admin(method, name, params, body)
        name = self._resolve(name)
        if action == "_bulk" and method in ("POST", "PUT"):
            return 200, self._bulk(name, body if isinstance(body, list) else [])
        index = self._existing(name)
        handlers = {
            ("_mapping", "GET"): lambda: {name: {"mappings": copy.deepcopy(index.mappings)}},
            ("_mget", "POST"): lambda: self._mget(name, index, params, body or {}),
            ("_mget", "GET"): lambda: self._mget(name, index, params, body or {}),
            ("_search", "POST"): lambda: self._search(name, index, params, body or {}),
            ("_search", "GET"): lambda: self._search(name, index, params, body or {}),
            ("_count", "POST"): lambda: {"count": len(self._matching(index, (body or {}).get("query"))), "_shards": _SHARDS},
            ("_count", "GET"): lambda: {"count": len(self._matching(index, (body or {}).get("query"))), "_shards": _SHARDS},
            ("_delete_by_query", "POST"): lambda: self._delete_by_query(index, body or {}),
            ("_refresh", "POST"): lambda: {"_shards": _SHARDS},
            ("_refresh", "GET"): lambda: {"_shards": _SHARDS},
        }
        if action == "_doc" and doc_id is not None and method in ("PUT", "POST"):
            return self._index_document(name, index, doc_id, body, params)
        if action == "_update" and doc_id is not None and method == "POST":
            return 200, self._update(name, index, doc_id, body or {}, params)
        handler = handlers.get((action, method))
        if handler is None:
            raise _Failure(400, "illegal_argument_exception", f"fake: no route for {method} {path}")
        return 200, handler()

    def _resolve(self, name: str) -> str:
        """The index a name stands for: itself, or the one index of an alias."""
        targets = self._aliases.get(name)
        if not targets:
            return name
        if len(targets) > 1:
            reason = (
                f"alias [{name}] has more than one index associated with it {sorted(targets)}, can't execute a single index op"
            )
            raise _Failure(400, "illegal_argument_exception", reason)
        return next(iter(targets))

    def _update_aliases(self, body: Mapping[str, Any]) -> dict[str, Any]:
        actions = body.get("actions")
        if not isinstance(actions, list) or not actions:
            raise _Failure(400, "action_request_validation_exception", "Validation Failed: 1: no actions specified;")
        indices = dict(self._indices)
        aliases = {alias: set(targets) for alias, targets in self._aliases.items()}
        # Elasticsearch runs every remove_index first, wherever it sits in the list
        ordered = [a for a in actions if "remove_index" in a] + [a for a in actions if "remove_index" not in a]
        for action in ordered:
            ((kind, spec),) = action.items()
            index, alias = spec.get("index"), spec.get("alias")
            if kind in ("remove_index", "add") and index in aliases:
                reason = (
                    f"The provided expression [{index}] matches an alias, specify the corresponding concrete indices instead."
                )
                raise _Failure(400, "illegal_argument_exception", reason)
            if index not in indices:
                raise _Failure(404, "index_not_found_exception", f"no such index [{index}]")
            if kind == "remove_index":
                del indices[index]
                for targets in aliases.values():
                    targets.discard(index)
            elif kind == "add":
                if alias in indices:
                    reason = f"Invalid alias name [{alias}]: an index or data stream exists with the same name as the alias"
                    raise _Failure(400, "invalid_alias_name_exception", reason)
                aliases.setdefault(str(alias), set()).add(index)
            elif kind == "remove":
                if index not in aliases.get(str(alias), set()):
                    raise _Failure(404, "aliases_not_found_exception", f"aliases [{alias}] missing")
                aliases[str(alias)].discard(index)
            else:
                raise _Failure(400, "x_content_parse_exception", f"fake: unknown alias action [{kind}]")
        self._indices = indices
        self._aliases = {alias: targets for alias, targets in aliases.items() if targets}
        return {"acknowledged": True, "errors": False}

    def _existing(self, name: str) -> _Index:
        index = self._indices.get(name)
        if index is None:
            raise _Failure(404, "index_not_found_exception", f"no such index [{name}]")
        return index

    def _index_admin(self, method: str, name: str, params: Mapping[str, str], body: Any) -> tuple[int, Any]:
        if method == "HEAD":
            return (200 if name in self._indices or name in self._aliases else 404), None
        if method == "PUT":
            if name in self._indices:
                raise _Failure(400, "resource_already_exists_exception", f"index [{name}/fakeuuid] already exists")
            if name in self._aliases:
                raise _Failure(400, "invalid_index_name_exception", f"Invalid index name [{name}], already exists as alias")
            mappings = (body or {}).get("mappings", {})
            for prop, spec in mappings.get("properties", {}).items():
                if spec.get("type") == "dense_vector" and not isinstance(spec.get("dims"), int):
                    raise _Failure(400, "mapper_parsing_exception", f"[dims] is required for dense_vector field [{prop}]")
            self._indices[name] = _Index(copy.deepcopy(mappings))
            return 200, {"acknowledged": True, "shards_acknowledged": True, "index": name}
        if method == "DELETE":
            if name in self._aliases:
                reason = f"The provided expression [{name}] matches an alias, specify the corresponding concrete indices instead."
                raise _Failure(400, "illegal_argument_exception", reason)
            if name not in self._indices and params.get("ignore_unavailable") == "true":
                return 200, {"acknowledged": True}
            self._existing(name)
            del self._indices[name]
            for targets in self._aliases.values():
                targets.discard(name)
            self._aliases = {alias: targets for alias, targets in self._aliases.items() if targets}
            return 200, {"acknowledged": True}
        if method == "GET":
            names = [known for known in self._indices if fnmatch.fnmatchcase(known, name)] if "*" in name else [name]
            names = [concrete for known in names for concrete in sorted(self._aliases.get(known, {known}))]
            found = {known: {"mappings": copy.deepcopy(self._existing(known).mappings), "settings": {}} for known in names}
            return 200, found
        raise _Failure(405, "method_not_allowed", f"fake: {method} /{name}")

    # -- documents -------------------------------------------------------------------------

    def _validate(self, index: _Index, doc_id: str, source: Any) -> None:
        if not isinstance(source, dict):
            raise _Failure(400, "mapper_parsing_exception", "failed to parse, document is empty")
        properties = index.mappings.get("properties", {})
        strict = index.mappings.get("dynamic") in ("strict", "false", False)
        for name, value in source.items():
            spec = properties.get(name)
            if spec is None:
                if strict:
                    reason = f"mapping set to strict, dynamic introduction of [{name}] within [_doc] is not allowed"
                    raise _Failure(400, "strict_dynamic_mapping_exception", reason)
                continue
            if value is None:
                continue
            kind = spec.get("type")
            if kind == "dense_vector":
                vector = np.asarray(value, dtype=np.float64)
                if vector.shape != (spec.get("dims"),):
                    raise _Failure(
                        400, "document_parsing_exception",
                        f"The [dense_vector] field [{name}] in doc [document with id '{doc_id}'] has a different number of "
                        f"dimensions [{vector.size}] than defined in the mapping [{spec.get('dims')}]",
                    )  # fmt: skip
                if spec.get("similarity", "cosine") == "cosine" and not vector.any():
                    reason = "The [cosine] similarity does not support vectors with zero magnitude."
                    raise _Failure(400, "document_parsing_exception", reason)
            elif kind in ("date", "date_nanos"):
                for item in value if isinstance(value, list) else [value]:
                    try:
                        nanos = dsl.epoch_nanos(item, kind)
                    except dsl.QueryError:
                        reason = f"failed to parse field [{name}] of type [{kind}]"
                        raise _Failure(400, "document_parsing_exception", reason) from None
                    if kind == "date_nanos" and nanos < 0:
                        raise _Failure(400, "document_parsing_exception", f"date[{item}] is before the epoch in 1970")

    def _put(self, index: _Index, doc_id: str, source: Any, params: Mapping[str, str]) -> tuple[str, int, int]:
        self._check_version(index, doc_id, params)
        self._validate(index, doc_id, source)
        version = index.versions.get(doc_id, (0, 0))[0] + 1
        result = "updated" if doc_id in index.documents else "created"
        index.documents[doc_id] = copy.deepcopy(source)
        index.versions[doc_id] = (version, next(self._seq))
        return result, version, index.versions[doc_id][1]

    def _check_version(self, index: _Index, doc_id: str, params: Mapping[str, Any]) -> None:
        if "if_seq_no" not in params:
            return
        current = index.versions.get(doc_id)
        if current is None or str(current[1]) != str(params["if_seq_no"]) or str(params.get("if_primary_term", 1)) != "1":
            seq = current[1] if current else -2
            raise _Failure(
                409, "version_conflict_engine_exception",
                f"[{doc_id}]: version conflict, required seqNo [{params['if_seq_no']}], current document has seqNo [{seq}]",
            )  # fmt: skip

    def _meta(self, name: str, index: _Index, doc_id: str) -> dict[str, Any]:
        version, seq_no = index.versions[doc_id]
        return {"_index": name, "_id": doc_id, "_version": version, "_seq_no": seq_no, "_primary_term": 1}

    def _index_document(self, name: str, index: _Index, doc_id: str, body: Any, params: Mapping[str, str]) -> tuple[int, Any]:
        result, _, _ = self._put(index, doc_id, body, params)
        return (201 if result == "created" else 200), {**self._meta(name, index, doc_id), "result": result, "_shards": _SHARDS}

    def _update(
        self, name: str, index: _Index, doc_id: str, body: Mapping[str, Any], params: Mapping[str, str]
    ) -> dict[str, Any]:
        if set(body) - {"doc", "doc_as_upsert", "detect_noop"}:
            raise _Failure(400, "x_content_parse_exception", f"fake: unsupported update keys {sorted(set(body) - {'doc'})}")
        if doc_id not in index.documents:
            raise _Failure(404, "document_missing_exception", f"[{doc_id}]: document missing")
        merged = _merge(index.documents[doc_id], body.get("doc") or {})
        if merged == index.documents[doc_id]:
            self._check_version(index, doc_id, params)
            return {**self._meta(name, index, doc_id), "result": "noop"}
        self._put(index, doc_id, merged, params)
        return {**self._meta(name, index, doc_id), "result": "updated", "_shards": _SHARDS}

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
                if doc_id in self._item_failures:
                    raise _Failure(*self._item_failures[doc_id])
                index = self._indices.setdefault(index_name, _Index({})) if action != "delete" else self._existing(index_name)
                if action == "delete":
                    if doc_id in index.documents:
                        result.update(self._meta(index_name, index, doc_id))
                        del index.documents[doc_id]
                        result.update(result="deleted", status=200)
                    else:
                        result.update(result="not_found", status=404)
                elif action == "update":
                    result.update(self._update(index_name, index, doc_id, source or {}, {}), status=200)
                else:
                    if action == "create" and doc_id in index.documents:
                        reason = f"[{doc_id}]: version conflict, document already exists"
                        raise _Failure(409, "version_conflict_engine_exception", reason)
                    outcome, _, _ = self._put(index, doc_id, source, {})
                    status = 201 if outcome == "created" else 200
                    result.update(self._meta(index_name, index, doc_id), result=outcome, status=status)
            except _Failure as failure:
                result.update(status=failure.status, error={"type": failure.error_type, "reason": failure.reason})
            items.append({action: result})
        return {"took": 1, "errors": any("error" in item[next(iter(item))] for item in items), "items": items}

    def _mget(self, name: str, index: _Index, params: Mapping[str, str], body: Mapping[str, Any]) -> dict[str, Any]:
        ids = body.get("ids") or [doc.get("_id") for doc in body.get("docs", [])]
        includes, excludes = _source_params(params)
        docs = []
        for doc_id in ids:
            if doc_id in index.documents:
                source = dsl.filter_source(index.documents[doc_id], includes, excludes)
                docs.append({**self._meta(name, index, doc_id), "found": True, "_source": source})
            else:
                docs.append({"_index": name, "_id": doc_id, "found": False})
        return {"docs": docs}

    # -- searching ---------------------------------------------------------------------------

    def _matching(self, index: _Index, query: Any) -> list[str]:
        query = query or {"match_all": {}}
        return [doc_id for doc_id, doc in index.documents.items() if dsl.matches(query, doc, index.mappings, doc_id)]

    def _delete_by_query(self, index: _Index, body: Mapping[str, Any]) -> dict[str, Any]:
        doomed = self._matching(index, body.get("query"))
        for doc_id in doomed:
            del index.documents[doc_id]
        return {"took": 1, "timed_out": False, "total": len(doomed), "deleted": len(doomed), "batches": 1,
                "version_conflicts": 0, "noops": 0, "failures": []}  # fmt: skip

    def _search(self, name: str, index: _Index, params: Mapping[str, str], body: Mapping[str, Any]) -> dict[str, Any]:
        known = {"query", "knn", "size", "from", "sort", "search_after", "_source", "track_total_hits", "aggs", "aggregations"}
        if set(body) - known:
            raise dsl.QueryError(f"fake: unsupported search keys {sorted(set(body) - known)}")
        size, start = int(body.get("size", 10)), int(body.get("from", 0))
        if start + size > self.max_result_window:
            raise dsl.QueryError(
                f"Result window is too large, from + size must be less than or equal to: [{self.max_result_window}] "
                f"but was [{start + size}].", "illegal_argument_exception",
            )  # fmt: skip
        if self._scripted:
            return _hits_response(name, self._scripted.popleft())
        if "knn" in body and "query" in body:
            raise dsl.QueryError("fake: `knn` together with `query` is not supported")
        if "knn" in body:
            scored = dsl.knn_hits(body["knn"], index.documents, index.mappings)
        else:
            query = body.get("query") or {"match_all": {}}
            stats = dsl.search_stats(index.documents)
            documents = index.documents
            matching = self._matching(index, query)
            scored = [(doc_id, dsl.score(query, documents[doc_id], index.mappings, stats)) for doc_id in matching]
            scored.sort(key=lambda pair: -pair[1])
        sort = dsl.parse_sort(body["sort"]) if "sort" in body else None
        hits: list[dict[str, Any]] = []
        for doc_id, value in scored:
            hit: dict[str, Any] = {"_index": name, "_id": doc_id, "_score": None if sort else value}
            if sort:
                hit["sort"] = dsl.sort_values(index.documents[doc_id], sort, index.mappings)
            hits.append(hit)
        if sort:
            hits.sort(key=lambda hit: dsl.sort_key(hit["sort"], sort))
            if "search_after" in body:
                after = dsl.sort_key(body["search_after"], sort)
                hits = [hit for hit in hits if dsl.sort_key(hit["sort"], sort) > after]
        elif "search_after" in body:
            raise dsl.QueryError("fake: search_after needs sort")
        total = len(hits)
        hits = hits[start : start + size]
        includes, excludes = _source_option(body.get("_source"), params)
        for hit in hits:
            if includes is not False:
                hit["_source"] = dsl.filter_source(index.documents[hit["_id"]], includes or None, excludes)
        response = {"took": 1, "timed_out": False, "_shards": _SHARDS,
                    "hits": {"total": {"value": total, "relation": "eq"}, "max_score": None, "hits": hits}}  # fmt: skip
        aggs = body.get("aggs", body.get("aggregations"))
        if aggs is not None:
            if "knn" in body:
                raise dsl.QueryError("fake: aggregations with `knn` are not supported")
            matched = [index.documents[doc_id] for doc_id, _ in scored]
            response["aggregations"] = dsl.aggregate(aggs, matched, index.mappings)
        return response


_SHARDS = {"total": 1, "successful": 1, "skipped": 0, "failed": 0}


def _merge(source: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """Elasticsearch's partial-update merge: objects merge key by key, everything else is replaced."""
    merged = copy.deepcopy(dict(source))
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _source_params(params: Mapping[str, str]) -> tuple[list[str] | None, list[str] | None]:
    includes = params.get("_source_includes")
    excludes = params.get("_source_excludes")
    return (includes.split(",") if includes else None), (excludes.split(",") if excludes else None)


def _source_option(option: Any, params: Mapping[str, str]) -> tuple[Any, list[str] | None]:
    """(includes | None | False, excludes) from the body's `_source` and the query string."""
    if option is False:
        return False, None
    if isinstance(option, Mapping):
        return option.get("includes"), option.get("excludes")
    if isinstance(option, list):
        return option, None
    return _source_params(params)


def _hits_response(name: str, hits: list[dict[str, Any]]) -> dict[str, Any]:
    shaped = [{"_index": name, "_score": None, **hit} for hit in hits]
    return {"took": 1, "timed_out": False, "_shards": _SHARDS,
            "hits": {"total": {"value": len(shaped), "relation": "eq"}, "max_score": None, "hits": shaped}}  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects
    disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms delayed-ACK stall
    server_version = "FakeElasticsearch/8.13"

    @property
    def fake(self) -> FakeElasticsearch:
        return self.server.fake  # type: ignore[attr-defined]  # set in FakeElasticsearch.start

    def log_message(self, format: str, *args: Any) -> None:  # `format`: the base class names it so
        """Silent: tests read `server.requests` instead of stderr."""

    def setup(self) -> None:
        super().setup()
        with self.fake._lock:
            self.fake._connections.add(self.connection)

    def finish(self) -> None:
        with self.fake._lock:
            self.fake._connections.discard(self.connection)
        super().finish()

    def _handle(self) -> None:
        target = urlsplit(self.path)
        params = dict(parse_qsl(target.query, keep_blank_values=True))
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8") if length else ""
        try:
            if not raw.strip():
                body: Any = None
            elif target.path.endswith("/_bulk"):
                body = [json.loads(line) for line in raw.splitlines() if line.strip()]
            else:
                body = json.loads(raw)
        except json.JSONDecodeError as error:
            status, payload = 400, _error(400, "parse_exception", f"fake: request body is not JSON: {error}")
            body = raw
        else:
            status, payload = self.fake.answer(self.command, target.path, params, body)
        headers = {name.lower(): value for name, value in self.headers.items() if name.lower() != "authorization"}
        scheme = (self.headers.get("Authorization") or "").partition(" ")[0] or None
        self.fake._record(RecordedRequest(self.command, target.path, params, body, headers, scheme, status))
        data = b"" if payload is None or self.command == "HEAD" else json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("X-Elastic-Product", "Elasticsearch")
        self.send_header("Content-Type", _MEDIA_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a fake Elasticsearch 8.x (in memory) on this machine.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9200, help="0 picks a free port")
    args = parser.parse_args(argv)
    with FakeElasticsearch(args.host, args.port) as server:
        print(f"fake Elasticsearch at {server.url} (Ctrl-C to stop)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
