"""Two glibc malloc arenas for the long-running processes (the language server, the daemon).

Why: glibc gives a thread that finds the heap locked an arena of its own (up to 8 per core), and
memory freed in one arena serves only that arena's later requests. The language server's threads
(the engine's, asyncio's workers, the tokenizer's) each kept their own high-water mark: in the
soak (benchmarks/bench_soak.py, issue 16 defect 8), two arenas held the language server about
100 MB lower (639 against 753 MB after warm-up, 794 against 873 MB at the end; the growth in
between is not this). mallopt(M_ARENA_MAX) at start, before any
worker thread exists, is the variable itself; a MALLOC_ARENA_MAX the user set is left alone.
`CDLL(None)` is the process's own symbols (glibc's mallopt): no library search at start-up.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_ARENA_MAX = -8  # glibc's malloc.h
ARENAS = 2


def limit_arenas(arenas: int = ARENAS) -> bool:
    """True when glibc took the limit; False elsewhere (musl, macOS) or when the user set one."""
    if os.environ.get("MALLOC_ARENA_MAX") or not sys.platform.startswith("linux"):
        return False
    try:
        return bool(ctypes.CDLL(None).mallopt(M_ARENA_MAX, arenas))
    except (OSError, AttributeError):
        return False
