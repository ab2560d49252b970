"""`_arrays.empty`: large arrays on an anonymous memory map (no huge-page request), small ones from numpy."""

from __future__ import annotations

import gc
import mmap
import os

import numpy as np
import pytest

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


def _resident_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * mmap.PAGESIZE


@pytest.mark.skipif(not hasattr(mmap, "MAP_POPULATE") or not os.path.exists("/proc/self/statm"), reason="Linux only")
def test_a_populated_array_is_resident_before_it_is_written_and_a_plain_one_is_not() -> None:
    size = 64 << 20
    before = _resident_bytes()
    lazy = empty(size, np.uint8)
    after_lazy = _resident_bytes()
    populated = empty(size, np.uint8, populate=True)
    after_populated = _resident_bytes()
    assert after_lazy - before < size // 4
    assert after_populated - after_lazy > size * 3 // 4
    assert _mapped(populated) and int(populated[::4096].sum()) == 0  # zero-filled, as a fresh map is
    populated[:] = 7
    assert int(populated[-1]) == 7 and lazy.shape == (size,)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_process_writes_its_own_copy() -> None:
    matrix = empty((4000, 384), np.float32)
    matrix[:] = 1.0
    child = os.fork()
    if child == 0:  # the child: write everywhere, then leave without running pytest's teardown
        matrix[:] = 9.0
        os._exit(0 if float(matrix[0, 0]) == 9.0 else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert float(matrix.max()) == 1.0  # a server's forked workers must not write into each other's matrices
