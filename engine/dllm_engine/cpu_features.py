"""Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX), so bf16 is the fast dtype.

On such CPUs a denoising pass of the default model runs about 1.8x faster in
bf16 than in fp32 at batch 32 (benchmarks/RESULTS.md); elsewhere bf16 matmuls
are emulated and slower, so fp32 stays the default. DLLM_CPU_BF16=0/1 overrides.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

NATIVE_BF16_FLAGS = {"avx512_bf16", "amx_bf16"}


@functools.cache
def native_bf16() -> bool:
    forced = os.environ.get("DLLM_CPU_BF16")
    if forced in ("0", "1"):
        return forced == "1"
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: no cheap way to tell, keep fp32
        return False
    for line in info.splitlines():
        if line.startswith("flags"):
            return bool(NATIVE_BF16_FLAGS & set(line.split(":", 1)[1].split()))
    return False
