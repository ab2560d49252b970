"""The workers sit in the engine's layers (`pyproject.toml`, `[tool.importlinter]`) just above
`memoryscope.worker`: a worker may import the worker base and what lies below it (the context,
the stores, the models, ...), never the engine above it (workflow, service, door, app) or a face.

import-linter reads only the `memoryscope` folder, and the workers install from the top-level
`workers/` folder as `memoryscope.workers`; so this test holds them to the same table, reading
every import of every worker module (inside functions and under `TYPE_CHECKING` too)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
WORKER_LAYER = "memoryscope.worker"


def allowed_modules() -> list[str]:
    """Every module named at or below the layer of `memoryscope.worker`, and the workers' own package."""
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layers = settings["tool"]["importlinter"]["contracts"][0]["layers"]
    names_by_layer = [[name.strip() for name in re.split(r"[|:]", layer)] for layer in layers]
    start = next(index for index, names in enumerate(names_by_layer) if WORKER_LAYER in names)
    return [name for names in names_by_layer[start:] for name in names] + ["memoryscope.workers"]


def imported_modules(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return [(line, name) for line, name in found if name == "memoryscope" or name.startswith("memoryscope.")]


def test_workers_import_only_the_layers_below_them() -> None:
    allowed = allowed_modules()
    assert "memoryscope.context" in allowed and "memoryscope.stores" in allowed and "memoryscope.service" not in allowed
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted((ROOT / "workers").rglob("*.py"))
        for line, name in imported_modules(path)
        if not any(name == module or name.startswith(module + ".") for module in allowed)
    ]
    assert wrong == [], "workers reach above their layer:\n" + "\n".join(wrong)
