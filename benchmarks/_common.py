"""What every benchmark shares: percentiles, progress on stderr, machine facts, JSON and tables."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from memoryscope.progress import StderrProgress

__all__ = [
    "Progress",
    "config_overrides",
    "disk_mb",
    "machine",
    "percentiles_ms",
    "print_table",
    "rss_mb",
    "run_stamp",
    "write_json",
]


def percentiles_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50 and p95 of durations given in seconds, in milliseconds (rounded to 0.001 ms)."""
    if not seconds:
        return {"p50": float("nan"), "p95": float("nan")}
    values = np.asarray(seconds, dtype=np.float64) * 1000.0
    return {"p50": round(float(np.percentile(values, 50)), 3), "p95": round(float(np.percentile(values, 95)), 3)}


class Progress(StderrProgress):
    """The library's `StderrProgress`, started on construction: `Progress("ingest", 4124)`, then
    `advance(n)` and `close()`. A line is shown every `log_every_s` seconds (default: redrawn
    five times a second on a terminal, every 5 s in a log), so long runs show they are alive."""

    def __init__(self, label: str, total: int, unit: str = "items", log_every_s: float | None = None) -> None:
        super().__init__(interval_s=log_every_s)
        self.unit = unit
        self.start(f"{label} ({unit})", total)

    def close(self) -> None:
        self.finish()


def machine() -> dict[str, Any]:
    """Cores, memory and versions: numbers only compare on the same machine."""
    memory_gb = None
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    memory_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "memory_gb": memory_gb,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


def run_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def rss_mb(peak: bool = False) -> float:
    """This process's resident memory now (or its peak), in MiB."""
    key = "VmHWM:" if peak else "VmRSS:"
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(key):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    import resource  # not on Windows; Linux has /proc above anyway

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def disk_mb(database: Path) -> float:
    """Size of an SQLite file with its -wal and -shm companions and the matrix snapshots beside
    it (`<file>-snapshots/`, the SQLite store's), in MiB."""
    total = 0
    for suffix in ("", "-wal", "-shm"):
        path = Path(f"{database}{suffix}")
        if path.exists():
            total += path.stat().st_size
    snapshots = Path(f"{database}-snapshots")
    for path in snapshots.iterdir() if snapshots.is_dir() else ():
        with contextlib.suppress(FileNotFoundError):  # one being replaced meanwhile
            total += path.stat().st_size
    return round(total / 1024 / 1024, 2)


def write_json(path: str | Path, data: dict[str, Any]) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], file: Any = None) -> None:
    """A plain aligned text table (stdout by default)."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max(len(str(h)), *(len(row[i]) for row in cells)) if cells else len(str(h)) for i, h in enumerate(headers)]
    out = file or sys.stdout
    print("  ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True)), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for row in cells:
        print("  ".join(value.ljust(w) for value, w in zip(row, widths, strict=True)), file=out)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def config_overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """`--set KEY=VALUE` pairs as config overrides, each value read as YAML (`1.5`, `true`, `[a, b]`)."""
    import yaml

    overrides: dict[str, Any] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise SystemExit(f"--set takes KEY=VALUE, got {pair!r}")
        overrides[key.strip()] = yaml.safe_load(value)
    return overrides
