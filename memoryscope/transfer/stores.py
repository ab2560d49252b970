"""Stores from configs, migration from one store to another, and re-embedding.

- `open_store(config)`: just the memory store of a config and its embedding model; no other
  model, worker or service is built (an LLM key need not be set to move memories).
- `migrate(from_config, to_config)`: every memory of every user, in `memory_id` order. Vectors
  are copied when both stores use the same embedding model (name and dimension), else the
  target embeds the memories with its own. Resumable without a checkpoint file: a memory the
  target already holds, identical field for field, is skipped, so running the same command
  again after an interruption (or a failure) carries on where the target stands, and never
  duplicates (writes go by `memory_id`). At the end the memories per user and in total are
  counted in both stores; any difference is a StoreError. Migrate into an empty store, with
  writers to the source stopped.
- `reembed(config)`: after changing a config's embedding model, embed every memory again with
  it; the store then records the new model (see `MemoryStore.reembed` for each backend's way).
  With the model unchanged, an Elasticsearch store fills the `keywords` field of memories
  written before it had one (`ElasticsearchMemoryStore.fill_keywords`), embedding nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memoryscope.config import Config, load_config
from memoryscope.errors import ConfigError, StoreError
from memoryscope.memory import MemoryNode, embedding_text
from memoryscope.progress import Progress
from memoryscope.stores.base import MemoryStore
from memoryscope.stores.factory import build_store

__all__ = ["MigrationReport", "open_store", "migrate", "migrate_stores", "reembed"]

ConfigSource = Config | str | Path | Mapping[str, Any]


@dataclass(frozen=True)
class MigrationReport:
    """What `migrate` did; `users` are the verified counts (the same in both stores)."""

    source: str
    target: str
    users: dict[str, int]
    total: int
    copied: int  # written to the target
    skipped: int  # already in the target, identical (a resumed run)
    vectors_copied: bool  # False: the target embedded the memories with its own model
    seconds: float


def open_store(
    config: ConfigSource, *, overrides: Mapping[str, Any] | None = None, allow_model_change: bool = False
) -> MemoryStore:
    """The `memory_store:` of `config` (a name, a YAML path, a dict or a loaded Config), built with
    only its embedding model. `allow_model_change`: open it to re-embed (see `MemoryStore.reembed`)."""
    loaded = config if isinstance(config, Config) else load_config(config, overrides)
    spec = loaded.store
    if spec is None:
        raise ConfigError([("memory_store", "this config has no memory store")], source=loaded.source)
    models = loaded.models
    return build_store(spec, lambda key: models[key].cls(models[key].params), allow_model_change=allow_model_change)


def migrate(
    from_config: ConfigSource,
    to_config: ConfigSource,
    *,
    batch_size: int = 500,
    progress: Progress | None = None,
    resume: bool = True,
) -> MigrationReport:
    """Copy every memory of the store of `from_config` into the store of `to_config` (see the module)."""
    with open_store(from_config) as source, open_store(to_config) as target:
        return migrate_stores(source, target, batch_size=batch_size, progress=progress, resume=resume)


def migrate_stores(
    source: MemoryStore,
    target: MemoryStore,
    *,
    batch_size: int = 500,
    progress: Progress | None = None,
    resume: bool = True,
) -> MigrationReport:
    """`migrate` between two open stores. `resume=False` writes every memory again, even those
    already identical in the target."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise StoreError(f"migrate: batch_size must be a positive integer, got {batch_size!r}")
    if _same_place(source, target):
        raise StoreError(f"migrate: the source and the target are the same store ({source!r})")
    progress = progress or Progress()
    started = time.monotonic()
    copy_vectors = source.recorded_embedding == target.recorded_embedding
    total = sum(source.user_counts().values())
    progress.start("migrate", total)
    name, dimension = target.recorded_embedding
    if copy_vectors:
        progress.note(f"vectors are copied: both stores use embedding model {name!r} (dimension {dimension})")
    else:
        progress.note(
            f"the target embeds every memory with {name!r}: the source's vectors are from {source.recorded_embedding[0]!r}"
        )
    copied = skipped = 0
    for batch in source.iter_all(batch_size):
        todo = batch
        if resume:
            present = {node.memory_id: node for node in target.get([node.memory_id for node in batch])}
            todo = [node for node in batch if present.get(node.memory_id) != node]
        if todo:
            target.upsert(todo, vectors=_source_vectors(source, target, todo) if copy_vectors else None)
        copied += len(todo)
        skipped += len(batch) - len(todo)
        progress.advance(len(batch))
    progress.finish()
    if skipped:
        progress.note(f"{skipped:,} memories were already in the target and were skipped")
    users = _verify(source, target)
    return MigrationReport(
        source=repr(source),
        target=repr(target),
        users=users,
        total=sum(users.values()),
        copied=copied,
        skipped=skipped,
        vectors_copied=copy_vectors,
        seconds=time.monotonic() - started,
    )


