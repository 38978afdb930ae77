"""glibc malloc settings for the long-running processes (the language server, the daemon): two
arenas, and a fixed mmap threshold.

Why: glibc gives a thread that finds the heap locked an arena of its own (up to 8 per core), and
memory freed in one arena serves only that arena's later requests. The language server's threads
(the engine's, asyncio's workers, the tokenizer's) each kept their own high-water mark: in the
soak (benchmarks/bench_soak.py, issue 16 defect 8), two arenas held the language server about
100 MB lower (639 against 753 MB after warm-up, 794 against 873 MB at the end; the growth in
between is not this). mallopt(M_ARENA_MAX) at start, before any
worker thread exists, is the variable itself; a MALLOC_ARENA_MAX the user set is left alone.
`CDLL(None)` is the process's own symbols (glibc's mallopt): no library search at start-up.

The mmap threshold: glibc serves a block above it with its own mmap, returned to the OS when
freed, and raises the threshold to the size of every such block freed (up to 32 MB), so after
the first passes every activation and buffer of a pass is carved from the arenas, where blocks
of ever-changing sizes fragment them and malloc_trim gives back only whole free pages. Fixing the threshold (which also stops the
raising) keeps those blocks out of the arenas: in the soak the language server grew +20 to +47 MB
over 9,000 requests at ~595-670 MB (three runs), against +66 MB at ~660-775 MB without
(benchmarks/RESULTS.md, issue 16 defect 8, eighth session). A MALLOC_MMAP_THRESHOLD_ the user
set is left alone.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_ARENA_MAX = -8  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
ARENAS = 2
MMAP_THRESHOLD = 256 * 1024  # glibc's default is 128 KB, raised as blocks are freed


def _mallopt(env: str, param: int, value: int) -> bool:
    """glibc's mallopt(param, value), unless the user set `env` (glibc reads it at start)
    or this is not glibc's Linux (musl, macOS): True when glibc took the value."""
    if os.environ.get(env) or not sys.platform.startswith("linux"):
        return False
    try:
        return bool(ctypes.CDLL(None).mallopt(param, value))
    except (OSError, AttributeError):
        return False


def limit_arenas(arenas: int = ARENAS) -> bool:
    """True when glibc took the limit; False elsewhere (musl, macOS) or when the user set one."""
    return _mallopt("MALLOC_ARENA_MAX", M_ARENA_MAX, arenas)


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD) -> bool:
    """True when glibc took the threshold; False elsewhere or when the user set one."""
    return _mallopt("MALLOC_MMAP_THRESHOLD_", M_MMAP_THRESHOLD, threshold)


def tune_malloc() -> None:
    """Both settings, at the start of a long-running command, before any worker thread."""
    limit_arenas()
    fix_mmap_threshold()
