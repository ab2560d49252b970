"""Moving memories: export to and import from JSON lines, migrate between stores, re-embed.

    from memoryscope.transfer import export_memories, import_memories, migrate, open_store, reembed

    with open_store("my.yaml") as store:                      # only the store and its embedding model
        export_memories(store, "memories.jsonl", include_vectors=True)
    report = migrate("default", "elasticsearch")              # any store to any store, counts verified
    reembed("my.yaml")                                        # after changing the embedding model

Each function takes a `memoryscope.progress.Progress` (silent by default; `StderrProgress`
prints to stderr). The `memoryscope export|import|migrate|reembed` commands come from
`memoryscope.cli.transfer.add_transfer_commands`. The file format is described in
`memoryscope.transfer.jsonl`.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "open_store",
    "export_memories",
    "import_memories",
    "migrate",
    "migrate_stores",
    "reembed",
    "MigrationReport",
    "ImportFileError",
]

_HOMES = {
    "export_memories": "memoryscope.transfer.jsonl",
    "import_memories": "memoryscope.transfer.jsonl",
    "ImportFileError": "memoryscope.transfer.jsonl",
    "open_store": "memoryscope.transfer.stores",
    "migrate": "memoryscope.transfer.stores",
    "migrate_stores": "memoryscope.transfer.stores",
    "reembed": "memoryscope.transfer.stores",
    "MigrationReport": "memoryscope.transfer.stores",
}


def __getattr__(name: str) -> Any:
    # imported on first use: importing the package costs nothing until a name is used
    if name not in _HOMES:
        raise AttributeError(f"module 'memoryscope.transfer' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
