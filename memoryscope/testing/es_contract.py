"""Check an Elasticsearch cluster before trusting it with memories: the store contract, one command.

    python -m memoryscope.testing.es_contract --url https://es.example.com:9200

Run it before pointing `elasticsearch_memory_store` at a cluster it has not met (a new server
version, a managed service, another security setup, a proxy in between). It runs every check of
the store contract (`memoryscope.testing.StoreContract`, the behaviour the SQLite store shows
too: writes, reads, filters, search in every mode, history, leases, re-embedding) against that
cluster, through pytest, in fresh indices named `<prefix><run id>_<n>` (prefix
`memoryscope_check_` unless `--index-prefix` says otherwise), deletes them afterwards unless
`--keep`, and prints a report: a dot per check as it runs, then each group, each failure with
the contract's line and what was found (no traceback), and a verdict::

    Store contract against https://es.example.com:9200 (Elasticsearch 8.13.4), indices memoryscope_check_1f0c9a2e_*
    ......F.................................................................
      PASS  writing and reading               12 checks
      PASS  update and delete                  6 checks
      FAIL  search                       15 of 16 checks
      ...

    search: test_keyword_search_finds_exact_words
        _store_contract_search.py:61: AssertionError: assert [] == ['ann-cat']
          Right contains one more item: 'ann-cat'

    indices: no index left behind
    FAIL: 1 of 140 checks failed against https://es.example.com:9200 (Elasticsearch 8.13.4)

The last line is `PASS: N checks against URL (Elasticsearch x.y.z)` or `FAIL: k of N checks
failed ...`. Exit status 0: every check passed; 1: some failed; 2: the cluster could not be
reached (one line says why) or the arguments are wrong. `-k EXPR` runs only the checks whose
names match (pytest's `-k`).

Credentials come from the environment, never the command line: `MEMORYSCOPE_ES_API_KEY`, or
`MEMORYSCOPE_ES_USERNAME` and `MEMORYSCOPE_ES_PASSWORD`; `MEMORYSCOPE_ES_CA_CERTS` verifies https
with a private CA. They need to create, write, search and delete indices under the prefix. It
needs pytest and the Elasticsearch client: `pip install "memoryscope[elasticsearch]" pytest`.

In a test suite of your own, subclass `ElasticsearchContract` (it reads the same variables, the
URL from `MEMORYSCOPE_ES_URL`, and skips without it; see the class for pointing it elsewhere)::

    from memoryscope.testing.es_contract import ElasticsearchContract

    class TestMyCluster(ElasticsearchContract):
        index_prefix = "memoryscope_ci_"

This module imports neither pytest nor the contract until asked (`ElasticsearchContract` is
loaded on first use), so pytest can rewrite the contract's asserts and a failed check says what
it found.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import re
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memoryscope.testing._store_contract_elasticsearch import ElasticsearchContract

__all__ = ["ElasticsearchContract", "URL_VARIABLE", "delete_indices", "main", "settings_from_environment"]

URL_VARIABLE = "MEMORYSCOPE_ES_URL"
_PREFIX = re.compile(r"^[a-z0-9][a-z0-9._-]*$")  # what Elasticsearch allows at the start of an index name
_NEEDS = 'pip install "memoryscope[elasticsearch]" pytest'


def __getattr__(name: str) -> Any:
    if name == "ElasticsearchContract":
        return importlib.import_module("memoryscope.testing._store_contract_elasticsearch").ElasticsearchContract
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def settings_from_environment(url: str | None = None) -> dict[str, Any]:
    """`ElasticsearchMemoryStore` keyword arguments for the cluster at `url` (default
    `$MEMORYSCOPE_ES_URL`), logging in as `MEMORYSCOPE_ES_API_KEY`, or `MEMORYSCOPE_ES_USERNAME`
    and `MEMORYSCOPE_ES_PASSWORD`, say (by name: the store reads the secrets itself)."""
    settings: dict[str, Any] = {"hosts": [url or os.environ.get(URL_VARIABLE, "")], "request_timeout": 30.0}
    if os.environ.get("MEMORYSCOPE_ES_API_KEY"):
        settings["api_key_env"] = "MEMORYSCOPE_ES_API_KEY"
    if os.environ.get("MEMORYSCOPE_ES_USERNAME"):
        settings.update(username_env="MEMORYSCOPE_ES_USERNAME", password_env="MEMORYSCOPE_ES_PASSWORD")
    if os.environ.get("MEMORYSCOPE_ES_CA_CERTS"):
        settings["ca_certs"] = os.environ["MEMORYSCOPE_ES_CA_CERTS"]
    return settings


def delete_indices(client: Any, name: str) -> list[str]:
    """Delete the indices behind `name` (an index, or after a re-embed an alias, which DELETE
    refuses) and every `<name>-*` (history, leases, an unfinished re-embed); the names deleted."""
    found = set(client.indices.get(index=name, ignore_unavailable=True))
    found |= set(client.indices.get(index=f"{name}-*", allow_no_indices=True, expand_wildcards="open"))
    for index in sorted(found):  # by name: wildcard deletes are refused by default (action.destructive_requires_name)
        client.indices.delete(index=index, ignore_unavailable=True)
    return sorted(found)


# ---- the command ----------------------------------------------------------------------------------

# the contract's mixins name a group; its own checks by what their name says, first match wins
_CLASS_GROUPS = {
    "SearchCases": "search",
    "MetadataCases": "metadata filters",
    "WholeStoreCases": "whole store, re-embedding",
    "StateCases": "state records",
}
_NAME_GROUPS = (
    ("history", "history"),
    ("lease", "leases"),
    ("reopen", "the embedding model"),
    ("embedding_model", "the embedding model"),
    ("filter", "scan, count, filters"),
    ("scan", "scan, count, filters"),
    ("never_mix", "scan, count, filters"),
    ("update", "update and delete"),
    ("delete", "update and delete"),
)
_OTHER_GROUP = "writing and reading"
_GROUP_ORDER = (
    _OTHER_GROUP,
    "update and delete",
    "scan, count, filters",
    "search",
    "metadata filters",
    "history",
    "leases",
    "state records",
    "the embedding model",
    "whole store, re-embedding",
)  # the report's order; a group missing here comes last


class Unreachable(Exception):
    """The cluster did not answer as Elasticsearch; the message is the one-line reason."""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        import pytest  # noqa: F401  # only to say what is missing before anything runs

        from memoryscope.stores._es_connection import safe_hosts
    except ImportError as error:
        print(f"es_contract: needs {error.name}: {_NEEDS}", file=sys.stderr)
        return 2
    shown = safe_hosts([args.url])[0]
    try:
        client, version = _connect(args.url)
    except Unreachable as error:
        print(f"es_contract: cannot reach {shown}: {error}", file=sys.stderr)
        return 2
    prefix = f"{args.index_prefix}{uuid.uuid4().hex[:8]}_"
    print(f"Store contract against {shown} (Elasticsearch {version}), indices {prefix}*", flush=True)
    try:
        report = _run(args.url, prefix, keep=args.keep, select=args.k)
        cleaned = _cleanup(client, prefix, keep=args.keep)
    finally:
        client.close()
    return report.finish(f"against {shown} (Elasticsearch {version})", cleaned, select=args.k)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m memoryscope.testing.es_contract",
        description="Run the MemoryScope store contract against an Elasticsearch cluster and report pass/fail.",
        epilog="Credentials: MEMORYSCOPE_ES_API_KEY, or MEMORYSCOPE_ES_USERNAME and MEMORYSCOPE_ES_PASSWORD; "
        "MEMORYSCOPE_ES_CA_CERTS for https with a private CA.",
    )
    parser.add_argument("--url", required=True, help="the cluster, e.g. https://localhost:9200")
    parser.add_argument(
        "--index-prefix", default="memoryscope_check_", type=_prefix, help="indices are <prefix><run id>_<n> (%(default)s)"
    )
    parser.add_argument("--keep", action="store_true", help="leave the indices on the cluster to look at")
    parser.add_argument("-k", metavar="EXPR", help="run only the checks whose names match (pytest -k)")
    return parser


def _prefix(text: str) -> str:
    if not _PREFIX.match(text):
        raise argparse.ArgumentTypeError("lowercase letters, digits, '.', '_' or '-', starting with a letter or digit")
    return text


def _connect(url: str) -> tuple[Any, str]:
    """A client with the store's connection settings, and the server's version; `Unreachable` if none answers."""
    try:
        import elasticsearch

        from memoryscope.errors import StoreError
        from memoryscope.stores import _es_connection as connection
        from memoryscope.stores._es_params import ElasticsearchStoreParams
    except ImportError as error:
        raise Unreachable(f"needs {error.name}: {_NEEDS}") from None
    try:
        client = connection.build_client(elasticsearch, ElasticsearchStoreParams(**settings_from_environment(url)))
    except StoreError as error:
        raise Unreachable(str(error)) from None
    try:
        info = client.options(request_timeout=10.0).info()  # a silent host: give up sooner than the checks' 30 s
    except elasticsearch.ApiError as error:
        if getattr(error, "status_code", None) == 403:  # may not read the cluster's info, may still use indices
            return client, "version unknown"
        client.close()
        reason = connection.api_reason(error)
        if getattr(error, "status_code", None) == 401:
            reason += "; set MEMORYSCOPE_ES_API_KEY, or MEMORYSCOPE_ES_USERNAME and MEMORYSCOPE_ES_PASSWORD"
        raise Unreachable(reason) from None
    except elasticsearch.TransportError as error:
        client.close()
        reason = connection.transport_reason(error, 10.0)
        if reason.startswith("TLS"):
            reason += "; MEMORYSCOPE_ES_CA_CERTS can name the CA bundle"
        raise Unreachable(reason) from None
    return client, str((info.get("version") or {}).get("number", "version unknown"))


def _run(url: str, prefix: str, *, keep: bool, select: str | None) -> _Report:
    """The contract in pytest, in this process, from a module subclassing `ElasticsearchContract`."""
    import pytest

    report = _Report()
    with tempfile.TemporaryDirectory(prefix="memoryscope-es-contract-") as folder, _environment(url):
        root = Path(folder)
        module = root / "test_elasticsearch_contract.py"
        module.write_text(
            textwrap.dedent(f"""\
                from memoryscope.testing.es_contract import ElasticsearchContract


                class TestElasticsearchContract(ElasticsearchContract):
                    index_prefix = {prefix!r}
                    keep_indices = {keep!r}
                """),
            encoding="utf-8",
        )
        (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # not the caller's project settings
        args = [str(module), "-c", str(root / "pytest.ini"), "--rootdir", folder, "--confcutdir", folder]
        args += ["--import-mode=importlib", "-p", "no:cacheprovider", "-p", "no:terminal"]
        if select:
            args += ["-k", select]
        report.exit_code = int(pytest.main(args, plugins=[report]))
    return report


@contextmanager
def _environment(url: str) -> Iterator[None]:
    """The URL for the contract's `es_settings`; no third-party pytest plugin (they could reorder or skip checks)."""
    changed = {URL_VARIABLE: url, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    before = {name: os.environ.get(name) for name in changed}
    os.environ.update(changed)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _cleanup(client: Any, prefix: str, *, keep: bool) -> str:
    """Each check deletes its indices; delete any left behind (by name, under this run's prefix)."""
    try:
        left = sorted(client.indices.get(index=f"{prefix}*", allow_no_indices=True, expand_wildcards="open"))
        if keep:
            return f"kept {len(left)} indices {prefix}*"
        for name in left:
            client.indices.delete(index=name, ignore_unavailable=True)
    except Exception as error:  # the checks' verdict stands; say what to clean by hand
        return f"could not list or delete the indices {prefix}* ({type(error).__name__}: {error}); delete them by hand"
    return f"deleted {len(left)} indices left behind" if left else "no index left behind"


class _Report:
    """A pytest plugin: the outcome of each check, by group; prints progress, then the report."""

    def __init__(self) -> None:
        self.exit_code = 0
        self.groups: dict[str, str] = {}  # nodeid -> group
        self.outcomes: dict[str, tuple[str, str]] = {}  # nodeid -> (passed/failed/skipped, reason)
        self.broken: list[str] = []  # what kept checks from being collected
        self._column = 0

    def pytest_configure(self, config: Any) -> None:
        import pytest

        import memoryscope.testing as package

        names = [f"{package.__name__}.{info.name}" for info in pkgutil.iter_modules(package.__path__)]
        contract = [name for name in names if name.rpartition(".")[2].startswith(("store_contract", "_store_"))]
        pytest.register_assert_rewrite(*[name for name in contract if name not in sys.modules])

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.broken.append(_first_lines(str(report.longrepr), 8))

    def pytest_collection_finish(self, session: Any) -> None:
        for item in session.items:
            function = getattr(item, "function", None)
            self.groups[item.nodeid] = _group(getattr(function, "__qualname__", item.name))

    def pytest_runtest_logreport(self, report: Any) -> None:
        outcome = self.outcomes.get(report.nodeid, ("passed", ""))
        if report.failed and outcome[0] != "failed":
            outcome = ("failed", _reason(report))
        elif report.skipped and outcome[0] == "passed":
            outcome = ("skipped", str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else "skipped")
        self.outcomes[report.nodeid] = outcome
        if report.when == "teardown":
            print({"passed": ".", "failed": "F", "skipped": "s"}[outcome[0]], end="", flush=True)
            self._column = (self._column + 1) % 72
            if not self._column:
                print()

    def finish(self, against: str, cleaned: str, *, select: str | None) -> int:
        """Print the report; the exit status (0 every check passed, else 1)."""
        if self._column:
            print()
        by_group: dict[str, list[tuple[str, str, str]]] = {group: [] for group in _GROUP_ORDER}
        for nodeid, group in self.groups.items():
            outcome, reason = self.outcomes.get(nodeid, ("failed", "did not run"))
            by_group.setdefault(group, []).append((nodeid.rpartition("::")[2], outcome, reason))
        by_group = {group: checks for group, checks in by_group.items() if checks}
        width = max((len(group) for group in by_group), default=0)
        for group, checks in by_group.items():
            failed = sum(outcome == "failed" for _, outcome, _ in checks)
            skipped = sum(outcome == "skipped" for _, outcome, _ in checks)
            count = f"{len(checks) - failed} of {len(checks)} checks" if failed else f"{len(checks)} checks"
            note = f" ({skipped} skipped)" if skipped else ""
            print(f"  {'FAIL' if failed else 'PASS'}  {group:<{width}}  {count:>16}{note}")
        failures = [
            (group, name, reason) for group, checks in by_group.items() for name, outcome, reason in checks if outcome == "failed"
        ]
        for group, name, reason in failures:
            print(f"\n{group}: {name}\n{textwrap.indent(reason, '    ')}")
        for problem in self.broken:
            print(f"\ncould not collect the contract:\n{textwrap.indent(problem, '    ')}")
        print(f"\nindices: {cleaned}")
        total = len(self.groups)
        skipped = sum(outcome == "skipped" for outcome, _ in self.outcomes.values())
        if self.broken:
            print(f"FAIL: the contract could not be collected {against}")
            return 1
        if not total:
            print(f"FAIL: no check ran {against}" + (f" (-k {select!r} chose none)" if select else ""))
            return 1
        if failures or self.exit_code not in (0, 1):
            print(f"FAIL: {len(failures)} of {total} checks failed {against}")
            return 1
        print(f"PASS: {total - skipped} checks {against}" + (f" ({skipped} skipped)" if skipped else ""))
        return 0


def _group(qualname: str) -> str:
    owner, _, name = qualname.rpartition(".")
    if owner in _CLASS_GROUPS:
        return _CLASS_GROUPS[owner]
    return next((group for part, group in _NAME_GROUPS if part in name), _OTHER_GROUP)


def _reason(report: Any) -> str:
    """The contract's line where a check failed and what was found, in a few lines (no traceback)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is None:
        text = str(report.longrepr)
    else:
        entries = getattr(getattr(report.longrepr, "reprtraceback", None), "reprentries", [])
        places = [entry.reprfileloc for entry in entries if getattr(entry, "reprfileloc", None) is not None]
        place = next((loc for loc in reversed(places) if _is_contract(loc.path)), crash)
        text = f"{Path(place.path).name}:{place.lineno}: {crash.message}"
    return ("" if report.when == "call" else f"(while {report.when}) ") + _first_lines(text, 6)


def _is_contract(path: str) -> bool:
    return Path(path).name.startswith(("store_contract", "_store_"))


def _first_lines(text: str, count: int) -> str:
    lines = [line.rstrip() for line in text.splitlines() if line.strip() and not line.strip().startswith("Use -v")]
    return "\n".join(lines[:count] + (["..."] if len(lines) > count else []))


if __name__ == "__main__":
    sys.exit(main())
