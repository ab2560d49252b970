"""Per-key request rates: a token bucket per API key name (`RateLimiter`), for 429 with `Retry-After`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["RateLimiter"]


class RateLimiter:
    """A token bucket per key name: `burst` requests at once (default `per_minute`), refilled at
    `per_minute / 60` a second. `per_minute=0` means no limit. Thread-safe.

    A bucket that has filled up again is the same as no bucket, so full buckets are forgotten
    whenever the table doubles; `max_buckets` caps it even when every bucket is in use (the
    oldest-used one is forgotten first, which only ever lets its caller in sooner).
    """

    def __init__(
        self,
        per_minute: int,
        *,
        burst: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_buckets: int = 100_000,
    ) -> None:
        if per_minute < 0:
            raise ValueError(f"per_minute must be 0 (no limit) or more, got {per_minute}")
        if burst is not None and burst < 1:
            raise ValueError(f"burst must be at least 1 (requests allowed at once), got {burst}")
        if max_buckets < 1:
            raise ValueError(f"max_buckets must be at least 1, got {max_buckets}")
        self.per_minute = per_minute
        self.capacity = float(burst if burst is not None else per_minute)
        self.max_buckets = max_buckets
        self._per_second = per_minute / 60.0
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # key name -> (tokens, when counted); oldest-used first
        self._sweep_at = 1024

    def check(self, key_name: str) -> float | None:
        """None when `key_name` may make a request now (a token is taken); otherwise the seconds
        until it may (> 0, for a Retry-After header; round it up)."""
        if self.per_minute == 0:
            return None
        with self._lock:
            now = self._clock()
            tokens = self._tokens(key_name, now)
            self._buckets.pop(key_name, None)  # re-inserted below, so the dict stays in order of use
            if tokens >= 1.0:
                self._buckets[key_name] = (tokens - 1.0, now)
                wait = None
            else:
                self._buckets[key_name] = (tokens, now)
                wait = (1.0 - tokens) / self._per_second
            self._bound(now)
            return wait

    def bucket_count(self) -> int:
        """How many buckets are remembered (the others are full). Not `__len__`: a limiter with
        no buckets must not be falsy."""
        with self._lock:
            return len(self._buckets)

    def _tokens(self, key_name: str, now: float) -> float:
        tokens, then = self._buckets.get(key_name, (self.capacity, now))
        return min(self.capacity, tokens + max(0.0, now - then) * self._per_second)

    def _bound(self, now: float) -> None:
        if len(self._buckets) >= self._sweep_at:
            full = [name for name in self._buckets if self._tokens(name, now) >= self.capacity]
            for name in full:
                del self._buckets[name]
            self._sweep_at = max(1024, 2 * len(self._buckets))
        while len(self._buckets) > self.max_buckets:
            del self._buckets[next(iter(self._buckets))]
