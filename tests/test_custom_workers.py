"""A worker from one's own package: installed with an entry point, or named by its dotted path.

`tests/example_worker_project` is a real package (pyproject.toml, setuptools) whose entry point
in the group `memoryscope.workers` registers `shout`. It is installed once, with pip, offline,
into a temporary directory; what uses it runs in a subprocess with that directory on its path,
so this process's registry never sees it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memoryscope import MemoryScope
from memoryscope.errors import ConfigError
from memoryscope.worker import WORKERS

pytestmark = pytest.mark.slow  # builds and installs a worker package in subprocesses; `-m "not slow"` leaves it out

EXAMPLE = Path(__file__).parent / "example_worker_project"

CONFIG = """\
global: {timezone: UTC}
worker:
  loud: {class: shout, mark: "!!"}
memory_service:
  memoryscope_service:
    memory_operations:
      shout_query: {workflow: "set_query,loud,shout", description: "shout the query twice"}
"""

RUN = """\
import json, sys
from memoryscope import MemoryScope
from memoryscope.worker import WORKERS
with MemoryScope(sys.argv[1]) as scope:
    result = scope.default_service.run_operation("shout_query", query="  hello ")
print(json.dumps({"query": result.context.query, "steps": [name for name, _ in result.timings]}))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`pip install` the example project (no network, no build isolation) into a directory."""
    try:  # its version, not an import: importing setuptools patches distutils in this process
        setuptools = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("building the example project needs setuptools here")
    if _version(setuptools) < (70, 1) and importlib.util.find_spec("wheel") is None:
        pytest.skip("building a wheel without network needs setuptools>=70.1 (or the `wheel` package) here")
    work = tmp_path_factory.mktemp("example")
    source = work / "source"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))  # builds in place
    target = work / "site"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
    done = subprocess.run([*command, "--target", str(target), str(source)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return target


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2] if part.isdigit())


def run(installed: Path, *args: str, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    paths = [str(extra_path)] if extra_path else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, str(installed)])}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=120)


def test_an_installed_worker_is_named_in_a_config_and_runs(installed: Path, tmp_path: Path) -> None:
    """`class: shout` in `worker:`, and `shout` straight in a workflow, both with its own Params."""
    config = tmp_path / "shout.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    done = run(installed, "-c", RUN, str(config))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"query": "HELLO!!!", "steps": ["set_query", "loud", "shout"]}
    assert "shout" not in WORKERS  # this process never loaded it


def test_memoryscope_workers_shows_where_an_installed_worker_comes_from(installed: Path, tmp_path: Path) -> None:
    done = run(installed, "-m", "memoryscope.cli", "workers", "shout", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["source"] == shown["distribution"] == "memoryscope-shout-worker 1.0.0"
    assert (shown["class"], shown["reads"], shown["writes"]) == ("shout_worker.ShoutWorker", ["query"], ["query"])
    assert shown["params"] == [
        {
            "name": "mark",
            "type": "str",
            "bounds": ["length <= 10"],
            "required": False,
            "default": "!",
            "description": "What the shouted query ends with.",
        }
    ]


def test_broken_entry_points_warn_and_fail_only_the_configs_that_name_them(installed: Path, tmp_path: Path) -> None:
    """A distribution with a missing module, a non-worker and a built-in's name beside the example."""
    info = tmp_path / "broken_plugins-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugins\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[memoryscope.workers]\n"
        "missing = no_such_module_for_workers:Thing\n"
        "not_a_worker = json:dumps\n"
        "set_query = shout_worker:ShoutWorker\n",
        encoding="utf-8",
    )
    fine = tmp_path / "fine.yaml"
    fine.write_text(CONFIG, encoding="utf-8")
    naming = tmp_path / "naming.yaml"
    naming.write_text(CONFIG.replace("{class: shout,", "{class: missing,"), encoding="utf-8")

    done = run(installed, "-m", "memoryscope.cli", "check-config", str(fine), str(naming), extra_path=tmp_path)
    assert done.returncode == 1
    assert f"ok   {fine}" in done.stdout
    assert f"FAIL {naming}" in done.stderr
    assert (
        "worker.loud.class: worker entry point `missing = no_such_module_for_workers:Thing` of broken-plugins 1.0 "
        "(group memoryscope.workers) cannot be loaded: ModuleNotFoundError: No module named 'no_such_module_for_workers'; "
        "fix it or uninstall it (pip uninstall broken-plugins)"
    ) in done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING memoryscope.registry")]
    assert len(warnings) == 3, done.stderr
    assert "`set_query = shout_worker:ShoutWorker` of broken-plugins 1.0" in done.stderr
    assert "which is already memoryscope.workers.set_query.SetQueryWorker (built in)" in done.stderr

    listing = run(installed, "-m", "memoryscope.cli", "workers", "--json", extra_path=tmp_path)
    assert listing.returncode == 0, listing.stderr
    shown: dict[str, Any] = json.loads(listing.stdout)
    by_name = {worker["name"]: worker for worker in shown["workers"]}
    assert by_name["set_query"]["source"] == "built in"
    assert by_name["shout"]["source"] == "memoryscope-shout-worker 1.0.0"
    assert sorted(item["name"] for item in shown["broken_entry_points"]) == ["missing", "not_a_worker", "set_query"]


LOUD_MODULE = """\
from typing import ClassVar

from pydantic import Field

from memoryscope.worker import Worker, WorkerParams


class LoudWorker(Worker):
    reads: ClassVar[tuple[str, ...]] = ("query",)
    writes: ClassVar[tuple[str, ...]] = ("query",)

    class Params(WorkerParams):
        times: int = Field(2, gt=0, le=5, description="How often to say it.")

    def run(self, ctx):
        ctx.query = " ".join([ctx.query.upper()] * self.params.times)
"""


def test_a_dotted_path_names_a_worker_without_installing_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "loud_worker_for_tests.py").write_text(LOUD_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "loud_worker_for_tests", raising=False)
    config: dict[str, Any] = {
        "global": {"timezone": "UTC"},
        "worker": {"loud": {"class": "loud_worker_for_tests.LoudWorker", "times": 3}},
        "memory_service": {"memoryscope_service": {"memory_operations": {"shout_query": {"workflow": "set_query,loud"}}}},
    }
    with MemoryScope(config=config) as scope:
        assert scope.default_service.run_operation("shout_query", query="hi ").context.query == "HI HI HI"
    assert "loud_worker_for_tests.LoudWorker" not in WORKERS.names()  # used, not registered

    config["worker"]["loud"]["times"] = 9
    with pytest.raises(ConfigError, match=r"worker\.loud\.times: Input should be less than or equal to 5"):
        MemoryScope(config=config)
