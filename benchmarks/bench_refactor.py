"""`dllm-lsp refactor` throughput: holes/s batched vs one hole at a time (CPU, default model).

Same fixture repository (tests/refactor/fixtures/repo, copied --copies times
so files batch across each other), same recipe, same in-process engine and
model, in one run; modes alternate per repeat and the medians are compared.

- batched: the real pipeline (<= 64 holes per request, all files in flight at once,
  so the engine batches holes within and across files);
- one at a time: one hole per request and one request in flight (a client wrapper
  serialises requests), everything else identical.

`--canvas-cache exact,delayed` runs both canvas caches (DiffusionParams.canvas_cache)
in the same run, alternating, and counts how many batched fills the delayed cache
left identical. Diff mode only (nothing is written).

    .venv/bin/python benchmarks/bench_refactor.py [--copies 6] [--max-tokens 16] [--repeats 3]
        [--canvas-cache exact,delayed] [--threads N] [--max-batch 32] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from _bench_common import cpu_name
from stdlib_workload import write_workload
from dllm_engine.clients import EngineClient, InProcessClient
from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest

from dllm_lsp.refactor.builtin_recipes import builtin_recipe
from dllm_lsp.refactor.planner import collect_files
from dllm_lsp.refactor.runner import RunOptions, refactor_files

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "refactor" / "fixtures" / "repo"


class OneAtATime(EngineClient):
    """The baseline: requests go to the engine strictly one after another."""

    def __init__(self, inner: EngineClient) -> None:
        self.inner, self.lock = inner, asyncio.Lock()

    async def infill(self, request, on_event=None):
        async with self.lock:
            return await self.inner.infill(request, on_event)

    async def health(self):
        return await self.inner.health()


async def _measure(files, recipe, client, options) -> tuple[float, int, int, list[str]]:
    t0 = time.perf_counter()
    results = await refactor_files(files, recipe, client, options)
    elapsed = time.perf_counter() - t0
    holes = sum(len(r.outcomes) for r in results)
    applied = sum(o.applied for r in results for o in r.outcomes)
    fills = [o.fill.text if o.fill else "" for r in sorted(results, key=lambda r: r.path) for o in r.outcomes]
    return elapsed, holes, applied, fills


async def main(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="bench-refactor-"))
    if args.corpus == "stdlib":
        write_workload(work, args.stdlib_files, args.holes_per_file)
    else:
        for i in range(args.copies):
            shutil.copytree(FIXTURE, work / f"copy{i}")
    recipe = builtin_recipe(args.recipe)
    recipe = replace(recipe, max_tokens=args.max_tokens, rules=tuple(replace(r, max_tokens=None) for r in recipe.rules))
    files, _ = collect_files([str(work)], recipe)
    client = InProcessClient(model=args.model, threads=args.threads, max_batch=args.max_batch)
    await client.infill(InfillRequest(holes=[Hole("def f():\n    ", "\n", 8)]))  # load + warm up
    caches = args.canvas_cache.split(",")
    configs = {}  # (cache, mode) -> (client wrapper, options)
    for cache in caches:
        params = DiffusionParams(canvas_cache=cache)
        configs[cache, "batched"] = (client, RunOptions(apply=False, files_in_flight=len(files), jobs=1, params=params))
        configs[cache, "one_at_a_time"] = (OneAtATime(client), RunOptions(
            apply=False, files_in_flight=1, max_holes_per_request=1, jobs=1, params=params))
    await refactor_files(files, recipe, client, configs[caches[0], "batched"][1])  # untimed: parsers, caches
    times: dict[tuple, list[float]] = {k: [] for k in configs}
    # Where the engine's time goes per configuration (from its metrics): denoising passes
    # vs the context tokens it encoded, summed over the repeats.
    split = {k: {"passes": 0, "pass_s": 0.0, "context_tokens": 0} for k in configs}
    fills: dict[tuple, list[str]] = {}
    holes = 0
    health = await client.health()
    for rep in range(args.repeats):  # configurations alternate within each repeat
        for key, (c, opts) in configs.items():
            if not args.warm_contexts:
                await client.drop_caches()  # as in a fresh `dllm-lsp refactor` process: every context is encoded
            before = await client.health()
            elapsed, holes, applied, texts = await _measure(files, recipe, c, opts)
            after = await client.health()
            split[key]["passes"] += after["passes"] - before["passes"]
            split[key]["pass_s"] += (after["mean_pass_ms"] * after["passes"]
                                     - before["mean_pass_ms"] * before["passes"]) / 1000
            split[key]["context_tokens"] += after["context_tokens_encoded"] - before["context_tokens_encoded"]
            times[key].append(elapsed)
            fills[key] = texts
            print(f"repeat {rep}: {key[0]:7s} {key[1]:14s} {holes} holes in {elapsed:6.2f}s = "
                  f"{holes / elapsed:6.2f} holes/s ({applied} applied)", file=sys.stderr)
    await client.close()
    shutil.rmtree(work)
    med = {k: statistics.median(v) for k, v in times.items()}
    same = {cache: sum(a == b for a, b in zip(fills[cache, "batched"], fills[caches[0], "batched"]))
            for cache in caches}
    return {"files": len(files), "holes": holes, "median_s": med, "split": split, "caches": caches,
            "same_as_first": same,
            "dtype": health.get("dtype"), "device": health.get("device"), "threads": args.threads or "torch default",
            "ratio": {cache: med[cache, "one_at_a_time"] / med[cache, "batched"] for cache in caches}}


def _section(args, r) -> str:
    load = os.getloadavg()
    if args.corpus == "stdlib":
        corpus_flags = f"--corpus stdlib --stdlib-files {args.stdlib_files} --holes-per-file {args.holes_per_file}"
        corpus = "standard-library modules with function bodies cut, benchmarks/stdlib_workload.py"
    else:
        corpus_flags = f"--copies {args.copies}"
        corpus = f"{args.copies} copies of tests/refactor/fixtures/repo"
    cpus = len(os.sched_getaffinity(0))
    rows = "".join(
        f"| {cache} | {mode.replace('_', ' ')} | {r['median_s'][cache, mode]:.2f} | "
        f"{r['holes'] / r['median_s'][cache, mode]:.2f} | {r['split'][cache, mode]['passes']} | "
        f"{r['split'][cache, mode]['pass_s']:.2f} | {r['split'][cache, mode]['context_tokens']} |\n"
        for cache in r["caches"] for mode in ("one_at_a_time", "batched"))
    ratios = "; ".join(f"{cache} **{r['ratio'][cache]:.2f}x**" for cache in r["caches"])
    agree = ", ".join(f"{cache} {r['same_as_first'][cache]}/{r['holes']}" for cache in r["caches"][1:])
    return (
        "\n## refactor: holes/s batched vs one hole at a time\n\n"
        f"- Command: `OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} .venv/bin/python "
        f"benchmarks/bench_refactor.py {corpus_flags} --max-tokens {args.max_tokens} "
        f"--repeats {args.repeats} --recipe {args.recipe} --max-batch {args.max_batch} "
        f"--canvas-cache {args.canvas_cache}{f' --threads {args.threads}' if args.threads else ''}"
        f"{' --warm-contexts' if args.warm_contexts else ''} --write`\n"
        f"- Machine: {cpu_name()}, {cpus} CPU(s) available, load average "
        f"{load[0]:.1f} at the end (shared box), Python {platform.python_version()}, default model on "
        f"{r['device']} in {r['dtype']}, torch threads: {r['threads']}\n"
        f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC\n"
        f"- Workload: {r['files']} files ({corpus}), "
        f"{r['holes']} holes, recipe {args.recipe}, max_tokens {args.max_tokens}, threshold 0.9, "
        f"engine max_batch {args.max_batch}; configurations alternate within each repeat, medians of "
        f"{args.repeats}\n"
        "- Contexts: " + ("kept in the engine's cache between runs (warm)\n\n" if args.warm_contexts else
                          "no cached context at the start of each timed run (cold, as a fresh process)\n\n") +
        "| canvas cache | mode | median s | holes/s | passes (all repeats) | s in passes | context tokens encoded (all repeats) |\n"
        "|---|---|---:|---:|---:|---:|---:|\n" + rows +
        f"\nRatio batched / one at a time: {ratios} (target >= 4x)."
        + (f" Batched fills identical to {r['caches'][0]}'s: {agree}." if agree else "") + "\n"
    )


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", choices=("fixture", "stdlib"), default="fixture",
                   help="fixture: --copies copies of tests/refactor/fixtures/repo; stdlib: real standard-library "
                        "modules with function bodies cut (stdlib_workload.py), each hole with its own full context")
    p.add_argument("--copies", type=int, default=6)
    p.add_argument("--stdlib-files", type=int, default=18)
    p.add_argument("--holes-per-file", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--recipe", default="fill-bodies")
    p.add_argument("--model", default=None)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads for the engine (both modes)")
    p.add_argument("--max-batch", type=int, default=32, help="the engine's canvases per pass (both modes)")
    p.add_argument("--canvas-cache", default="exact",
                   help="exact, delayed, or both as 'exact,delayed' (alternated in one run; both modes each)")
    p.add_argument("--warm-contexts", action="store_true",
                   help="keep the engine's context cache between runs (a resident daemon re-running the same files); "
                        "by default every timed run starts with no cached context, as a fresh process does")
    p.add_argument("--write", action="store_true", help="append the section to benchmarks/RESULTS.md")
    args = p.parse_args()
    result = asyncio.run(main(args))
    section = _section(args, result)
    print(section)
    if args.write:
        with open(ROOT / "benchmarks" / "RESULTS.md", "a", encoding="utf-8") as f:
            f.write(section)
