"""A fake Elasticsearch 8.x server: real HTTP on 127.0.0.1, in-memory indices, every request recorded.

The real `elasticsearch` client talks to it (every answer carries `X-Elastic-Product:
Elasticsearch` and the `compatible-with=8` media type the 8.x client checks), so tests run the
real client and the real store code, and can pin the exact bodies sent::

    with FakeElasticsearch() as server, ElasticsearchMemoryStore(hosts=[server.url], embedding_model=model) as store:
        store.count(MemoryFilter("ann"))
        assert server.requests[-1].path == "/memoryscope_memory/_count"
        assert server.requests[-1].body == {"query": {"bool": {"filter": [{"term": {"user_name": "ann"}}]}}}

Endpoints: `HEAD|PUT|DELETE /<index>`, `GET|PUT /<index>/_mapping` (PUT adds fields, refuses to
change one, replaces `_meta`), `POST /<index>/_bulk` (index, create, delete and update actions;
index, delete and update honour `if_seq_no`), `POST /<index>/_mget` (on a missing index each
document answers an `index_not_found_exception`, as Elasticsearch does), `PUT /<index>/_doc/<id>`,
`POST /<index>/_update/<id>` (`doc` merged into `_source` object by object, as Elasticsearch
does), `POST /<index>/_search` (`query` or `knn`, `sort`, `search_after`, `from`/`size` within
`max_result_window`, `seq_no_primary_term`, `composite` aggregations of `terms` sources), `POST /<index>/_count`, `POST
/<index>/_delete_by_query`, `POST /<index>/_refresh`, `POST /_aliases` (`add`, `remove`,
`remove_index`, applied atomically, `remove_index` first), `GET /`. An alias of one index stands
for it in every per-index endpoint. `if_seq_no` / `if_primary_term` are honoured (409 on a
mismatch).
Mappings are enforced as far as the store relies on them: `dynamic: strict` rejects unknown
fields, `dense_vector` checks its dimension and refuses zero vectors for cosine, dates must parse,
text is analysed by its field's analyzer (`whitespace` exactly, others approximated).
The indices and the routes that act on them are in `_fake_es_cluster`, query semantics and
their approximations in `_fake_es_search`. Refresh is not modelled:
every write is visible at once (tests check the `refresh` parameter in `requests` instead).

Scripting for tests: `create_index` (an index made elsewhere, e.g. with another `_meta`),
`fail_items` (bulk items that fail, per document id), `script_search` (the next searches answer
these hits), `fail_next` (the next requests get an error status).

From a shell: `python -m memoryscope.testing.fake_elasticsearch --port 9200` (serves until Ctrl-C).
"""

from __future__ import annotations

import argparse
import copy
import json
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from memoryscope.testing import _fake_es_search as dsl
from memoryscope.testing._fake_es_cluster import FakeCluster
from memoryscope.testing._fake_es_documents import Failure, Index, error_body
from memoryscope.testing._loopback import LoopbackHandler, LoopbackServer, serve_until_interrupted

__all__ = ["FakeElasticsearch", "RecordedRequest"]

_MEDIA_TYPE = "application/vnd.elasticsearch+json;compatible-with=8"


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


@dataclass(frozen=True)
class _Fault:
    status: int
    error_type: str
    reason: str
    action: str | None
    method: str | None

    def applies(self, method: str, path: str) -> bool:
        return (self.action is None or path.endswith(self.action)) and (self.method is None or method == self.method)


class FakeElasticsearch(LoopbackServer):
    """The server; a context manager that starts it on a free port and stops it on exit."""

    thread_name = "fake-elasticsearch"
    close_connections_on_stop = True  # the client keeps connections alive: wake their handler threads

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, max_result_window: int = 10_000) -> None:
        super().__init__(host, port)
        self._lock = threading.RLock()
        self._cluster = FakeCluster(max_result_window)
        self._requests: list[RecordedRequest] = []
        self._faults: deque[_Fault] = deque()

    @property
    def max_result_window(self) -> int:
        return self._cluster.max_result_window

    @max_result_window.setter
    def max_result_window(self, value: int) -> None:
        self._cluster.max_result_window = value

    # -- scripting and inspection ----------------------------------------------------------

    def create_index(
        self, name: str, mappings: Mapping[str, Any], documents: Mapping[str, Mapping[str, Any]] | None = None
    ) -> None:
        """An index as if made by someone else (with any `_meta`), optionally with documents."""
        with self._lock:
            index = Index(copy.deepcopy(dict(mappings)))
            for doc_id, source in (documents or {}).items():
                index.documents[doc_id] = copy.deepcopy(dict(source))
                index.versions[doc_id] = (1, next(self._cluster.seq))
            self._cluster.indices[name] = index

    def documents(self, index: str) -> dict[str, dict[str, Any]]:
        """A copy of an index's (or a one-index alias's) documents by id ({} when there is no such index)."""
        with self._lock:
            targets = self._cluster.aliases.get(index, {index})
            found = self._cluster.indices.get(next(iter(targets))) if len(targets) == 1 else None
            return copy.deepcopy(found.documents) if found else {}

    def index_names(self) -> list[str]:
        """The concrete indices (not aliases)."""
        with self._lock:
            return sorted(self._cluster.indices)

    def aliases(self) -> dict[str, list[str]]:
        """Each alias and the indices it points at."""
        with self._lock:
            return {alias: sorted(targets) for alias, targets in sorted(self._cluster.aliases.items())}

    def fail_items(self, failures: Mapping[str, str | tuple[str, str]], status: int = 400) -> None:
        """Bulk items for these document ids fail with `reason` (or `(error_type, reason)`)."""
        with self._lock:
            for doc_id, failure in failures.items():
                error_type, reason = failure if isinstance(failure, tuple) else ("mapper_parsing_exception", failure)
                self._cluster.item_failures[doc_id] = (status, error_type, reason)

    def script_search(self, *hit_lists: list[dict[str, Any]]) -> None:
        """The next searches answer these hits (each `{"_id", "_score", "_source"}`), one list per search."""
        with self._lock:
            self._cluster.scripted.extend(list(hits) for hits in hit_lists)

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
                return fault.status, error_body(fault.status, fault.error_type, fault.reason)
            try:
                return self._cluster.route(method, path, params, body)
            except Failure as failure:
                return failure.status, error_body(failure.status, failure.error_type, failure.reason)
            except dsl.QueryError as error:
                return 400, error_body(400, error.error_type, str(error))

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)


class _Handler(LoopbackHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects
    server_version = "FakeElasticsearch/8.13"

    @property
    def fake(self) -> FakeElasticsearch:
        owner = self.owner
        if not isinstance(owner, FakeElasticsearch):
            raise RuntimeError("_Handler serves only a FakeElasticsearch")
        return owner

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
            status, payload = 400, error_body(400, "parse_exception", f"fake: request body is not JSON: {error}")
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


FakeElasticsearch.handler_class = _Handler  # defined after the server, which its type hints name


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a fake Elasticsearch 8.x (in memory) on this machine.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9200, help="0 picks a free port")
    args = parser.parse_args(argv)
    serve_until_interrupted(FakeElasticsearch(args.host, args.port), "fake Elasticsearch at {server.url} (Ctrl-C to stop)")


if __name__ == "__main__":
    main()
