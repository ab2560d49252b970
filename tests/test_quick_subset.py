"""The quick subset, `python -m pytest -m "not slow"`: the marker is registered, the README says how
long the whole suite takes and how to run the subset, and the tests that take seconds by their
nature (a browser, a pseudo-terminal, a benchmark run end to end) are left out of it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
OPENPTY = re.compile(r"\bos\.openpty\(\)")  # a test on a pseudo-terminal


def marked_slow(module: Path) -> bool:
    """Whether the module's `pytestmark` is `pytest.mark.slow` or a list holding it."""
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            marks = node.value.elts if isinstance(node.value, ast.List) else [node.value]
            return any(ast.unparse(mark) == "pytest.mark.slow" for mark in marks)
    return False


def test_the_slow_marker_is_registered(pytestconfig: pytest.Config) -> None:
    assert "--strict-markers" in pytestconfig.getini("addopts")  # a misspelt marker is an error, not a no-op
    assert any(marker.startswith("slow:") for marker in pytestconfig.getini("markers"))


def test_the_readme_gives_the_suites_duration_and_the_quick_subset() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    testing = readme[readme.index("\n## Testing\n") :]
    testing = testing[: testing.find("\n## ", 1)]
    assert re.search(r"about \d+ minutes on 2 quiet cores", testing)
    assert 'python -m pytest -m "not slow"' in testing
    assert "CI" in testing and "python -m pytest -m slow" in testing


def slow_by_nature() -> list[Path]:
    """Test modules that take seconds whatever their code: browsers, pseudo-terminals, benchmarks."""
    found = set(TESTS.glob("playground/test_*.py")) | set(TESTS.glob("benchmarks/test_*smoke.py"))
    found |= {path for path in TESTS.rglob("test_*.py") if OPENPTY.search(path.read_text(encoding="utf-8"))}
    return sorted(found)


@pytest.mark.parametrize("module", slow_by_nature(), ids=lambda path: str(path.relative_to(TESTS)))
def test_a_module_that_is_slow_by_nature_is_marked_slow(module: Path) -> None:
    assert marked_slow(module), (
        f'{module.relative_to(ROOT)}: add `pytestmark = pytest.mark.slow` (then `-m "not slow"` leaves it out)'
    )


def test_the_quick_subset_keeps_the_core() -> None:
    """The store contract, the door and the Python API stay in the quick subset."""
    for module in ("stores/test_sqlite_store.py", "door/test_verbs.py", "test_memory_api.py", "test_consolidation.py"):
        assert not marked_slow(TESTS / module), module