def _source_vectors(source: MemoryStore, target: MemoryStore, nodes: list[MemoryNode]) -> np.ndarray:
    """The source's stored vectors; the few memories without one are embedded by the target's model."""
    stored = source.get_vectors([node.memory_id for node in nodes])
    matrix = np.zeros((len(nodes), int(target.dimension)), dtype=np.float32)
    missing = []
    for index, node in enumerate(nodes):
        vector = stored.get(node.memory_id)
        if vector is None:
            missing.append(index)
        else:
            matrix[index] = vector
    if missing:
        matrix[missing] = target.embedding_model.embed_passages([embedding_text(nodes[index]) for index in missing])
    return matrix


def _verify(source: MemoryStore, target: MemoryStore) -> dict[str, int]:
    expected, found = source.user_counts(), target.user_counts()
    differing = sorted(user for user in expected.keys() | found.keys() if expected.get(user, 0) != found.get(user, 0))
    if differing:
        shown = "; ".join(
            f"user {user!r}: {expected.get(user, 0)} in the source, {found.get(user, 0)} in the target" for user in differing[:10]
        )
        more = f"; and {len(differing) - 10} more users" if len(differing) > 10 else ""
        raise StoreError(
            f"migrate: the counts differ ({shown}{more}; in total {sum(expected.values())} in the source, "
            f"{sum(found.values())} in the target). Migrate into an empty store with writers to the source stopped, "
            "then run migrate again"
        )
    return expected


def _same_place(first: MemoryStore, second: MemoryStore) -> bool:
    if first is second:
        return True
    first_path, second_path = getattr(first, "path", None), getattr(second, "path", None)
    if isinstance(first_path, Path) and isinstance(second_path, Path):
        return first_path.resolve() == second_path.resolve()
    places = [(getattr(store, "hosts", None), getattr(store, "index_name", None)) for store in (first, second)]
    return places[0][1] is not None and places[0] == places[1]


def reembed(config: ConfigSource, *, batch_size: int = 256, progress: Progress | None = None, force: bool = False) -> int:
    """Embed every memory of the config's store with the config's embedding model; returns how many.

    Nothing is done (0) when the store's vectors are already that model's, unless `force`."""
    progress = progress or Progress()
    with open_store(config, allow_model_change=True) as store:
        recorded = store.recorded_embedding
        current = (store.embedding_model.model_name, int(store.dimension))
        if recorded == current and not force:
            progress.note(f"the vectors are already made by {current[0]!r} (dimension {current[1]}); nothing to do")
            # an Elasticsearch index from before its `keywords` field: fill it in place (the
            # copy below fills it too); the other stores keep their keyword index up to date
            fill_keywords = getattr(store, "fill_keywords", None)
            if fill_keywords is not None:
                fill_keywords(batch_size=batch_size, progress=progress)
            return 0
        was = "the same model (forced)" if recorded == current else f"{recorded[0]!r} (dimension {recorded[1]})"
        progress.note(f"re-embedding with {current[0]!r} (dimension {current[1]}); the vectors were made by {was}")
        return store.reembed(batch_size=batch_size, progress=progress)
