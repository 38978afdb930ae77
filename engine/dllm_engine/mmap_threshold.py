"""glibc's mmap threshold: fixed low for flat memory, raised while a context is encoded.

The long-running processes (the language server, the daemon) fix the threshold at 256 KB at
start (dllm_lsp/malloc_arenas.py: blocks above it get their own mmap, returned to the OS when
freed, so blocks of ever-changing sizes stay out of the arenas; the soak stays flat). But a
context's encoding allocates blocks of 1-6 MB a layer (a 1,000-token context of the default
model), and at 256 KB each of them was a fresh mmap, page-faulted in and unmapped again, 30
layers a forward: the first request at a new cursor place took 2.5x as long (917-925 against
354-361 ms for ~1,000 tokens on 2 cores; fixing the threshold at 4 MB for good cost the soak
+14 MB more growth, over its 50 MB budget in two runs of three; benchmarks/RESULTS.md,
twenty-third session). So while the engine thread encodes a context the threshold is raised:
the blocks come from the arena, reuse each other layer by layer, and are freed together when
the forward ends (the heap trimmer gives the pages back); then the fixed value is put back.
A next edit's forwards are as wide (its region's rows and their float32 logits, megabytes a
forward) and are raised the same way (next_edit/region_pass.py): 2x its latency in the server
without (twenty-fourth session); so are a scoring window's (scoring.py). A completion's own passes (a few rows) are not: raising the
threshold for every pass grew the soak over its budget (twenty-third session, reverted).

Only a threshold this process fixed through `fix` is raised: glibc's own moving threshold and
a MALLOC_MMAP_THRESHOLD_ the user set are left alone. A no-op off glibc.
"""

from __future__ import annotations

import ctypes
import sys
from contextlib import contextmanager
from typing import Iterator

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
# While encoding: glibc's own ceiling for its moving threshold (32 MB on 64-bit), above every
# block of a 1,024-token context of the default model (6 MB) and of a 1.5 B model's (18 MB).
RAISED = 32 * 1024 * 1024

_fixed: int | None = None  # the threshold this process fixed, to put back after an encoding


def mallopt(param: int, value: int) -> bool:
    """glibc's mallopt(param, value): True when glibc took it, False off glibc's Linux."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return bool(ctypes.CDLL(None).mallopt(param, value))  # the process's own symbols
    except (OSError, AttributeError):
        return False


def fix(threshold: int) -> bool:
    """Fix the threshold at `threshold` (glibc stops moving it), and remember it."""
    global _fixed
    if not mallopt(M_MMAP_THRESHOLD, threshold):
        return False
    _fixed = threshold
    return True


@contextmanager
def raised() -> Iterator[None]:
    """The threshold at RAISED for the block's duration, when this process fixed a lower one."""
    fixed = _fixed
    if fixed is None or fixed >= RAISED or not mallopt(M_MMAP_THRESHOLD, RAISED):
        yield
        return
    try:
        yield
    finally:
        mallopt(M_MMAP_THRESHOLD, fixed)
