"""The engine's heap trim (heap_trim.py): freed heap goes back to the OS, once per burst."""

import ctypes
import ctypes.util
import sys

import pytest

from dllm_engine.heap_trim import HeapTrimmer

glibc = pytest.mark.skipif(not sys.platform.startswith("linux") or HeapTrimmer()._trim is None,
                           reason="malloc_trim is glibc's")


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


@glibc
def test_trim_returns_freed_heap_below_a_live_chunk():
    """200 MB of 64 KB chunks (below malloc's mmap threshold: on the heap), all freed but the
    last: glibc keeps them resident, since only the top of a heap shrinks by itself."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    chunks = [libc.malloc(64 * 1024) for _ in range(3200)]
    assert all(chunks)
    for c in chunks:
        ctypes.memset(c, 1, 64 * 1024)  # touch every page: resident
    for c in chunks[:-1]:
        libc.free(c)
    held = rss_mb()
    trimmer = HeapTrimmer(min_interval_s=0)
    assert trimmer.maybe_trim(work_done=1)
    try:
        assert held - rss_mb() > 100, f"RSS {held:.0f} -> {rss_mb():.0f} MB"
    finally:
        libc.free(chunks[-1])


@glibc
def test_trims_once_per_burst_and_at_most_once_per_interval():
    trimmer = HeapTrimmer(min_interval_s=3600)
    assert not trimmer.maybe_trim(work_done=0)  # nothing ran yet
    assert trimmer.maybe_trim(work_done=5)  # a burst ended
    assert not trimmer.maybe_trim(work_done=5)  # still idle, nothing new
    assert not trimmer.maybe_trim(work_done=9)  # new work, but within the interval
    assert trimmer.trims == 1
    assert HeapTrimmer(min_interval_s=0).maybe_trim(work_done=1)
