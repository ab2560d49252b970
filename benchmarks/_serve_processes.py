"""What `benchmarks.serve_load` runs and watches: `memoryscope serve`, the fake LLM, their config.

`Server` and `FakeLLM` are real subprocesses on 127.0.0.1 with their output in a log file, started
on a free port and waited for until they answer, stopped with SIGTERM (as a process manager stops
them) and waited for. `server_config` writes the YAML the server runs (the given config with a
temporary store, the hash embedding and the fake LLM); `cpu_seconds` reads a process tree's CPU
time from /proc (uvicorn's workers are its children); `log_summary` sums up what a server logged
besides its INFO lines; `percentiles` gives p50/p95/p99 in ms.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx
import numpy as np
import yaml

from memoryscope.config import load_config

__all__ = [
    "REPO",
    "HASH_CLASS",
    "FakeLLM",
    "Server",
    "server_config",
    "code_version",
    "cpu_seconds",
    "log_summary",
    "percentiles",
]

REPO = Path(__file__).resolve().parents[1]
HASH_CLASS = "benchmarks._hash_embedding.HashEmbedding"
_Process = TypeVar("_Process", bound="_Subprocess")


def server_config(base: str, folder: Path, llm_url: str | None, scheduler: bool = True) -> Path:
    """A YAML extending `base`: store in `folder`, the hash embedding, the fake LLM (or none), and
    the services' background scheduler on (as configured) or off."""
    extends = str(Path(base).resolve()) if Path(base).suffix in (".yaml", ".yml") else base
    generation: dict[str, Any] = {"api_base": llm_url or "", "model_name": "fake-llm"}
    data: dict[str, Any] = {
        "extends": extends,
        "memory_store": {"path": str(folder / "memories.db")},
        "model": {"embedding_model": {"class": HASH_CLASS, "dimension": 384}, "generation_model": generation},
    }
    if not scheduler:
        data["memory_service"] = {name: {"enable_scheduler": False} for name in load_config(base).services}
    path = folder / "serve.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def code_version() -> str:
    """The commit measured, `+changes` when the working tree differs from it."""

    def git(*arguments: str) -> str:
        return subprocess.run(["git", *arguments], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()

    try:
        commit, changes = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+changes" if changes else "")


def percentiles(seconds: Sequence[float]) -> dict[str, float]:
    if not seconds:
        return {"p50": float("nan"), "p95": float("nan"), "p99": float("nan")}
    values = np.asarray(seconds, dtype=np.float64) * 1000.0
    return {f"p{q}": round(float(np.percentile(values, q)), 3) for q in (50, 95, 99)}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid` and its live descendants (uvicorn's worker processes)."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        ticks[int(entry.name)] = int(fields[11]) + int(fields[12])
    family, grew = {pid}, True
    while grew:
        children = {child for child, parent in parents.items() if parent in family} - family
        family |= children
        grew = bool(children)
    return round(sum(ticks.get(member, 0) for member in family) / os.sysconf("SC_CLK_TCK"), 2)


def log_summary(path: Path) -> dict[str, Any]:
    """What a server logged besides its banner and INFO lines (with --workers > 1 the workers print
    bare messages, without level or logger), the errors among it, and a few distinct lines."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines() if path.exists() else []
    problems = [line for line in lines if line.strip() and not line.startswith(("memoryscope: serving", "INFO"))]
    distinct = Counter(re.sub(r"\d+", "N", line)[:300] for line in problems)
    return {
        "lines": len(problems),
        "errors": sum(bool(re.search(r"ERROR|CRITICAL|Traceback|Exception", line)) for line in problems),
        "database_locked": sum("database is locked" in line for line in lines),
        "distinct": [{"line": line, "count": count} for line, count in distinct.most_common(8)],
    }


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))  # the hash embedding's module
    env["MEMORYSCOPE_LLM_API_KEY"] = "sk-benchmark"
    return env


def _wait_ready(url: str, process: subprocess.Popen[bytes], what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited ({process.returncode}) before answering")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{what} did not answer {url} within {timeout_s:g}s")


class _Subprocess:
    """A child process with its output in a log file, stopped by SIGTERM and waited for."""

    process: subprocess.Popen[bytes]
    exit_code: int | None = None
    stop_s: float | None = None

    def __init__(self, command: list[str], log_path: Path, ready_url: str, what: str) -> None:
        self.command, self.log_path, self.ready_url, self.what = command, log_path, ready_url, what

    def __enter__(self: _Process) -> _Process:
        started = time.perf_counter()
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(self.command, cwd=REPO, env=_environment(), stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_ready(self.ready_url, self.process, self.what)
        except BaseException:
            self.__exit__()
            raise
        print(f"{self.what}: ready in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        return self

    def __exit__(self, *exc_info: object) -> None:
        started = time.perf_counter()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # as a process manager stops it: uvicorn's graceful shutdown
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.exit_code = self.process.returncode
        self.stop_s = round(time.perf_counter() - started, 2)
        print(f"{self.what}: stopped in {self.stop_s:.1f}s (exit status {self.exit_code})", file=sys.stderr)


class Server(_Subprocess):
    """`memoryscope serve --config CONFIG --workers N` on a free port of 127.0.0.1 (`url`); ready
    when `/readyz` answers 200."""

    def __init__(self, config: Path, workers: int, folder: Path) -> None:
        self.url = f"http://127.0.0.1:{_free_port()}"
        port = self.url.rsplit(":", 1)[1]
        command = [sys.executable, "-m", "memoryscope.cli", "serve", "--config", str(config), "--port", port,
                   "--workers", str(workers), "--log-level", "warning"]  # fmt: skip
        what = f"memoryscope serve --workers {workers}"
        super().__init__(command, folder / f"server-{workers}.log", f"{self.url}/readyz", what)


class FakeLLM(_Subprocess):
    """`python -m memoryscope.testing.fake_openai` on a free port; its API base is `base_url`."""

    def __init__(self, folder: Path) -> None:
        port = _free_port()
        self.base_url = f"http://127.0.0.1:{port}/v1"
        command = [sys.executable, "-m", "memoryscope.testing.fake_openai", "--port", str(port)]
        super().__init__(command, folder / "fake-llm.log", f"{self.base_url}/models", "the fake LLM server")
