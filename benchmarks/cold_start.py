"""Cold start of `memoryscope serve` at size: from the process starting to `/healthz` answering,
and to its first search (`POST /v1/users/{user}/search`, query embedded by the server) answered.

The store is filled once as `benchmarks.serve_load`'s `retrieve_10k` fills one (synthetic text,
random unit vectors, the hash embedding the server uses, `size` memories for the measured user and
`size / 16` for each of 4 others) and kept in `--folder`, so runs and trees can share the work of
filling; each run then starts a new server process (`--workers 1`), so nothing of a run is warm but
the OS file cache. Target (issue 34): ready and a first retrieve answered within 2 s at 100k.

`--bytecode cached` (the default) starts the server as an installed package starts: Python's
compiled modules are kept (under `--folder`/pycache, whatever `PYTHONDONTWRITEBYTECODE` says) and
one untimed start fills them first. `--bytecode none` sets `PYTHONDONTWRITEBYTECODE`, so each
start compiles every module from its source: what a checkout run with that variable pays (the
sessions that measured benchmarks README §2b ran with it set).

    python -m benchmarks.cold_start --size 100000 --folder /tmp/cold-100k --runs 3 --out cold.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks._serve_processes import REPO, _environment, _free_port, code_version, cpu_seconds, server_config
from benchmarks._serve_retrieve import MEASURED_USER, fill_store
from benchmarks._synthetic import BASE_TIME, SyntheticText

__all__ = ["main"]

TARGET_S = 2.0
_POLL_S = 0.01


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = server_config(args.config, folder, llm_url=None)
    if not (folder / "memories.db").exists():
        _fill(config, args.size, args.seed)
    query = SyntheticText(seed=args.seed).queries(1, np.random.default_rng(args.seed + 1))[0]
    environment = _bytecode_environment(args.bytecode, folder)
    if args.bytecode == "cached":
        _one_start(config, folder, query, environment)  # compiles what the timed starts then load
    runs = [_one_start(config, folder, query, environment) for _ in range(args.runs)]
    result = {
        "size": args.size,
        "code": code_version(),
        "bytecode": args.bytecode,
        "runs": runs,
        "healthz_s_median": statistics.median(run["healthz_s"] for run in runs),
        "first_search_s_median": statistics.median(run["first_search_s"] for run in runs),
        "first_search_cpu_s_median": _median(run["first_search_cpu_s"] for run in runs),
        "target_s": TARGET_S,
    }
    result["met"] = result["first_search_s_median"] <= TARGET_S
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for run in runs:
        print(f"healthz {run['healthz_s']:.2f} s, first search answered {run['first_search_s']:.2f} s "
              f"(the search itself {run['search_s']:.2f} s, {run['memories']} memories; server CPU "
              f"{run['healthz_cpu_s']} / {run['first_search_cpu_s']} s)")  # fmt: skip
    print(f"median: healthz {result['healthz_s_median']:.2f} s, first search {result['first_search_s_median']:.2f} s "
          f"(target {TARGET_S:g} s: {'met' if result['met'] else 'not met'}); wrote {args.out}")  # fmt: skip
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cold_start", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="memories of the measured user (when filling)")
    parser.add_argument("--folder", required=True, help="where the store is (filled first when missing)")
    parser.add_argument("--runs", type=int, default=3, help="server starts to time")
    parser.add_argument("--config", default="default", help="config name or YAML path (default: default)")
    parser.add_argument("--bytecode", choices=["cached", "none"], default="cached",
                        help="cached: compiled modules kept, as installed (default); none: compiled at every start")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="where to write the JSON result")
    return parser


def _fill(config: Path, size: int, seed: int) -> None:
    fill_store(config, size, seed, "cold_start: insert")


def _bytecode_environment(bytecode: str, folder: Path) -> dict[str, str]:
    """The server's environment: the benchmark's, with compiled modules kept under `folder`
    (`cached`: one tree per source path, so trees and runs share it safely) or never written."""
    environment = _environment()
    if bytecode == "cached":
        environment.pop("PYTHONDONTWRITEBYTECODE", None)
        environment["PYTHONPYCACHEPREFIX"] = str((folder / "pycache").resolve())
    else:
        environment["PYTHONDONTWRITEBYTECODE"] = "1"
        environment.pop("PYTHONPYCACHEPREFIX", None)
    return environment


def _one_start(config: Path, folder: Path, query: str, environment: dict[str, str]) -> dict[str, Any]:
    """Start a server, poll `/healthz` until it answers, then send one search; the times from the
    start. The server is stopped (SIGTERM) and waited for."""
    url = f"http://127.0.0.1:{_free_port()}"
    command = [sys.executable, "-m", "memoryscope.cli", "serve", "--config", str(config), "--port", url.rsplit(":", 1)[1],
               "--workers", "1", "--log-level", "warning"]  # fmt: skip
    body = {"query": query, "top_k": 10, "query_time": (BASE_TIME + timedelta(days=366)).isoformat()}
    with (folder / "server-cold.log").open("wb") as log, httpx.Client(base_url=url, timeout=60.0) as client:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=REPO, env=environment, stdout=log, stderr=subprocess.STDOUT)
        try:
            while True:
                if process.poll() is not None:
                    raise SystemExit(f"memoryscope serve exited ({process.returncode}); see {folder / 'server-cold.log'}")
                try:
                    if client.get("/healthz", timeout=1.0).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(_POLL_S)
            healthz_s = time.perf_counter() - started
            healthz_cpu_s = _cpu_seconds(process.pid)
            response = client.post(f"/v1/users/{MEASURED_USER}/search", json=body)
            response.raise_for_status()
            first_s = time.perf_counter() - started
            first_cpu_s = _cpu_seconds(process.pid)
        finally:
            process.terminate()
            process.wait(60)
    return {
        "healthz_s": round(healthz_s, 3),
        "first_search_s": round(first_s, 3),
        "search_s": round(first_s - healthz_s, 3),
        # the server's own CPU seconds by then: what a busy machine's waiting leaves out (None off Linux)
        "healthz_cpu_s": healthz_cpu_s,
        "first_search_cpu_s": first_cpu_s,
        "memories": len(response.json()["memories"]),
    }


def _median(values: Iterable[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None


def _cpu_seconds(pid: int) -> float | None:
    return cpu_seconds(pid) if Path("/proc/self/stat").exists() else None


if __name__ == "__main__":
    raise SystemExit(main())
