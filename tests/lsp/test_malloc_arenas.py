"""The long-running commands cap glibc's malloc arenas (malloc_arenas.py), unless the user set one."""

import subprocess
import sys
from pathlib import Path

import pytest

from dllm_lsp.malloc_arenas import ARENAS, fix_mmap_threshold, limit_arenas

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt(M_ARENA_MAX) is glibc's")

# Eight threads malloc at once (ctypes drops the GIL around each call), then glibc's own
# malloc_info report says how many arenas ("<heap nr=...>") the process made.
PROBE = r"""
import ctypes, sys, threading
from dllm_lsp.malloc_arenas import limit_arenas
if sys.argv[1] == "limit":
    assert limit_arenas()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
gate = threading.Barrier(8)
def work():
    gate.wait()
    for _ in range(200):
        ptrs = [libc.malloc(4096) for _ in range(200)]
        for p in ptrs:
            libc.free(p)
threads = [threading.Thread(target=work) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
f = libc.fopen(sys.argv[2].encode(), b"w")
libc.malloc_info(0, f)
libc.fclose(f)
"""


def arenas(tmp_path, mode: str) -> int:
    out = tmp_path / f"{mode}.xml"
    env = {"PATH": "/usr/bin:/bin"}  # no MALLOC_ARENA_MAX from the caller
    subprocess.run([sys.executable, "-c", PROBE, mode, str(out)], check=True, env=env, timeout=60,
                   cwd=str(Path(__file__).resolve().parents[2]))
    return out.read_text().count("<heap nr=")


@linux
def test_threads_share_at_most_the_capped_arenas(tmp_path):
    if arenas(tmp_path, "none") <= ARENAS:  # 9 on the 2-core dev box; a single core may never contend
        pytest.skip("the probe's threads never contended for the heap here")
    assert arenas(tmp_path, "limit") <= ARENAS


@linux
def test_a_limit_the_user_set_is_left_alone(monkeypatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_arenas() is False


# A block freed, then asked for again: glibc's dynamic threshold has risen to it by then, so the
# second comes from the arena unless the threshold is fixed below it (mallinfo2's hblks: blocks
# served by their own mmap). "raised": fixed, then the block asked for inside the engine's
# mmap_threshold.raised() (a context's encoding), then once more after it.
MMAP_PROBE = r"""
import ctypes, sys
from dllm_lsp.malloc_arenas import fix_mmap_threshold
from dllm_engine.mmap_threshold import raised
class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = MallInfo2
size = int(sys.argv[2])
if sys.argv[1] != "default":
    assert fix_mmap_threshold()
def mmapped():
    before = libc.mallinfo2().hblks
    libc.free(libc.malloc(size))
    block = libc.malloc(size)
    n = libc.mallinfo2().hblks - before
    libc.free(block)
    return n
if sys.argv[1] == "raised":
    with raised():
        inside = mmapped()
    print(inside, mmapped())
else:
    print(mmapped())
"""


def mmapped_blocks(mode: str, size: int = 1 << 20) -> list[int]:
    env = {"PATH": "/usr/bin:/bin"}  # no MALLOC_MMAP_THRESHOLD_ from the caller
    out = subprocess.run([sys.executable, "-c", MMAP_PROBE, mode, str(size)], check=True, env=env, timeout=60,
                         text=True, capture_output=True, cwd=str(Path(__file__).resolve().parents[2]))
    return [int(n) for n in out.stdout.split()]


@linux
def test_a_freed_block_does_not_pull_later_ones_into_the_arena():
    assert mmapped_blocks("default") == [0]  # glibc's own behaviour, which the fix exists for
    assert mmapped_blocks("fixed") == [1]


@linux
def test_while_a_context_is_encoded_its_large_blocks_come_from_the_arena():
    """A context's encoding allocates blocks of 1-6 MB a layer: each its own mmap (page-faulted
    in, unmapped again) made the first request at a new place 2.5x as slow. The engine raises
    the threshold for the encoding (dllm_engine/mmap_threshold.py) and puts it back after."""
    assert mmapped_blocks("raised", 6 << 20) == [0, 1]


@linux
def test_a_threshold_the_user_set_is_left_alone(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    assert fix_mmap_threshold() is False
