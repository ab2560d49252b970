"""`_arrays.empty`: large arrays on an anonymous memory map (no huge-page request), small ones from numpy."""

from __future__ import annotations

import gc
import mmap

import numpy as np

from memoryscope.stores._arrays import empty


def _mapped(array: np.ndarray) -> bool:
    base: object = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):  # what np.frombuffer holds on to
        base = base.obj
    return isinstance(base, mmap.mmap)


def test_a_large_array_lives_on_a_memory_map_and_is_writable() -> None:
    matrix = empty((3000, 384), np.float32)  # 4.6 MB
    assert matrix.shape == (3000, 384) and matrix.dtype == np.float32
    assert _mapped(matrix)
    matrix[:] = 2.5
    matrix[-1, -1] = -1.0
    assert float(matrix.sum()) == 2.5 * 3000 * 384 - 3.5


def test_a_small_array_comes_from_numpy() -> None:
    column = empty(1000, np.int64)
    assert column.shape == (1000,) and column.dtype == np.int64
    assert not _mapped(column)


def test_a_view_keeps_the_map_alive_after_the_array_is_gone() -> None:
    matrix = empty(1 << 20, np.float64)  # 8 MB
    matrix[:] = np.arange(1 << 20)
    tail = matrix[-3:]
    del matrix
    gc.collect()
    assert tail.tolist() == [(1 << 20) - 3, (1 << 20) - 2, (1 << 20) - 1]


def test_a_zero_sized_array() -> None:
    assert empty((0, 384), np.float32).shape == (0, 384)
