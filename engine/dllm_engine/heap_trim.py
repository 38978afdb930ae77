"""Freed heap back to the OS every few seconds while the engine works, and when it goes idle (glibc's malloc_trim).

Why: a pass's CPU tensors come from malloc, in the arena of the thread that makes them (the
engine thread, the server's worker threads). glibc returns a freed chunk to the OS only
from the top of a heap, so the working set of a burst of requests of changing sizes stays
resident once it is freed: in a bare engine over 600 requests of fresh lengths, RSS rose
+52 MB, of which all but ~13 MB was free memory malloc_trim gives back (benchmarks/RESULTS.md,
issue 16 defect 8). `malloc_trim(0)` walks every arena and releases their free pages.
MALLOC_ARENA_MAX would have to be set before the process starts (not possible for an engine
embedded in the language server) and does not return anything by itself.

Called from the engine loop after each pass and while it waits for work (a language server
with many tabs open may never be idle); it trims only after work since the last trim (passes,
or calls served on the engine thread: a next edit's forwards and scoring run no pass, and a
next-edit burst left ~400 MB of the default model's freed heap resident uncounted),
and at most every MIN_INTERVAL_S: one trim (~8 ms at 550 MB resident) every few seconds of
work, not one per request or pass. A no-op off glibc.

First, MKL's own buffer pool is emptied (`mkl_serv_free_buffers`, what MKL documents as
mkl_free_buffers; torch links MKL in and exports only the internal name): torch's CPU flash
attention runs its bf16 GEMMs through MKL, which keeps each thread's copy buffers for reuse
and never gives them back by itself (65-69 MB of them in the language server's soak, under
heaptrack, growing with the shapes met; issue 16 defect 8, eighth session). It frees only
buffers no call is using, and the next GEMM takes a new one (a malloc of a few MB).
"""

from __future__ import annotations

import ctypes
import os
import time

MIN_INTERVAL_S = 5.0


def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim  # the process's own symbols: no library search
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to call
        return None


def _mkl_free_buffers():
    import torch

    try:
        return ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")).mkl_serv_free_buffers
    except (OSError, AttributeError):  # torch built without MKL, or not on Linux
        return None


class HeapTrimmer:
    def __init__(self, min_interval_s: float = MIN_INTERVAL_S) -> None:
        self._trim = _malloc_trim()
        self._free_mkl = _mkl_free_buffers()
        self._min_interval_s = min_interval_s
        self._last_work = 0
        self._last_time = float("-inf")  # never trimmed: monotonic time starts near boot, not at 0 s ago
        self.trims = 0

    def maybe_trim(self, work_done: int) -> bool:
        """The engine has run `work_done` passes so far: trim when passes ran since the last
        trim and the interval has passed. True when it trimmed."""
        now = time.monotonic()
        if self._trim is None or work_done == self._last_work or now - self._last_time < self._min_interval_s:
            return False
        if self._free_mkl is not None:
            self._free_mkl()  # into malloc's free lists, which the trim then returns
        self._trim(0)
        self._last_work, self._last_time = work_done, now
        self.trims += 1
        return True
