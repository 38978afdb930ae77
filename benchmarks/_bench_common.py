"""Shared timing and reporting for the benchmark scripts (torch only; no dllm_lsp imports)."""

from __future__ import annotations

import contextlib
import datetime
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch


@contextlib.contextmanager
def sources_at(root: Path, rev: str | None, folders: list[str]):
    """The repository at `root` (rev None), or a temporary folder holding its `folders` as they
    stood at commit `rev` (git archive), removed afterwards: a benchmark that draws its holes from
    this repository's own code then draws the same sample on any later checkout."""
    if not rev:
        yield root
        return
    out = Path(tempfile.mkdtemp(prefix="bench_sources_"))
    try:
        archive = subprocess.run(["git", "-C", str(root), "archive", rev, *folders],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
        yield out
    finally:
        shutil.rmtree(out)


def timer(device: str):
    """fn -> median milliseconds: CUDA events via triton.testing.do_bench on GPU, perf_counter on CPU."""
    if device == "cuda":
        from triton.testing import do_bench

        return lambda fn: do_bench(fn, warmup=25, rep=100, return_mode="median")

    def cpu_ms(fn, reps: int = 5) -> float:
        fn()  # warm-up
        samples = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(samples)

    return cpu_ms


def machine(device: str) -> str:
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        return f"{props.name} ({props.total_memory / 2**30:.0f} GiB), torch {torch.__version__}"
    return f"{cpu_name()} CPU, torch {torch.__version__}, {torch.get_num_threads()} threads"


def cpu_name() -> str:
    """The CPU's model name and vector extensions that matter for torch (platform.processor() is often empty)."""
    try:
        info = open("/proc/cpuinfo", encoding="utf-8").read()
    except OSError:
        return platform.processor() or platform.machine()
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
                platform.machine())
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    simd = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return f"{name} ({', '.join(simd) or 'no AVX2'})"


def section(title: str, device: str, lines: list[str]) -> str:
    """A RESULTS.md section: title, command, machine, date, then the body."""
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = [
        f"## {title}",
        "",
        f"- command: `python {' '.join(sys.argv)}`",
        f"- machine: {machine(device)}",
        f"- date: {when}",
        "",
    ]
    return "\n".join(head + lines) + "\n"


def emit(text: str, results: str | None) -> None:
    print(text)
    if results:
        with open(results, "a", encoding="utf-8") as fh:
            fh.write("\n" + text)


def pick_device(requested: str | None) -> str:
    if requested is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda requested but torch sees no CUDA device")
    return requested


def pct(values: list[float], q: float) -> float:
    """The q-quantile of `values` (nearest rank), as the benchmarks quote p50 / p95."""
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]
