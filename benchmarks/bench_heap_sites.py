"""Where the language server's memory goes: its live native heap by allocation site, after a short and a long soak.

RSS says how much, not what. This runs the language-server half of bench_soak.py (engine in
process, small model) twice under heaptrack (apt's `heaptrack`), --short and --long requests
with the same seed, ends the server while everything it holds is still held
(_serve_until_flag.py: before `shutdown`, no interpreter teardown), and compares what is
still allocated by kind of site: oneDNN (per-shape primitives; by the torch op that made
them), MKL's buffer pool, torch's brgemm kernel cache, tensor storage (by op), Python's
allocator, tree-sitter, the tokenizer. What grows between the two runs is what is not flat.
(tracemalloc covers Python's own allocations only; a torch process's growth is native.)

    python benchmarks/bench_heap_sites.py [--short 2000] [--long 6000] [--clients 50]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_soak  # noqa: E402
from _lsp_wire import WireServer  # noqa: E402

HERE = Path(__file__).resolve().parent
# First match wins, searched over the whole stack (outermost frame first).
KINDS = [("MKL buffer pool", "mkl_serv_allocate"), ("brgemm kernel cache", "cpublas::KernelCache"),
         ("oneDNN", "dnnl::"), ("tree-sitter", "ts_parser"), ("tree-sitter", "ts_subtree"),
         ("tokenizer", "tokenizers"), ("tensor storage", "alloc_cpu"), ("Python", "PyObject_Malloc"),
         ("Python", "PyMem_")]


def kind_of(stack: str) -> str:
    kind = next((name for name, needle in KINDS if needle in stack), "other")
    if kind in ("oneDNN", "tensor storage"):
        ops = re.findall(r"at::_ops::(\w+)::call", stack)
        kind += f" ({ops[0]})" if ops else ""
    return kind


def live_by_kind(data: Path) -> Counter:
    stacks = data.with_suffix(".stacks")
    subprocess.run(["heaptrack_print", "-f", str(data), "-F", str(stacks), "--flamegraph-cost-type", "leaked",
                    "-p", "0", "-a", "0", "-T", "0", "-l", "0"], check=True, stdout=subprocess.DEVNULL)
    out: Counter = Counter()
    with open(stacks, errors="replace") as f:
        for line in f:
            stack, _, cost = line.rstrip("\n").rpartition(" ")
            if cost.isdigit() and int(cost):
                out[kind_of(stack)] += int(cost)
    return out


def traced_soak(requests: int, clients: int, seed: int, work: Path) -> Counter:
    data, flag = work / f"lsp{requests}", work / f"lsp{requests}.exit"

    class Traced(WireServer):
        def __init__(self, cmd, env=None):
            super().__init__(["heaptrack", "-o", str(data), sys.executable, str(HERE / "_serve_until_flag.py")],
                             env={**env, "SERVE_EXIT_FLAG": str(flag)})

        def close(self, timeout: float = 60) -> int:
            flag.touch()  # end now, holding everything
            return self.proc.wait(timeout)

    bench_soak.WireServer = Traced
    args = argparse.Namespace(lsp=requests, clients=clients, warmup=0.1)
    out: dict = {}
    start = time.perf_counter()
    bench_soak.lsp_soak(args, random.Random(seed), out)
    print(f"  {requests} requests: {out['lsp']['answered_once']} answered once, {time.perf_counter() - start:.0f} s",
          file=sys.stderr)
    return live_by_kind(next(work.glob(f"lsp{requests}*.zst")))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--short", type=int, default=2000)
    p.add_argument("--long", type=int, default=6000)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="heap-sites-") as tmp:
        short = traced_soak(args.short, args.clients, args.seed, Path(tmp))
        long = traced_soak(args.long, args.clients, args.seed, Path(tmp))
    mb = 2**20
    print(f"Live native heap of the language server at the end of a soak (MB), {args.short} vs {args.long} requests:\n")
    print(f"| allocation site | {args.short} | {args.long} | growth |\n|---|---|---|---|")
    for kind in sorted(set(short) | set(long), key=lambda k: -(long[k] - short[k])):
        if max(short[kind], long[kind]) >= mb / 2:
            print(f"| {kind} | {short[kind] / mb:.1f} | {long[kind] / mb:.1f} | {(long[kind] - short[kind]) / mb:+.1f} |")
    total_s, total_l = sum(short.values()) / mb, sum(long.values()) / mb
    print(f"| total | {total_s:.1f} | {total_l:.1f} | {total_l - total_s:+.1f} |")


if __name__ == "__main__":
    main()
