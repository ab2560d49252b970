"""`memoryscope doctor --config C`: is everything the config names there and working, as a readable report.

Nothing reaches a model or a server when MemoryScope starts; this is where a user checks it all,
one line per check (`ok`, `FAIL` with the reason and the fix, `skip`):

- packages: what the store and models need and is not installed (`config.packages`);
- models: each configured model's key, and one real call (`doctor_models`); for the embedding
  model, the size of its vectors, matched against the store's;
- the store: it opens and is writable (SQLite), or the cluster answers and the index exists
  (Elasticsearch: not created here), then `check(full=True)`: for `sqlite_memory_store`
  SQLite's own `integrity_check` of the file, every row (each decodes), every vector (the
  store's dimension, finite numbers) and the keyword index (an entry for every memory, none
  left over) and, when `ann_min_memories` is on, the approximate vector index's package
  (`usearch` builds and searches a test graph of the store's dimension) and every saved graph
  (its size and CRC-32; a damaged one is rebuilt from the rows at its user's next search); for
  other stores every memory of every user is read and counted. A SQLite file too damaged to
  open as a store gets SQLite's check alone.

Each problem names the memory and what to do; the exit status is 0 when nothing is wrong and 1
when something is (2, from the command, for a bad config).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from memoryscope.errors import ConfigError, MemoryScopeError, StoreError

__all__ = ["run_doctor"]

_SHOWN = 50  # problems listed per check; the rest are counted


def run_doctor(config: str, out: TextIO | None = None) -> int:
    """Check the packages, models and store of `config` (a name or a YAML path), print the report to `out`; the exit status."""
    from memoryscope.config import load_config
    from memoryscope.config.packages import missing_packages
    from memoryscope.doctor_models import check_models
    from memoryscope.text import terminal_safe  # stored text may hold escape codes: shown, never run

    stream = out or sys.stdout

    def say(line: str) -> None:
        print(terminal_safe(line), file=stream)

    loaded = load_config(config)
    spec = loaded.store
    if spec is None:
        raise ConfigError([("memory_store", "this config has no memory store")], source=loaded.source)
    missing = missing_packages(loaded)
    say("packages: " + ("ok" if not missing else "missing"))
    for line in missing:
        say(f"  FAIL {line}")
    if missing:
        say("something is wrong: see above")
        return 1
    say("models:")
    models = check_models(loaded, say)
    store_failed = _check_store(loaded, models.models, say)
    failed = models.failed or store_failed
    say("something is wrong: see above" if failed else "ok: nothing wrong found")
    return 1 if failed else 0


def _check_store(loaded: Any, models: dict[str, Any], say: Callable[[str], None]) -> bool:
    """The store's checks, said; whether one failed."""
    spec = loaded.store
    path = getattr(spec.params, "path", None)
    say(f"memory store: {spec.cls.__name__}" + (f" at {path}" if path is not None else ""))
    if isinstance(path, Path) and not path.exists():
        say(f"  no such file: {path} (nothing to check; the store creates it when first opened)")
        return True
    try:
        store = _open_store(loaded, models)
    except StoreError as error:
        say(f"  FAIL cannot open it: {error}")
        check_file = getattr(spec.cls, "check_file", None)
        if isinstance(path, Path) and check_file is not None:
            _print_problems(say, "file (PRAGMA integrity_check)", [str(line) for line in check_file(path, full=True)])
        return True
    try:
        with store:
            found, anything = store.reach()
            say(f"  ok   {found}")
            failed = _check_dimension(store, say)
            if not anything:
                return failed
            counts = store.user_counts()
            say(f"  {sum(counts.values())} memories of {len(counts)} users")
            for user_name, count in sorted(counts.items())[:20]:
                say(f"    {user_name!r}: {count}")
            if len(counts) > 20:
                say(f"    ... and {len(counts) - 20} more users")
            report = store.check(full=True)
    except StoreError as error:
        say(f"  FAIL {error}")
        return True
    for name, problems in report.items():
        _print_problems(say, name, problems)
    return failed or any(report.values())


def _open_store(loaded: Any, models: dict[str, Any]) -> Any:
    """The store, with the embedding model the model checks built (it knows its vector size when
    its call answered); one built without its key otherwise: opening a store calls no model."""
    from memoryscope.stores.factory import build_store

    def embedding_model(key: str) -> Any:
        if key in models:
            return models[key]
        spec = loaded.models[key]
        params = spec.params
        if "api_key_env" in type(params).model_fields:
            params = params.model_copy(update={"api_key_env": None})
        return spec.cls(params)

    return build_store(loaded.store, embedding_model)


def _check_dimension(store: Any, say: Callable[[str], None]) -> bool:
    """The embedding model's vector size against the store's, when the model's call told it; whether it failed."""
    model = store.embedding_model
    if model.known_dimension is None:
        return False  # its call failed (said above): nothing to match
    try:
        dimension = store.dimension  # matched against the stored vectors' size here
    except MemoryScopeError as error:
        say(f"  FAIL {error}")
        return True
    say(f"  ok   embedding model {model.model_name!r}: dimension {dimension}, as the store's vectors")
    return False


def _print_problems(say: Callable[[str], None], name: str, problems: list[str]) -> None:
    if not problems:
        say(f"  {name}: ok")
        return
    say(f"  {name}: {len(problems)} problem{'s' if len(problems) > 1 else ''}")
    for problem in problems[:_SHOWN]:
        say(f"    - {problem}")
    if len(problems) > _SHOWN:
        say(f"    ... and {len(problems) - _SHOWN} more")
