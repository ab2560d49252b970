"""Progress of long jobs (export, import, migrate, re-embed), reported without a dependency.

Library functions take a `Progress` and call `start`, `advance`, `note` and `finish` on it; the
base class ignores every call, so passing none is silent. `StderrProgress` prints count/total,
percent, rate and time left to stderr: one line redrawn in place on a terminal, a full line
every few seconds otherwise (so logs and CI output stay readable)::

    progress = StderrProgress()
    progress.start("export", total=12_000)
    for batch in batches:
        progress.advance(len(batch))
    progress.finish()
    # export: 12,000/12,000 (100%) in 3.2s, 3,750/s
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["Progress", "StderrProgress"]


class Progress:
    """Receives the progress of one task at a time; this base ignores it (silent)."""

    def start(self, task: str, total: int | None = None) -> None:
        """A task begins; `total` is how many items it will count, when known."""

    def advance(self, count: int = 1) -> None:
        """`count` more items are done."""

    def note(self, message: str) -> None:
        """A one-line remark for the person watching (what is copied, what is skipped)."""

    def finish(self) -> None:
        """The task is done (or stopped); a summary may be shown."""


class StderrProgress(Progress):
    """Progress as text on stderr (or `stream`): `migrate: 1,200/5,000 (24%) 850/s, 4s left`."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        interval_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`interval_s`: seconds between lines (default 0.2 on a terminal, 5 otherwise)."""
        self._stream = stream
        self._interval_s = interval_s
        self._clock = clock
        self._task = ""
        self._total: int | None = None
        self._done = 0
        self._started = 0.0
        self._shown = 0.0
        self._open_line = False  # a redrawn line is on screen without its newline

    @property
    def stream(self) -> TextIO:
        # looked up when printing, so a stderr swapped after construction (pytest capture) is used
        return self._stream if self._stream is not None else sys.stderr

    @property
    def done(self) -> int:
        return self._done

    def _interactive(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def start(self, task: str, total: int | None = None) -> None:
        self._end_line()
        self._task, self._total, self._done = task, total, 0
        self._started = self._shown = self._clock()

    def advance(self, count: int = 1) -> None:
        self._done += count
        now = self._clock()
        interval = self._interval_s if self._interval_s is not None else (0.2 if self._interactive() else 5.0)
        if now - self._shown >= interval:
            self._shown = now
            self._show(self._status(now))

    def note(self, message: str) -> None:
        self._end_line()
        self.stream.write(f"{self._task + ': ' if self._task else ''}{message}\n")
        self.stream.flush()

    def finish(self) -> None:
        elapsed = max(self._clock() - self._started, 1e-9)
        counted = f"{self._done:,}/{self._total:,}" if self._total is not None else f"{self._done:,}"
        percent = f" ({self._percent()})" if self._total else ""
        self._end_line()
        self.stream.write(f"{self._task}: {counted}{percent} in {elapsed:.1f}s, {self._done / elapsed:,.0f}/s\n")
        self.stream.flush()

    def _percent(self) -> str:
        return f"{100 * self._done / self._total:.0f}%" if self._total else ""

    def _status(self, now: float) -> str:
        elapsed = max(now - self._started, 1e-9)
        rate = self._done / elapsed
        if self._total is None:
            return f"{self._task}: {self._done:,} ({rate:,.0f}/s)"
        left = ""
        if rate > 0 and self._done < self._total:
            left = f", {_duration((self._total - self._done) / rate)} left"
        return f"{self._task}: {self._done:,}/{self._total:,} ({self._percent()}) {rate:,.0f}/s{left}"

    def _show(self, line: str) -> None:
        if self._interactive():
            self.stream.write("\r\x1b[2K" + line)  # carriage return, clear the line, redraw
            self._open_line = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def _end_line(self) -> None:
        """Clear a redrawn status line, so the next full line takes its place."""
        if self._open_line:
            self.stream.write("\r\x1b[2K")
            self._open_line = False


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
