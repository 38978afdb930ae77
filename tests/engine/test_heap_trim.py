"""The engine's heap trim (heap_trim.py): freed heap goes back to the OS, once per burst."""

import ctypes
import ctypes.util
import os
import sys
import time

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


@glibc
def test_trim_empties_mkls_buffer_pool():
    """torch's CPU bf16 flash attention takes its GEMM buffers from MKL's pool, which keeps them
    for good (65-69 MB in the language server's soak): the trim frees them too."""
    import torch
    import torch.nn.functional as F

    trimmer = HeapTrimmer(min_interval_s=0)
    if trimmer._free_mkl is None:
        pytest.skip("this torch has no MKL")
    # bytes in MKL's pool (and buffers, through the pointer), read from the library that frees them
    mem_stat = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")).mkl_serv_mem_stat
    mem_stat.restype = ctypes.c_int64
    held = ctypes.c_int(0)
    q, k = torch.randn(1, 8, 30, 64).bfloat16(), torch.randn(1, 8, 900, 64).bfloat16()
    F.scaled_dot_product_attention(q, k, k, attn_mask=torch.ones(1, 1, 1, 900, dtype=torch.bool))
    if mem_stat(ctypes.byref(held)) == 0:
        pytest.skip("this CPU's bf16 attention took no MKL buffer")
    assert trimmer.maybe_trim(work_done=1)
    assert mem_stat(ctypes.byref(held)) == 0 and held.value == 0


@glibc
def test_a_burst_of_calls_alone_is_trimmed(tiny_shifted_model):
    """Next edit and scoring run as calls on the engine thread and run no pass: the trimmer
    counts them as work, or a next-edit burst's freed heap stays resident (~400 MB of the
    default model's, with the threshold raised for its forwards; twenty-fourth session)."""
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.protocol import ScoreRequest

    e = Engine(EngineConfig(model=str(tiny_shifted_model), threads=1, dtype="float32", weights="native"))
    try:
        e._heap = HeapTrimmer(min_interval_s=0)
        e.score(ScoreRequest(prefix="x = ", span="y + 1", suffix="\n"))
        deadline = time.monotonic() + 10
        while e._heap.trims == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert e.metrics.passes == 0
        assert e._heap.trims >= 1
    finally:
        e.shutdown()
