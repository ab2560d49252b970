"""Large numpy arrays on plain memory pages, for the SQLite store's per-user matrices.

numpy asks the kernel for transparent huge pages for every allocation of 4 MiB or more
(`madvise(MADV_HUGEPAGE)`). Where the kernel then compacts memory to find them as the pages are
first written (`/sys/kernel/mm/transparent_hugepage/defrag` set to `madvise`, a common default),
filling a fresh 100k x 384 float32 matrix (150 MB) took 0.3-1.8 s on our test machine, against
~0.15 s on plain pages, and scanning it afterwards was equally fast either way. A matrix is
filled on a user's first search, so that time is on the caller's path. An anonymous memory map
is memory numpy did not allocate, so it makes no such request; the kernel's own policy applies.
"""

from __future__ import annotations

import math
import mmap

import numpy as np
from numpy.typing import DTypeLike

__all__ = ["empty"]

_MAPPED_FROM_BYTES = 1 << 22  # numpy's own threshold for asking for huge pages
# private (copy on write in a forked process, like numpy's own memory), where the platform says so
_PRIVATE = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # Linux


def empty(shape: int | tuple[int, ...], dtype: DTypeLike, *, populate: bool = False) -> np.ndarray:
    """`np.empty(shape, dtype)`, on plain pages when it is large: an anonymous memory map that
    lives as long as the array (and views of it) do.

    `populate`: for an array about to be written whole (a matrix read from its snapshot or
    loaded row by row), the kernel maps every page at once instead of taking a page fault per
    4 KiB as they are first written: reading a 150 MB snapshot took 66-79 ms that way against
    111-126 ms. Left off for room that may stay unused (a grown matrix's second half)."""
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    kind = np.dtype(dtype)
    size = math.prod(dims) * kind.itemsize
    if size < _MAPPED_FROM_BYTES:
        return np.empty(dims, dtype=kind)
    if not _PRIVATE:  # not a POSIX platform: whatever mapping it gives
        return np.frombuffer(mmap.mmap(-1, size), dtype=kind).reshape(dims)
    flags = _PRIVATE | (_POPULATE if populate else 0)
    return np.frombuffer(mmap.mmap(-1, size, flags=flags), dtype=kind).reshape(dims)
