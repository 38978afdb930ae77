"""glibc malloc settings for the long-running processes (the language server, the daemon): two
arenas, and a fixed mmap threshold.

Why: glibc gives a thread that finds the heap locked an arena of its own (up to 8 per core), and
memory freed in one arena serves only that arena's later requests. The language server's threads
(the engine's, asyncio's workers, the tokenizer's) each kept their own high-water mark: in the
soak (benchmarks/bench_soak.py, issue 16 defect 8), two arenas held the language server about
100 MB lower (639 against 753 MB after warm-up, 794 against 873 MB at the end; the growth in
between is not this). mallopt(M_ARENA_MAX) at start, before any
worker thread exists, is the variable itself; a MALLOC_ARENA_MAX the user set is left alone.

The mmap threshold: glibc serves a block above it with its own mmap, returned to the OS when
freed, and raises the threshold to the size of every such block freed (up to 32 MB), so after
the first passes every activation and buffer of a pass is carved from the arenas, where blocks
of ever-changing sizes fragment them and malloc_trim gives back only whole free pages. Fixing the threshold (which also stops the
raising) keeps those blocks out of the arenas: in the soak the language server grew +20 to +47 MB
over 9,000 requests at ~595-670 MB (three runs), against +66 MB at ~660-775 MB without
(benchmarks/RESULTS.md, issue 16 defect 8, eighth session). A MALLOC_MMAP_THRESHOLD_ the user
set is left alone. The engine raises the fixed threshold while it encodes a context, whose
blocks are large and all freed together (dllm_engine/mmap_threshold.py).
"""

from __future__ import annotations

import os

from dllm_engine import mmap_threshold  # glibc's mallopt and the fixed threshold's record; no torch

M_ARENA_MAX = -8  # glibc's malloc.h
ARENAS = 2
MMAP_THRESHOLD = 256 * 1024  # glibc's default is 128 KB, raised as blocks are freed


def limit_arenas(arenas: int = ARENAS) -> bool:
    """True when glibc took the limit; False elsewhere (musl, macOS) or when the user set one
    (glibc reads MALLOC_ARENA_MAX at start)."""
    return not os.environ.get("MALLOC_ARENA_MAX") and mmap_threshold.mallopt(M_ARENA_MAX, arenas)


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD) -> bool:
    """True when glibc took the threshold; False elsewhere or when the user set one."""
    return not os.environ.get("MALLOC_MMAP_THRESHOLD_") and mmap_threshold.fix(threshold)


def tune_malloc() -> None:
    """Both settings, at the start of a long-running command, before any worker thread."""
    limit_arenas()
    fix_mmap_threshold()
