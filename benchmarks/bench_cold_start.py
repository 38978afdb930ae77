"""Cold start: what a fresh process pays before its first fill (CPU, default model).

Each sample is a new interpreter, as for `dllm-lsp infill`, a spawned engine daemon
or the language server's in-process engine: import torch and the engine, build the
engine (load the checkpoint), run one fill. Optionally a baseline tree (another
checkout's `engine/` and `kernels/` on PYTHONPATH, e.g. a git worktree of an older
commit) is measured in the same run, the two arms alternating; medians are compared.

    .venv/bin/python benchmarks/bench_cold_start.py [--repeats 7] [--baseline /tmp/old-checkout] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from _bench_common import cpu_name

ROOT = Path(__file__).resolve().parents[1]

# Runs in the child: times its own phases with one clock from interpreter start.
CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.protocol import Hole, InfillRequest
t2 = time.perf_counter()
engine = Engine(EngineConfig(threads=1))
t3 = time.perf_counter()
engine.infill(InfillRequest(holes=[Hole("def area(w, h):\n    return ", "\n", 8)]))
t4 = time.perf_counter()
engine.shutdown()
print(json.dumps({"import_torch": t1 - t0, "import_engine": t2 - t1, "build_engine": t3 - t2,
                  "first_fill": t4 - t3, "total": t4 - t0, "dynamo": "torch._dynamo" in sys.modules,
                  "engine_file": sys.modules["dllm_engine"].__file__}))
"""

PHASES = ("import_torch", "import_engine", "build_engine", "first_fill", "total")


def sample(tree: Path) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(str(tree / p) for p in (".", "engine", "kernels"))}
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, cwd=tree, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"cold-start child failed in {tree}:\n{r.stderr}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if not Path(out["engine_file"]).resolve().is_relative_to(tree):
        raise SystemExit(f"{tree}: the child imported {out['engine_file']}, not this tree's engine")
    return out


def main(args) -> dict:
    arms = {"this tree": ROOT}
    if args.baseline:
        arms["baseline"] = Path(args.baseline).resolve()
    samples: dict[str, list[dict]] = {name: [] for name in arms}
    sample(ROOT)  # untimed: page cache
    for rep in range(args.repeats):
        for name, tree in arms.items():
            s = sample(tree)
            samples[name].append(s)
            print(f"repeat {rep}: {name:9s} total {s['total'] * 1000:7.0f} ms "
                  f"(build engine {s['build_engine'] * 1000:6.0f} ms)", file=sys.stderr)
    return {name: {p: statistics.median(s[p] for s in runs) * 1000 for p in PHASES} | {"dynamo": runs[-1]["dynamo"]}
            for name, runs in samples.items()}


def section(args, med: dict) -> str:
    rows = "".join(f"| {name} | " + " | ".join(f"{m[p]:.0f}" for p in PHASES) + f" | {m['dynamo']} |\n"
                   for name, m in med.items())
    out = ("\n## cold start: a fresh process to its first fill\n\n"
           f"- Command: `.venv/bin/python benchmarks/bench_cold_start.py --repeats {args.repeats}"
           f"{' --baseline ' + args.baseline if args.baseline else ''} --write`\n"
           f"- Machine: {cpu_name()}, {len(os.sched_getaffinity(0))} CPU(s), load average "
           f"{os.getloadavg()[0]:.1f} at the end, Python {platform.python_version()}, one torch thread\n"
           f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; medians of {args.repeats} fresh "
           "interpreters per arm, arms alternating\n\n"
           "| tree | import torch ms | import engine ms | build engine ms | first fill ms | total ms | "
           "imported torch._dynamo |\n|---|---:|---:|---:|---:|---:|---|\n" + rows)
    if "baseline" in med:
        a, b = med["this tree"], med["baseline"]
        out += (f"\nBuild engine {b['build_engine']:.0f} -> {a['build_engine']:.0f} ms; "
                f"fresh process to first fill {b['total']:.0f} -> {a['total']:.0f} ms "
                f"({b['total'] / a['total']:.2f}x).\n")
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--baseline", default=None, help="another checkout to measure in the same run (its engine/, kernels/)")
    p.add_argument("--write", action="store_true", help="append the section to benchmarks/RESULTS.md")
    args = p.parse_args()
    text = section(args, main(args))
    print(text)
    if args.write:
        with open(ROOT / "benchmarks" / "RESULTS.md", "a", encoding="utf-8") as f:
            f.write(text)
