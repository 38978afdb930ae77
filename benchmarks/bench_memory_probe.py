"""What keeps memory after a request on a CPU at bf16 (issue 16, defect 8): probes, one per process.

    python benchmarks/bench_memory_probe.py linear plain|buckets|plain_trim [--n 600]
        two bf16 projections ([m, 256] x [256, 704] and back, the small model's MLP) for m = 40 .. 40+n,
        unpadded (plain: a new oneDNN kernel per row count) or padded to row_buckets.py's ladder;
        plain_trim adds malloc_trim(0) at the end (is the growth free heap, or held?).
        Run once with ONEDNN_PRIMITIVE_CACHE_CAPACITY=16 in the environment for the cache cap.
    python benchmarks/bench_memory_probe.py engine [--n 300] [--trim-every K]
        a bare engine on the small model at bf16: n requests of fresh context lengths, 1-3 holes each;
        --trim-every K calls malloc_trim(0) every K requests (RSS then sampled right after a trim).
        --code DIR runs the engine of another checkout (e.g. `git worktree add DIR <commit before the fix>`).

Prints RSS (VmRSS) before and after, samples every 100 requests, and the time taken.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def trim() -> None:
    ctypes.CDLL("libc.so.6").malloc_trim(0)


def probe_linear(mode: str, n: int) -> str:
    from dllm_engine import row_buckets

    lin = row_buckets.linear if mode == "buckets" else F.linear
    w, w2 = torch.randn(704, 256, dtype=torch.bfloat16), torch.randn(256, 704, dtype=torch.bfloat16)
    for m in range(1, 40):
        lin(lin(torch.randn(m, 256, dtype=torch.bfloat16), w), w2)
    before, t0 = rss_mb(), time.perf_counter()
    for m in range(40, 40 + n):
        lin(lin(torch.randn(m, 256, dtype=torch.bfloat16), w), w2)
    seconds = time.perf_counter() - t0
    if mode == "plain_trim":
        trim()
    return f"linear {mode}: RSS {before:.0f} -> {rss_mb():.0f} MB ({rss_mb() - before:+.0f}) over {n} row counts, {seconds:.1f} s"


def probe_engine(n: int, trim_every: int) -> str:
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.protocol import Hole, InfillRequest

    engine = Engine(EngineConfig(model="small", dtype="bfloat16", threads=1))

    def request(i: int) -> None:
        body = "".join(f"    v{k} = v{k - 1} + {k}\n" for k in range(1, 2 + i % 97))
        holes = [Hole(prefix=f"def f{i}(v0):\n" + body + "    y = " + "z" * j, suffix="\n    return y\n", max_tokens=8)
                 for j in range(1 + i % 3)]
        engine.infill(InfillRequest(holes=holes))

    for i in range(50):  # warm-up
        request(i)
    if trim_every:
        trim()
    before, t0, samples = rss_mb(), time.perf_counter(), []
    for i in range(50, 50 + n):
        request(i * 7919 % 100000)  # a fresh length and text every time
        if trim_every and i % trim_every == 0:
            trim()
        if i % 100 == 0:
            samples.append(round(rss_mb()))
    seconds = time.perf_counter() - t0
    cache = engine.runner.cache
    engine.shutdown()
    return (f"engine n={n}: RSS {before:.0f} -> {rss_mb():.0f} MB ({rss_mb() - before:+.0f}); context cache "
            f"{cache.nbytes / 2**20:.1f} of {cache.max_bytes / 2**20:.1f} MB; {seconds:.1f} s; samples {samples}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("probe", choices=("linear", "engine"))
    p.add_argument("mode", nargs="?", default="plain", choices=("plain", "buckets", "plain_trim"))
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--trim-every", type=int, default=0)
    p.add_argument("--code", type=Path, default=ROOT, help="the checkout whose engine runs (default: this one)")
    args = p.parse_args()
    sys.path[:0] = [str(args.code / "engine"), str(args.code / "kernels")]
    torch.set_num_threads(1)
    if args.probe == "linear":
        print(probe_linear(args.mode, args.n or 600))
    else:
        print(probe_engine(args.n or 300, args.trim_every))
    return 0


if __name__ == "__main__":
    sys.exit(main())
