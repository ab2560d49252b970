"""Settings for the whole test run."""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Iterator
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from memoryscope.models.embedding.local_embedding import LocalEmbedding
    from memoryscope.testing.fake_openai import FakeOpenAIServer

# Set before any test loads the local embedding engine: its OpenMP threads otherwise spin
# between calls and slow everything else on a 2-core machine.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Every workflow run in the tests checks that each worker reads and writes only what it declares
# (memoryscope.workflow.io_check); `MEMORYSCOPE_CHECK_WORKER_IO=0 pytest` turns it off.
os.environ.setdefault("MEMORYSCOPE_CHECK_WORKER_IO", "1")
# A shell that starts a job in the background (`nohup pytest &`) hands it Ctrl-C ignored, and an
# ignored signal stays ignored across exec: the tests that press Ctrl-C on a child process would
# wait for it in vain. Caught here, it is reset to the default in every child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The fixtures `fake_openai`, `local_embedding` and `no_network` come from MemoryScope's pytest
# plugin. An install made from this setup.py registers it already (the `pytest11` entry point);
# loading it twice would fail, so load it here only when it is not registered.
PLUGIN = "memoryscope.testing.pytest_plugin"
if not any(point.value == PLUGIN for point in entry_points(group="pytest11")):
    pytest_plugins = [PLUGIN]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Why tests were skipped, one line a reason (a browser or a server missing shows in CI's log);
    and, since pytest-randomly shuffles the tests and `-q` hides its header, how to repeat the order."""
    reasons = Counter(
        str(report.longrepr[2]).removeprefix("Skipped: ")
        for report in terminalreporter.stats.get("skipped", [])
        if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3
    )
    for reason, count in sorted(reasons.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"skipped {count}: {reason}")
    seed = getattr(config.option, "randomly_seed", None)
    if isinstance(seed, int) and config.pluginmanager.has_plugin("randomly"):
        line = f"tests ran in random order; repeat it with --randomly-seed={seed}; turn it off with -p no:randomly"
        terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _network_off(no_network: None) -> None:
    """Nothing in this suite reaches the internet: a download or lookup attempted by any library
    fails loudly instead of passing by luck. Only loopback (the fake servers) answers."""


@pytest.fixture
def server(fake_openai: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    """The suite's short name for `fake_openai`; modules that fake another server override it."""
    yield fake_openai


@pytest.fixture(scope="session")
def embedding(local_embedding: LocalEmbedding) -> LocalEmbedding:
    """The suite's short name for `local_embedding`."""
    return local_embedding


@pytest.fixture(scope="session")
def embedding_model(local_embedding: LocalEmbedding) -> LocalEmbedding:
    """The suite's name for `local_embedding` where stores take it as `embedding_model`."""
    return local_embedding


_GUARDED_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL", "MEMORYSCOPE_STORE_PATH")


@pytest.fixture(autouse=True)
def _environment_kept() -> Iterator[None]:
    """A test leaves the model and store variables as it found them: one that leaks them would make
    every later test that starts offline (the demo, a served benchmark) reach a server long gone.
    The leak is put right and the test that made it fails, naming it."""
    before = {name: os.environ.get(name) for name in _GUARDED_ENV}
    yield
    after = {name: os.environ.get(name) for name in _GUARDED_ENV}
    if after != before:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        changed = sorted(name for name in _GUARDED_ENV if after[name] != before[name])
        pytest.fail(f"this test left {', '.join(changed)} changed in the environment; use monkeypatch")
